"""Table, queue and bucket definitions: the key schemas the adapters use, in one place.

The CDK app builds the same tables and queues from these definitions; the local stack and
the tests create them in moto with `create_resources`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from duetime.domain.jobs import Priority, Runtime
from duetime.settings import QueueUrls, Settings, queue_key, queue_name

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class TableDef:
    name: str  # suffix after the deployment prefix
    partition_key: tuple[str, str]  # (attribute, type)
    sort_key: tuple[str, str]
    ttl_attribute: str = "expires_at"
    stream: str | None = None


JOBS_TABLE = TableDef("jobs", ("tenant", "S"), ("id", "S"))
TIMERS_TABLE = TableDef("timers", ("pk", "S"), ("sk", "S"))
# The archiver reads expired runs from the stream's old images.
RUNS_TABLE = TableDef("runs", ("job_id", "S"), ("scheduled_ms", "N"), stream="OLD_IMAGE")
TABLES = (JOBS_TABLE, TIMERS_TABLE, RUNS_TABLE)

# A message is moved to the DLQ after this many receives without being deleted: a worker that
# crashes on it every time (poison) or a run that stays busy for that long.
MAX_RECEIVE_COUNT = 10
QUEUE_VISIBILITY_TIMEOUT_SECONDS = 900 * 6
DLQ_RETENTION_SECONDS = 14 * 86_400
# Execution history: the Parquet archive's bucket and the queue that receives stream records
# the archiver could not convert (duetime.history.archive), each named `<prefix>-<suffix>`.
HISTORY_BUCKET_SUFFIX = "history"
ARCHIVE_FAILURE_QUEUE_SUFFIX = "archive-failures"
# The KMS key of the tenants' webhook secrets (duetime.adapters.kms), by its alias
# `alias/<prefix>-<suffix>`.
SECRETS_KEY_ALIAS_SUFFIX = "webhook-secrets"


def create_resources(
    dynamodb: DynamoDBClient,
    sqs: SQSClient,
    prefix: str = "duetime",
    *,
    s3: S3Client | None = None,
    kms: Any = None,
    visibility_timeout_seconds: int = QUEUE_VISIBILITY_TIMEOUT_SECONDS,
    run_signing_key: str = "",
    lanes: int = 1,
    **settings: int | bool | str,
) -> Settings:
    """Create every table and queue (idempotently) and return Settings pointing at them.

    `lanes`: queues per runtime × priority (`QueueUrls.lanes`; the construct's `queue_lanes`),
    lane 2 onwards named `<queue>-lane<n>`, sharing the first's DLQ.

    With an `s3` client, also the history bucket (`Settings.history_bucket`; without one the
    setting stays empty); with a `kms` client (boto3's), the key of the webhook secrets
    (`Settings.secrets_key_arn`). The archive-failure queue is always created."""
    existing = set(dynamodb.list_tables().get("TableNames", []))
    for table in TABLES:
        name = f"{prefix}-{table.name}"
        if name in existing:
            continue
        keys = (table.partition_key, table.sort_key)
        stream: Any = (
            {"StreamEnabled": True, "StreamViewType": table.stream}
            if table.stream
            else {"StreamEnabled": False}
        )
        dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": a, "AttributeType": t}  # type: ignore[typeddict-item]
                for a, t in keys
            ],
            KeySchema=[
                {"AttributeName": keys[0][0], "KeyType": "HASH"},
                {"AttributeName": keys[1][0], "KeyType": "RANGE"},
            ],
            StreamSpecification=stream,
        )
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
        )
    queues: dict[str, QueueUrls] = {}
    for runtime in Runtime:
        for priority in Priority:
            dlq_url = sqs.create_queue(
                QueueName=queue_name(prefix, runtime, priority, dead=True),
                Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)},
            )["QueueUrl"]
            dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            attributes: Any = {
                "VisibilityTimeout": str(visibility_timeout_seconds),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
                ),
            }
            name = queue_name(prefix, runtime, priority)
            names = [name, *(f"{name}-lane{n}" for n in range(2, lanes + 1))]
            urls = [sqs.create_queue(QueueName=n, Attributes=attributes)["QueueUrl"] for n in names]
            queues[queue_key(runtime, priority)] = QueueUrls(urls[0], dlq_url, tuple(urls[1:]))
    failure_queue_url = sqs.create_queue(
        QueueName=f"{prefix}-{ARCHIVE_FAILURE_QUEUE_SUFFIX}",
        Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)},
    )["QueueUrl"]
    bucket = _create_bucket(s3, f"{prefix}-{HISTORY_BUCKET_SUFFIX}") if s3 is not None else ""
    key_arn = _create_secrets_key(kms, prefix) if kms is not None else ""
    return Settings(
        jobs_table=f"{prefix}-{JOBS_TABLE.name}",
        timers_table=f"{prefix}-{TIMERS_TABLE.name}",
        runs_table=f"{prefix}-{RUNS_TABLE.name}",
        queues=queues,
        history_bucket=bucket,
        archive_failure_queue_url=failure_queue_url,
        secrets_key_arn=key_arn,
        # A fresh key for run messages; the local stack passes its own (the state dir's).
        run_signing_key=run_signing_key or secrets.token_urlsafe(32),
        resource_prefix=prefix,  # jobs may not target the deployment's own resources
        **settings,  # type: ignore[arg-type]
    )


def _create_bucket(s3: S3Client, name: str) -> str:
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if name not in existing:
        region = s3.meta.region_name
        if region == "us-east-1":  # the one region that refuses an explicit constraint
            s3.create_bucket(Bucket=name)
        else:
            s3.create_bucket(
                Bucket=name,
                CreateBucketConfiguration={"LocationConstraint": region},  # type: ignore[typeddict-item]
            )
    return name


def _create_secrets_key(kms: Any, prefix: str) -> str:
    """The symmetric key of the webhook secrets, found by its alias or created with it."""
    from botocore.exceptions import ClientError

    alias = f"alias/{prefix}-{SECRETS_KEY_ALIAS_SUFFIX}"
    try:
        arn: str = kms.describe_key(KeyId=alias)["KeyMetadata"]["Arn"]
        return arn
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NotFoundException":
            raise
    metadata = kms.create_key(Description=f"{prefix}: tenants' webhook signing secrets")[
        "KeyMetadata"
    ]
    kms.create_alias(AliasName=alias, TargetKeyId=metadata["KeyId"])
    created: str = metadata["Arn"]
    return created
