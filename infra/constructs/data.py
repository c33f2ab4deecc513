"""DynamoDB tables: jobs, timers, runs, with the key schemas of `duetime.resources`; and the
KMS key that encrypts the tenants' webhook secrets stored in the jobs table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from duetime.resources import JOBS_TABLE, RUNS_TABLE, TIMERS_TABLE, TableDef
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from infra.props import SchedulerProps

_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}
_STREAM_VIEWS = {
    "OLD_IMAGE": dynamodb.StreamViewType.OLD_IMAGE,
    "NEW_IMAGE": dynamodb.StreamViewType.NEW_IMAGE,
    "NEW_AND_OLD_IMAGES": dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    "KEYS_ONLY": dynamodb.StreamViewType.KEYS_ONLY,
}
# Provisioned tables scale to keep this share of their capacity in use.
_TARGET_UTILIZATION_PERCENT = 70
# What duetime.adapters.kms.KmsCipher calls: GenerateDataKey makes a secret (and its
# ciphertext) without the plain key ever being sent, Decrypt opens it. No kms:Encrypt.
SECRETS_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


class Data(Construct):
    """The three tables. Items are small and never deleted by the code: TTL removes them for
    free, and the runs table's stream (old images) feeds expired runs to the archiver."""

    def __init__(self, scope: Construct, construct_id: str, props: SchedulerProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self.jobs = self._table("Jobs", JOBS_TABLE)
        self.timers = self._table("Timers", TIMERS_TABLE)
        self.runs = self._table("Runs", RUNS_TABLE)
        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description="duetime: the tenants' webhook signing secrets (jobs table)",
            enable_key_rotation=True,
            rotation_period=Duration.days(365),
            removal_policy=props.removal_policy,
        )

        # The key that signs run messages (duetime.domain.messages.MessageAuth): only duetime's
        # engine functions and the Fargate task may read it. Rotation: docs/security.md.
        self.run_signing_secret = secretsmanager.Secret(
            self,
            "RunSigningKey",
            description="duetime: signs the run messages on its queues (HMAC-SHA256)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True, include_space=False
            ),
            removal_policy=props.removal_policy,
        )
        acknowledge(
            self.run_signing_secret,
            "AwsSolutions-SMG4",
            "Rotated by the operator, without downtime: the secret holds comma-separated keys, "
            "the first signs and all verify (docs/security.md, 'Run messages').",
        )

    def grant_secrets(self, grantee: iam.IGrantable) -> None:
        """Make and read webhook secrets: only with a `tenant` encryption context, the one
        duetime.adapters.kms.KmsCipher always sends."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(SECRETS_KEY_ACTIONS),
                resources=[self.secrets_key.key_arn],
                conditions={
                    "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["tenant"]},
                    "Null": {"kms:EncryptionContextKeys": "false"},
                },
            )
        )

    @property
    def tables(self) -> tuple[dynamodb.Table, ...]:
        return (self.jobs, self.timers, self.runs)

    def _table(self, construct_id: str, definition: TableDef) -> dynamodb.Table:
        props = self._props
        provisioned = props.billing_mode == "provisioned"
        table = dynamodb.Table(
            self,
            construct_id,
            partition_key=_attribute(definition.partition_key),
            sort_key=_attribute(definition.sort_key),
            time_to_live_attribute=definition.ttl_attribute,
            stream=_STREAM_VIEWS[definition.stream] if definition.stream else None,
            billing_mode=(
                dynamodb.BillingMode.PROVISIONED
                if provisioned
                else dynamodb.BillingMode.PAY_PER_REQUEST
            ),
            read_capacity=props.read_capacity if provisioned else None,
            write_capacity=props.write_capacity if provisioned else None,
            warm_throughput=_warm_throughput(props, definition),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=props.retain_data,
            removal_policy=props.removal_policy,
        )
        if provisioned and props.max_capacity is not None:
            self._autoscale(table)
        return table

    def _autoscale(self, table: dynamodb.Table) -> None:
        props = self._props
        assert props.max_capacity is not None
        reads = table.auto_scale_read_capacity(
            min_capacity=props.read_capacity, max_capacity=props.max_capacity
        )
        reads.scale_on_utilization(target_utilization_percent=_TARGET_UTILIZATION_PERCENT)
        writes = table.auto_scale_write_capacity(
            min_capacity=props.write_capacity, max_capacity=props.max_capacity
        )
        writes.scale_on_utilization(target_utilization_percent=_TARGET_UTILIZATION_PERCENT)


def _warm_throughput(props: SchedulerProps, definition: TableDef) -> dynamodb.WarmThroughput | None:
    """The table's pre-warmed throughput (`warm_throughput` prop, by table name): a new or
    quiet table takes that many request units per second at once, without throttling while
    on-demand capacity catches up with a sudden peak."""
    warm = props.warm_throughput.get(definition.name)
    if warm is None:
        return None
    return dynamodb.WarmThroughput(
        read_units_per_second=warm.reads, write_units_per_second=warm.writes
    )


def _attribute(key: tuple[str, str]) -> dynamodb.Attribute:
    name, kind = key
    return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[kind])
