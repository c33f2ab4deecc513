"""The function factory: every duetime Lambda function is built with the same settings.

arm64, one Python runtime, the code asset of `infra.packaging`, the AWS-managed Powertools
layer, JSON logs in a log group with a retention, X-Ray tracing, and an environment whose
names come from `duetime.settings.Env` (the module the code reads them with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import jsii
from aws_cdk import Duration, IStableListProducer, IStableStringProducer, Lazy, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from duetime.settings import Env
from infra import packaging
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from infra.constructs.data import Data
    from infra.constructs.queues import Queues
    from infra.props import SchedulerProps

# Read by Powertools (duetime.observability): service name = the metrics' service dimension.
POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
POWERTOOLS_TRACE_DISABLED = "POWERTOOLS_TRACE_DISABLED"

POWERTOOLS_LAYER_ACCOUNT = "017000801446"
PANDAS_LAYER_ACCOUNT = "336392948345"

_RUNTIMES = {"3.12": lambda_.Runtime.PYTHON_3_12, "3.13": lambda_.Runtime.PYTHON_3_13}

# What a job target may need: one action per kind of target ARN (duetime.targets.aws).
TARGET_ACTIONS = {
    "sqs": "sqs:SendMessage",
    "sns": "sns:Publish",
    "events": "events:PutEvents",
    "lambda": "lambda:InvokeFunction",
}
TARGET_KMS_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


class FunctionFactory(Construct):
    """Creates functions with the common settings; holds the code asset and the layers."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        data: Data,
        queues: Queues,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self.runtime = _RUNTIMES[props.python_version]
        self.code = lambda_.Code.from_asset(str(packaging.lambda_asset_dir()))
        region = Stack.of(self).region
        tag = props.python_version.replace(".", "")
        self.powertools_layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "PowertoolsLayer",
            props.powertools_layer_arn
            or f"arn:aws:lambda:{region}:{POWERTOOLS_LAYER_ACCOUNT}:layer:"
            f"AWSLambdaPowertoolsPythonV3-python{tag}-arm64:{props.powertools_layer_version}",
        )
        # pyarrow for the archive functions (arm64 wheels can't be copied from this machine).
        self.pandas_layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "PandasLayer",
            props.pandas_layer_arn
            or f"arn:aws:lambda:{region}:{PANDAS_LAYER_ACCOUNT}:layer:"
            f"AWSSDKPandas-Python{tag}-Arm64:{props.pandas_layer_version}",
        )
        self.observability_env = {
            POWERTOOLS_SERVICE_NAME: props.service_name,
            POWERTOOLS_METRICS_NAMESPACE: props.metrics_namespace,
        }
        self._run_signing_secret = data.run_signing_secret
        # Workers reach AWS targets as this role (duetime.targets.AwsClients): it may do
        # exactly what the operator's target ARNs need, and nothing to duetime's own
        # resources. It trusts the workers' roles only (`reach_targets`): no other principal
        # of the account may assume it, whatever its own policies allow.
        self._target_assumers = _Arns()
        self.target_role = iam.Role(
            self,
            "TargetRole",
            assumed_by=iam.AccountPrincipal(Stack.of(self).account).with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": Lazy.list(self._target_assumers)}}
            ),
            description="duetime: what job targets may reach (assumed by the workers)",
        )
        grant_targets(self.target_role, props.target_resource_arns, props.target_kms_key_arns)
        # What the engine (api, sweeper, worker: duetime.settings.Settings) reads.
        self.engine_env = {
            Env.JOBS_TABLE: data.jobs.table_name,
            Env.TIMERS_TABLE: data.timers.table_name,
            Env.RUNS_TABLE: data.runs.table_name,
            Env.QUEUES: queues.settings_json(),
            Env.TIMER_SHARDS: str(props.timer_shards),
            Env.JOB_PARTITIONS: str(props.job_partitions),
            Env.WORKER_TIMEOUT_SECONDS: str(props.worker_timeout_seconds),
            Env.RUN_TTL_SECONDS: str(props.hot_window_days * 86_400),
            Env.ALLOW_PRIVATE_TARGETS: "false",
            Env.REQUIRE_HTTPS: "true",
            Env.SECRETS_KEY_ARN: data.secrets_key.key_arn,
            Env.WEBHOOK_SECRET_GRACE_SECONDS: str(props.webhook_secret_grace_seconds),
            Env.RUN_SIGNING_SECRET_ARN: data.run_signing_secret.secret_arn,
            # CloudFormation starts every name it generates with the stack's name.
            Env.RESOURCE_PREFIX: Stack.of(self).stack_name,
            Env.TARGET_ROLE_ARN: self.target_role.role_arn,
            **self.observability_env,
        }
        if props.tenant_target_names:  # the API refuses at submission, the workers at each run
            self.engine_env[Env.TENANT_TARGET_NAMES] = props.tenant_target_names
        # The workers' (Lambda and Fargate): what only they read. Kept out of the others'
        # environment, which the lanes' queue names fill towards Lambda's 4 KB. Among it, the
        # archive-failure queue, which no target may name (Settings.own_resources): the
        # workers, which deliver, refuse it by name since 2026-11-30 (before, by the stack-name
        # prefix only; found by an outside audit). The API refuses it at submission by that
        # prefix: its URL would take the API's environment past 4 KB at the most lanes
        # (tests/infra/test_lanes.py). Built later (History needs this factory): rendered at
        # synth.
        self._archive_failures = _Later("the archive-failure queue's URL")
        self.worker_env = {
            **self.engine_env,
            Env.CLAIM_LEAD_MS: str(props.claim_lead_ms),
            Env.ARCHIVE_FAILURE_QUEUE_URL: Lazy.string(self._archive_failures),
        }

    def create(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        timeout_seconds: int,
        environment: Mapping[str, str],
        memory_mib: int = 512,
        reserved_concurrency: int | None = None,
        with_pyarrow: bool = False,
    ) -> lambda_.Function:
        """A function running `duetime.entrypoints.<name>.handler` (infra.packaging)."""
        props = self._props
        log_group = logs.LogGroup(
            scope,
            f"{construct_id}Logs",
            retention=props.log_retention,
            removal_policy=props.removal_policy,
        )
        # Its own role, which may write to its own log group only: AWSLambdaBasicExecutionRole,
        # the default, grants the log actions on every log group of the account (a function
        # could forge another's metric lines; found by an outside audit).
        role = iam.Role(
            scope,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"duetime {name}: its own log group, and what its code calls",
        )
        log_group.grant_write(role)
        layers: list[lambda_.ILayerVersion] = [self.powertools_layer]
        if with_pyarrow:
            layers.append(self.pandas_layer)
        function = lambda_.Function(
            scope,
            construct_id,
            description=description,
            runtime=self.runtime,
            architecture=lambda_.Architecture.ARM_64,
            handler=packaging.handler(name),
            code=self.code,
            layers=layers,
            timeout=Duration.seconds(timeout_seconds),
            memory_size=memory_mib,
            environment=dict(environment),
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=log_group,
            role=role,
            reserved_concurrent_executions=reserved_concurrency,
        )
        if Env.RUN_SIGNING_SECRET_ARN in environment:
            # Functions of the engine sign or verify run messages: they read the key.
            self.grant_run_signing(function)
        acknowledge(
            function,
            "AwsSolutions-IAM5[Resource::*]",
            "Actions without resource-level permissions, granted on '*': "
            "xray:PutTraceSegments/PutTelemetryRecords (tracing) and, for the stream "
            "consumer, dynamodb:ListStreams (both by CDK); for the API's operator figures, "
            "cloudwatch:GetMetricData (read only).",
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            f"python{props.python_version} (the python_version prop) is pinned to a runtime "
            "both managed layers (Powertools v3 and AWS SDK for pandas, arm64) are published "
            "for; a runtime upgrade goes with the layer versions. The code runs on 3.11+.",
        )
        return function

    def archive_failures_to(self, queue: sqs.IQueue) -> None:
        """Name the archive-failure queue in the workers' environment (History calls it)."""
        self._archive_failures.value = queue.queue_url

    def reach_targets(self, worker: iam.IRole) -> None:
        """Let a worker's role act as the target role: its AWS targets are reached with its
        credentials (duetime.targets.AwsClients). Both sides: the worker's policy allows the
        assume, and the target role's trust names the worker's role."""
        self.target_role.grant_assume_role(worker)
        self._target_assumers.arns.append(worker.role_arn)

    def grant_run_signing(self, grantee: iam.IGrantable) -> None:
        """Read the key that signs run messages (every engine function, the Fargate task)."""
        self._run_signing_secret.grant_read(grantee)


@jsii.implements(IStableListProducer)
class _Arns:
    """A list rendered when the template is: the roles that may assume the target role,
    known only once the workers are built."""

    def __init__(self) -> None:
        self.arns: list[str] = []

    def produce(self) -> list[str]:
        return list(self.arns)


@jsii.implements(IStableStringProducer)
class _Later:
    """A string rendered when the template is, set once what it names is built."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.value: str | None = None

    def produce(self) -> str:
        if self.value is None:
            raise RuntimeError(f"{self.what} was never set")
        return self.value


def grant_targets(
    grantee: iam.Role,
    resource_arns: Sequence[str],
    kms_key_arns: Sequence[str] = (),
) -> None:
    """Let a worker deliver to the operator's target resources: for each ARN exactly the
    action its kind of target calls (an unresolved token gets the four target actions, each
    of which only applies to its own kind of resource)."""
    by_action: dict[str, list[str]] = {}
    for arn in resource_arns:
        for action in _target_actions(arn):
            by_action.setdefault(action, []).append(arn)
    for action, arns in sorted(by_action.items()):
        iam.Grant.add_to_principal(grantee=grantee, actions=[action], resource_arns=arns)
    if kms_key_arns:
        # Only through SQS and SNS, encrypting a message for a target: not the keys directly
        # (found by an outside audit).
        region = Stack.of(grantee).region
        services = [f"{service}.{region}.amazonaws.com" for service in ("sqs", "sns")]
        grantee.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(TARGET_KMS_ACTIONS),
                resources=list(kms_key_arns),
                conditions={"StringEquals": {"kms:ViaService": services}},
            )
        )


def _target_actions(arn: str) -> list[str]:
    if Token.is_unresolved(arn):
        return list(TARGET_ACTIONS.values())
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or parts[2] not in TARGET_ACTIONS:
        raise ValueError(
            f"target_resource_arns: {arn!r} is not the ARN of an SQS queue, SNS topic, "
            "EventBridge event bus or Lambda function"
        )
    if "*" in arn:
        raise ValueError(f"target_resource_arns: {arn!r}: name each resource, no wildcards")
    return [TARGET_ACTIONS[parts[2]]]
