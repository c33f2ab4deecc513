"""Execution history: runs expire from DynamoDB into Parquet in S3, queryable with Athena.

runs table ─TTL delete─▶ stream (old image) ─▶ archiver λ ─▶ s3://<bucket>/history/dt=…/
compactor λ (daily) rewrites a day's small files; Glue table (partition projection on dt)
+ Athena workgroup (encrypted results, bytes-scanned cutoff) make it SQL.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from aws_cdk import Duration, Stack, Token
from aws_cdk import aws_athena as athena
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from duetime.history.schema import PARTITION_KEY, PREFIX, TABLE_NAME, glue_columns
from duetime.settings import Env
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from infra.constructs.data import Data
    from infra.constructs.functions import FunctionFactory
    from infra.props import SchedulerProps

ATHENA_RESULTS_PREFIX = "athena-results/"
ATHENA_RESULTS_EXPIRY = Duration.days(30)
ACCESS_LOGS_EXPIRY = Duration.days(90)
COMPACTION_SCHEDULE = events.Schedule.cron(minute="30", hour="1")  # 01:30 UTC: yesterday
HISTORY_OBJECTS = f"{PREFIX}*"
# TTL deletions are done by the DynamoDB service; any other delete is not an expiry and is
# not archived. Filtering at the event source means Lambda is never invoked (nor billed) for
# the runs table's INSERT/MODIFY records, two per run.
TTL_REMOVE_FILTER = lambda_.FilterCriteria.filter(
    {
        "eventName": lambda_.FilterRule.is_equal("REMOVE"),
        "userIdentity": {
            "type": lambda_.FilterRule.is_equal("Service"),
            "principalId": lambda_.FilterRule.is_equal("dynamodb.amazonaws.com"),
        },
    }
)
_PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
_PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
_PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


class History(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        factory: FunctionFactory,
        data: Data,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self.access_logs = self._access_logs_bucket()
        self.bucket = self._history_bucket()
        self.failure_queue = self._failure_queue()
        factory.archive_failures_to(self.failure_queue)
        self.archiver = self._archiver(factory, data)
        self.compactor = self._compactor(factory)
        self.database_name = _glue_name(Stack.of(self).stack_name) + "_history"
        self.table_name = TABLE_NAME
        self.database = self._database()
        self.table = self._table()
        self.workgroup = self._workgroup()

    @property
    def location(self) -> str:
        return f"s3://{self.bucket.bucket_name}/{PREFIX}"

    # --- storage

    def _access_logs_bucket(self) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # log delivery requires SSE-S3
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(id="expire-logs", expiration=ACCESS_LOGS_EXPIRY)],
            removal_policy=self._props.removal_policy,
        )
        return bucket

    def _history_bucket(self) -> s3.Bucket:
        props = self._props
        return s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="history-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-history",
                    prefix=PREFIX,
                    expiration=Duration.days(props.history_retention_days),
                ),
                s3.LifecycleRule(
                    id="expire-athena-results",
                    prefix=ATHENA_RESULTS_PREFIX,
                    expiration=ATHENA_RESULTS_EXPIRY,
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
            removal_policy=props.removal_policy,
        )

    def _failure_queue(self) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            "ArchiveFailures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead end of the archive path (malformed records "
            "and batches out of retries); an operator reads it, nothing consumes it.",
        )
        return queue

    # --- functions

    def _archiver(self, factory: FunctionFactory, data: Data) -> lambda_.Function:
        props = self._props
        archiver = factory.create(
            self,
            "Archiver",
            name="archiver",
            description="duetime archiver: expired runs (stream) to Parquet in S3",
            timeout_seconds=props.archiver_timeout_seconds,
            memory_mib=1024,
            environment={
                Env.HISTORY_BUCKET: self.bucket.bucket_name,
                Env.ARCHIVE_FAILURE_QUEUE_URL: self.failure_queue.queue_url,
                **factory.observability_env,
            },
            with_pyarrow=True,
        )
        self.bucket.grant_put(archiver, HISTORY_OBJECTS)
        self.failure_queue.grant(archiver, "sqs:SendMessage")
        self.archiver_source = sources.DynamoEventSource(
            data.runs,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            # Few, larger Parquet objects: up to 1,000 records or 5 minutes per batch.
            batch_size=1000,
            max_batching_window=Duration.minutes(5),
            # No bisection: object names derive from a batch's first and last sequence numbers,
            # so a retried *whole* batch overwrites its objects while a retried half would be
            # written under a new name and duplicate rows (duetime.history.archive).
            bisect_batch_on_error=False,
            # A failed batch (S3 or SQS out) is retried until its records are 23 hours old,
            # not a few times: the stream keeps them 24 hours, and a dropped batch is up to
            # 1,000 runs missing from the archive. Only then is it discarded, its pointer (the
            # shard and sequence range) in the failure queue (docs/history.md).
            max_record_age=Duration.hours(23),
            on_failure=sources.SqsDlq(self.failure_queue),
            filters=[TTL_REMOVE_FILTER],
        )
        archiver.add_event_source(self.archiver_source)
        acknowledge(
            archiver,
            f"AwsSolutions-IAM5[Resource::<{self._logical_id(self.bucket)}.Arn>/history/*]",
            "The archiver writes new objects under the history/ prefix only; their "
            "names are derived from each stream batch.",
        )
        acknowledge(
            archiver,
            "AwsSolutions-IAM5[Action::s3:Abort*]",
            "grant_put: abort its own multipart uploads under history/.",
        )
        return archiver

    def _compactor(self, factory: FunctionFactory) -> lambda_.Function:
        props = self._props
        compactor = factory.create(
            self,
            "Compactor",
            name="compactor",
            description="duetime compactor: rewrites a day's small Parquet files into few",
            timeout_seconds=props.compactor_timeout_seconds,
            memory_mib=2048,
            # One compaction at a time (duetime.history.compaction): a scheduled run and a manual
            # invoke that overlapped on a partition would each merge part of it.
            reserved_concurrency=1,
            environment={
                Env.HISTORY_BUCKET: self.bucket.bucket_name,
                # Partitions older than the hot window no longer receive writes: compact those.
                Env.RUN_TTL_SECONDS: str(props.hot_window_days * 86_400),
                **factory.observability_env,
            },
            with_pyarrow=True,
        )
        # Reads: the objects under history/, and a listing of that prefix only (what
        # HistoryBucket.list asks for: ListObjectsV2 with Prefix history/dt=<day>/), not
        # grant_read, whose s3:List* and s3:GetBucket* on the bucket let it list every key
        # (the operators' Athena results too) and read the bucket's configuration (found by
        # an outside audit).
        iam.Grant.add_to_principal(
            grantee=compactor,
            actions=["s3:GetObject"],
            resource_arns=[self.bucket.arn_for_objects(HISTORY_OBJECTS)],
        )
        iam.Grant.add_to_principal(
            grantee=compactor,
            actions=["s3:ListBucket"],
            resource_arns=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [HISTORY_OBJECTS]}},
        )
        self.bucket.grant_put(compactor, HISTORY_OBJECTS)
        self.bucket.grant_delete(compactor, HISTORY_OBJECTS)
        self.compaction_rule = events.Rule(
            self,
            "CompactionSchedule",
            description="duetime: compact yesterday's history partition",
            schedule=COMPACTION_SCHEDULE,
        )
        self.compaction_rule.add_target(targets.LambdaFunction(compactor, retry_attempts=2))
        acknowledge(
            compactor,
            f"AwsSolutions-IAM5[Resource::<{self._logical_id(self.bucket)}.Arn>/history/*]",
            "The compactor reads, rewrites and deletes the objects of one day's "
            "partition under history/; object names are not known in advance.",
        )
        for action in ("s3:Abort*", "s3:DeleteObject*"):
            acknowledge(
                compactor,
                f"AwsSolutions-IAM5[Action::{action}]",
                "CDK's grant_put/grant_delete on history/* only: writing the merged "
                "object and deleting the small ones it replaces in the partition.",
            )
        return compactor

    # --- SQL

    def _database(self) -> glue.CfnDatabase:
        return glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Stack.of(self).account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description="duetime execution history",
            ),
        )

    def _table(self) -> glue.CfnTable:
        start = self._props.history_start_date
        table = glue.CfnTable(
            self,
            "RunsTable",
            catalog_id=Stack.of(self).account,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=TABLE_NAME,
                description="duetime runs, one row per finished run (archiver's Parquet)",
                table_type="EXTERNAL_TABLE",
                parameters={
                    "classification": "parquet",
                    "EXTERNAL": "TRUE",
                    # Partition projection: Athena computes the dt partitions, no crawler and
                    # no partition writes.
                    "projection.enabled": "true",
                    f"projection.{PARTITION_KEY}.type": "date",
                    f"projection.{PARTITION_KEY}.range": f"{start},NOW",
                    f"projection.{PARTITION_KEY}.format": "yyyy-MM-dd",
                    f"projection.{PARTITION_KEY}.interval": "1",
                    f"projection.{PARTITION_KEY}.interval.unit": "DAYS",
                    "storage.location.template": (
                        f"{self.location}{PARTITION_KEY}=${{{PARTITION_KEY}}}/"
                    ),
                },
                partition_keys=[glue.CfnTable.ColumnProperty(name=PARTITION_KEY, type="string")],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=self.location,
                    input_format=_PARQUET_INPUT,
                    output_format=_PARQUET_OUTPUT,
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library=_PARQUET_SERDE,
                        parameters={"serialization.format": "1"},
                    ),
                    columns=[
                        glue.CfnTable.ColumnProperty(name=name, type=kind)
                        for name, kind in glue_columns()
                    ],
                ),
            ),
        )
        table.node.add_dependency(self.database)  # the name is a literal, not a Ref
        return table

    def _workgroup(self) -> athena.CfnWorkGroup:
        props = self._props
        return athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=_glue_name(Stack.of(self).stack_name).replace("_", "-") + "-history",
            description="duetime execution history queries",
            state="ENABLED",
            recursive_delete_option=not props.retain_data,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                bytes_scanned_cutoff_per_query=props.athena_bytes_scanned_cutoff,
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{self.bucket.bucket_name}/{ATHENA_RESULTS_PREFIX}",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )

    def _logical_id(self, bucket: s3.Bucket) -> str:
        return Stack.of(self).get_logical_id(bucket.node.default_child)  # type: ignore[arg-type]


def _glue_name(stack_name: str) -> str:
    """A Glue/Athena-friendly name from the stack name (lower case, letters, digits, _)."""
    if Token.is_unresolved(stack_name):
        return "duetime"
    return re.sub(r"[^a-z0-9_]+", "_", stack_name.lower()).strip("_") or "duetime"
