"""The jobs table's keys, and the idempotency records kept in it (the JobStore's key
methods; duetime.adapters.dynamodb.jobs has the rest)."""

from __future__ import annotations

import secrets
import zlib
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from duetime.adapters.codec import from_item, job_from_values, job_to_values, to_item
from duetime.adapters.dynamodb.common import is_condition_failure, store_error
from duetime.domain.jobs import Job

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Idempotency records share the jobs table under sort keys that sort before every job id
# (ULIDs start with a digit), so a tenant's job listing never meets them.
IDEMPOTENCY_PREFIX = "!idem#"


class JobTable:
    """With `partitions` > 1 a tenant's items are spread over that many partition keys,
    `<tenant>#<crc32(sort key) mod partitions>`: one DynamoDB partition takes 1,000 writes and
    3,000 strong reads a second, and that is a tenant's ceiling when all its jobs share one.
    The count is fixed for a table's life (an item is found by recomputing its key); 1 keeps
    the key the tenant itself."""

    def __init__(self, client: DynamoDBClient, table: str, partitions: int = 1) -> None:
        self._client = client
        self._table = table
        self._partitions = partitions

    def _pk(self, tenant: str, sort_key: str) -> str:
        if self._partitions == 1:
            return tenant
        return f"{tenant}#{zlib.crc32(sort_key.encode()) % self._partitions}"

    def _key(self, tenant: str, job_id: str) -> dict[str, Any]:
        return {"tenant": {"S": self._pk(tenant, job_id)}, "id": {"S": job_id}}

    def _item(self, job: Job) -> dict[str, Any]:
        return to_item(job_to_values(job) | {"tenant": self._pk(job.tenant, job.id)})

    def _tenant(self, partition_key: str) -> str:
        return partition_key.rpartition("#")[0] if self._partitions > 1 else partition_key

    def _job(self, values: dict[str, Any]) -> Job:
        if self._partitions > 1:
            values = values | {"tenant": self._tenant(str(values["tenant"]))}
        return job_from_values(values)

    def claim_key(
        self, tenant: str, key: str, job_id: str, fingerprint: str, expires_at: int, now: int
    ) -> tuple[str, str] | None:
        # The record carries this claim's token: when the SDK sends the put again after an
        # answer was lost, its condition fails on the record the first attempt wrote, and the
        # claim is still ours (until 2026-11-30 the request took itself for an earlier one, and
        # a refusal then left its key bound; found by an outside audit).
        token = secrets.token_hex(8)
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(
                    {
                        "tenant": self._pk(tenant, IDEMPOTENCY_PREFIX + key),
                        "id": IDEMPOTENCY_PREFIX + key,
                        "job_id": job_id,
                        "fingerprint": fingerprint,
                        "expires_at": expires_at,
                        "claim": token,
                    }
                ),
                # TTL deletes an expired record up to days late: until then it is free too.
                ConditionExpression="attribute_not_exists(id) OR expires_at <= :now",
                ExpressionAttributeValues={":now": {"N": str(now)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise store_error(exc) from exc
            old: Any = exc.response.get("Item") or {}
            values = from_item(old)
            if values.get("claim") == token:
                return None
            return str(values.get("job_id", "")), str(values.get("fingerprint", ""))
        return None

    def release_key(self, tenant: str, key: str, job_id: str) -> None:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=self._key(tenant, IDEMPOTENCY_PREFIX + key),
                ConditionExpression="job_id = :j AND attribute_not_exists(replayed)",
                ExpressionAttributeValues={":j": {"S": job_id}},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise store_error(exc) from exc

    def mark_key(self, tenant: str, key: str, token: str, job_id: str) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(tenant, IDEMPOTENCY_PREFIX + key),
                UpdateExpression="SET replayed = :t",
                # Not a record a new request wrote over this one once it expired.
                ConditionExpression="job_id = :j",
                ExpressionAttributeValues={":t": {"S": token}, ":j": {"S": job_id}},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise store_error(exc) from exc
            return False
        return True

    def unmark_key(self, tenant: str, key: str, token: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(tenant, IDEMPOTENCY_PREFIX + key),
                UpdateExpression="REMOVE replayed",
                ConditionExpression="replayed = :t",
                ExpressionAttributeValues={":t": {"S": token}},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise store_error(exc) from exc
