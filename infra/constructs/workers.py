"""Fargate workers for the `fargate` runtime queues (`duetime worker --runtime fargate`).

The equivalent of `aws_ecs_patterns.QueueProcessingFargateService` over three queues (the
pattern scales on one queue and injects a QUEUE_NAME variable the worker does not read): an
ECS service whose task count follows the fargate queues' depth, from `fargate_min_tasks` (0
by default: no cost when idle) to `fargate_max_tasks`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs
from constructs import Construct

from duetime.domain.jobs import Runtime
from infra.constructs.functions import POWERTOOLS_TRACE_DISABLED
from infra.constructs.nag import acknowledge
from infra.packaging import REPO_ROOT

if TYPE_CHECKING:
    from infra.constructs.data import Data
    from infra.constructs.functions import FunctionFactory
    from infra.constructs.history import History
    from infra.constructs.queues import Queues
    from infra.props import SchedulerProps

# ECS sends SIGTERM, waits this long, then SIGKILL (120 s is Fargate's maximum). The worker
# lets in-flight runs finish for WORKER_STOP_TIMEOUT, then releases what it still holds.
CONTAINER_STOP_TIMEOUT = Duration.seconds(120)
WORKER_STOP_TIMEOUT_SECONDS = 90
WORKER_COMMAND = ("duetime", "worker", "--runtime", "fargate")  # the Dockerfile's ENTRYPOINT
# What the task's code calls: the same reads/writes as the Lambda worker, and the SQS calls
# of its own polling loop (duetime.services.queue_worker).
TASK_JOBS_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem")
TASK_RUNS_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem")
TASK_QUEUE_ACTIONS = (
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",  # also authorizes DeleteMessageBatch
    "sqs:ChangeMessageVisibility",
    "sqs:SendMessage",
)
SCALING_PERIOD = Duration.minutes(1)


class FargateWorkers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        factory: FunctionFactory,
        data: Data,
        queues: Queues,
        history: History,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self._queues = queues
        self.vpc, self._subnets, self._public_ip = self._network(history)
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            container_insights_v2=(
                ecs.ContainerInsights.ENABLED
                if props.container_insights
                else ecs.ContainerInsights.DISABLED
            ),
            enable_fargate_capacity_providers=props.fargate_spot,
        )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=props.log_retention, removal_policy=props.removal_policy
        )
        self.task_definition = self._task_definition(factory)
        self._grant(data, factory)
        self.service = self._service()
        self.backlog = self._backlog_metric()
        self._autoscale()

    def _network(self, history: History) -> tuple[ec2.IVpc, ec2.SubnetSelection, bool]:
        props = self._props
        if props.vpc is not None:
            subnets = props.vpc_subnets or ec2.SubnetSelection(
                subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
            )
            return props.vpc, subnets, False
        # Public subnets and a public IP per task instead of NAT gateways (~$33/month each):
        # the tasks only make outbound calls and the security group admits nothing inbound.
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                )
            ],
        )
        # DynamoDB and S3 traffic stays on the AWS network (gateway endpoints are free).
        vpc.add_gateway_endpoint(
            "DynamoDbEndpoint", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB
        )
        vpc.add_gateway_endpoint("S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3)
        vpc.add_flow_log(
            "FlowLogs",
            destination=ec2.FlowLogDestination.to_s3(history.access_logs, "vpc-flow-logs/"),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        return vpc, ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC), True

    def _task_definition(self, factory: FunctionFactory) -> ecs.FargateTaskDefinition:
        props = self._props
        task = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=props.fargate_cpu,
            memory_limit_mib=props.fargate_memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        worker = task.add_container(
            "Worker",
            # Built from the repository's Dockerfile at deploy time (no Docker needed to synth).
            image=ecs.ContainerImage.from_asset(
                str(REPO_ROOT), file="Dockerfile", platform=ecr_assets.Platform.LINUX_ARM64
            ),
            command=[
                "--concurrency",
                str(props.fargate_task_concurrency),
                "--stop-timeout-seconds",
                str(WORKER_STOP_TIMEOUT_SECONDS),
            ],
            environment={
                **factory.worker_env,
                # No X-Ray daemon beside the task: Powertools' tracer stays off.
                POWERTOOLS_TRACE_DISABLED: "true",
            },
            logging=ecs.LogDrivers.aws_logs(stream_prefix="worker", log_group=self.log_group),
            stop_timeout=CONTAINER_STOP_TIMEOUT,
            # It writes nothing to disk (PYTHONDONTWRITEBYTECODE; logs go to stdout), and runs
            # as a user of its own (the Dockerfile's USER); /tmp is a scratch volume of the
            # task, for operator handlers that write temporary files (found by review).
            readonly_root_filesystem=True,
        )
        task.add_volume(name="scratch")
        worker.add_mount_points(
            ecs.MountPoint(container_path="/tmp", source_volume="scratch", read_only=False)  # noqa: S108
        )
        acknowledge(
            task,
            "AwsSolutions-ECS2",
            "The environment holds configuration only (table names, queue URLs, "
            "settings), the same as the Lambda functions'; no secrets.",
        )
        acknowledge(
            task,
            "AwsSolutions-IAM5[Resource::*]",
            "Execution role: ecr:GetAuthorizationToken has no resource-level "
            "permission; image pulls are scoped to the CDK assets repository.",
        )
        return task

    def _grant(self, data: Data, factory: FunctionFactory) -> None:
        role = self.task_definition.task_role
        data.jobs.grant(role, *TASK_JOBS_ACTIONS)
        data.runs.grant(role, *TASK_RUNS_ACTIONS)
        data.grant_secrets(role)  # sign HTTP deliveries
        for run_queue in self._queues.of_runtime(Runtime.FARGATE):
            run_queue.grant(role, *TASK_QUEUE_ACTIONS)
            run_queue.dlq.grant(role, "sqs:SendMessage")
        for run_queue in self._queues.of_runtime(Runtime.LAMBDA):
            run_queue.grant(role, "sqs:SendMessage")  # a dependent on the other runtime
        factory.reach_targets(role)  # targets: as the target role only
        factory.grant_run_signing(role)  # verify and sign run messages

    def _service(self) -> ecs.FargateService:
        props = self._props
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=self.vpc,
            description="duetime Fargate workers: outbound only",
            allow_all_outbound=True,
        )
        spot = [
            ecs.CapacityProviderStrategy(capacity_provider="FARGATE_SPOT", weight=1),
        ]
        return ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            # No DesiredCount: a deploy keeps the count the scaling set (one set it back to the
            # minimum, stopping a burst's tasks: until 2026-11-30).
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            assign_public_ip=self._public_ip,
            vpc_subnets=self._subnets,
            security_groups=[security_group],
            capacity_provider_strategies=spot if props.fargate_spot else None,
        )

    def _backlog_metric(self) -> cloudwatch.MathExpression:
        """Messages waiting or in flight on the three fargate queues (every lane of each)."""
        metrics: dict[str, cloudwatch.IMetric] = {}
        lanes = [lane for q in self._queues.of_runtime(Runtime.FARGATE) for lane in q.lanes]
        for i, queue in enumerate(lanes):
            metrics[f"v{i}"] = queue.metric_approximate_number_of_messages_visible(
                period=SCALING_PERIOD, statistic="Maximum"
            )
            metrics[f"f{i}"] = queue.metric_approximate_number_of_messages_not_visible(
                period=SCALING_PERIOD, statistic="Maximum"
            )
        return cloudwatch.MathExpression(
            expression="+".join(f"FILL({name}, 0)" for name in metrics),
            using_metrics=metrics,
            label="fargate backlog (visible + in flight)",
            period=SCALING_PERIOD,
        )

    def _autoscale(self) -> None:
        """Exact capacity from the backlog: each task runs `fargate_task_concurrency` runs at
        once, so the count doubles as the backlog fills them (1, 2, 4, … up to the maximum),
        and drops to the minimum once nothing is waiting or running."""
        props = self._props
        scaling = self.service.auto_scale_task_count(
            min_capacity=props.fargate_min_tasks, max_capacity=props.fargate_max_tasks
        )
        scaling.scale_on_metric(
            "ScaleOnBacklog",
            metric=self.backlog,
            adjustment_type=autoscaling.AdjustmentType.EXACT_CAPACITY,
            scaling_steps=scaling_steps(
                props.fargate_min_tasks, props.fargate_max_tasks, props.fargate_task_concurrency
            ),
            cooldown=Duration.minutes(1),
        )


def scaling_steps(min_tasks: int, max_tasks: int, slots: int) -> list[autoscaling.ScalingInterval]:
    """(backlog interval → task count): 0 → min; then 1, 2, 4, … tasks as the backlog
    reaches their `slots` each, capped at max."""
    steps = [autoscaling.ScalingInterval(upper=0, change=min_tasks)]
    lower, tasks = 1, max(1, min_tasks)
    while tasks < max_tasks:
        upper = tasks * slots
        if upper > lower:
            steps.append(autoscaling.ScalingInterval(lower=lower, upper=upper, change=tasks))
            lower = upper
        tasks = min(max_tasks, tasks * 2)
    steps.append(autoscaling.ScalingInterval(lower=lower, change=max_tasks))
    return steps
