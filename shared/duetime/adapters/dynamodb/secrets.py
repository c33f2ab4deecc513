"""The DynamoDB side of webhook secrets (the SecretStore port): one record per tenant in the
jobs table, holding ciphertext only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from duetime.adapters.aws_errors import is_transient
from duetime.adapters.dynamodb.common import is_condition_failure
from duetime.domain.signing import SecretRecord
from duetime.ports import ConditionFailed, StoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The jobs-table sort key of a tenant's secret record. It sorts before every job id (ULIDs
# start with a digit), so job listings never meet it, and no job id can name it.
RECORD_ID = "!whsec"


class DynamoSecretStore:
    """Records in the jobs table: (tenant, `!whsec`), with binary ciphertexts. They carry no
    `expires_at`, so TTL never removes them."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, tenant: str) -> SecretRecord | None:
        try:
            item = self._client.get_item(
                TableName=self._table,
                Key={"tenant": {"S": tenant}, "id": {"S": RECORD_ID}},
                ConsistentRead=True,
            ).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise _store_error(exc) from exc
        if item is None:
            return None
        values: dict[str, Any] = item
        return SecretRecord(
            tenant=tenant,
            current=bytes(values["current"]["B"]),
            previous=bytes(values["previous"]["B"]) if "previous" in values else None,
            rotated_ms=int(values["rotated_ms"]["N"]) if "rotated_ms" in values else None,
            previous_expires_ms=(
                int(values["previous_until_ms"]["N"]) if "previous_until_ms" in values else None
            ),
            version=int(values["version"]["N"]),
        )

    def put(self, record: SecretRecord) -> None:
        item: dict[str, Any] = {
            "tenant": {"S": record.tenant},
            "id": {"S": RECORD_ID},
            "current": {"B": record.current},
            "version": {"N": str(record.version)},
        }
        if record.previous is not None:
            item["previous"] = {"B": record.previous}
        if record.rotated_ms is not None:
            item["rotated_ms"] = {"N": str(record.rotated_ms)}
        if record.previous_expires_ms is not None:
            item["previous_until_ms"] = {"N": str(record.previous_expires_ms)}
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(id)"}
            if record.version == 1
            else {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"N": str(record.version - 1)}},
            }
        )
        try:
            self._client.put_item(TableName=self._table, Item=item, **condition)
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and is_condition_failure(exc):
                raise ConditionFailed(f"webhook secret of {record.tenant} changed") from exc
            raise _store_error(exc) from exc


def _store_error(exc: ClientError | BotoCoreError) -> StoreError:
    """Transient if time may mend it (no answer too: until 2026-12-01 botocore's error went
    through raw, and a run spent an attempt on it; an outside fault audit). AWS's error code
    only: a tenant reads it in a run's error when it needs a person, and AWS's message can name
    the operator's account and roles (never key material)."""
    error = exc.response.get("Error", {}) if isinstance(exc, ClientError) else {}
    unknown = isinstance(exc, BotoCoreError) and is_transient(exc)  # a write may have landed
    code = str(error.get("Code", type(exc).__name__))
    return StoreError(code, transient=is_transient(exc), unknown=unknown)
