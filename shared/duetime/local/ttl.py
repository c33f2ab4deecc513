"""What DynamoDB's TTL process does and moto does not: delete the items whose time to live
has passed (`TtlReaper`), marking the deletes the runs table's stream must show as TTL's
(`TtlDeletes`, read by duetime.local.streams).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from duetime.clock import wall_ms
from duetime.domain.runs import RunStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The reaper's period: every second with a hot window of seconds (--hot-ttl-seconds), so runs
# reach the archive promptly; otherwise once a minute (DynamoDB itself may take days).
TTL_REAP_SECONDS_HOT = 1.0
TTL_REAP_SECONDS = 60.0
# A run still running or retrying when it expires is left until it finishes, or until it has
# been expired this long: with a hot window of seconds a run can outlive its record's TTL,
# which the 30-day window on AWS never lets happen.
UNFINISHED_RUN_GRACE_SECONDS = 3600


class TtlDeletes:
    """Keys of the items the TTL reaper deleted whose REMOVE record the stream poller has not
    seen yet. DynamoDB marks a TTL delete's stream record with the service's identity; moto's
    REMOVE records carry none, so the poller adds it to these, and only to these."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: set[tuple[str, str]] = set()

    @staticmethod
    def _id(table: str, key: Mapping[str, Any]) -> tuple[str, str]:
        return table, json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)

    def add(self, table: str, key: Mapping[str, Any]) -> None:
        with self._lock:
            self._keys.add(self._id(table, key))

    def discard(self, table: str, key: Mapping[str, Any]) -> None:
        with self._lock:
            self._keys.discard(self._id(table, key))

    def take(self, table: str, key: Mapping[str, Any]) -> bool:
        """Whether `key`'s REMOVE was the reaper's (forgetting it: one REMOVE per delete)."""
        ident = self._id(table, key)
        with self._lock:
            if ident in self._keys:
                self._keys.remove(ident)
                return True
            return False


class TtlReaper:
    """What DynamoDB's TTL process does and moto does not: delete the items whose TTL
    attribute (epoch seconds) has passed. Each delete is conditional on the item still being
    expired, so an item whose TTL was extended meanwhile stays (as with DynamoDB).

    Deletes from tables with a stream are recorded in `marks` *before* they are made, so the
    stream poller can never see the REMOVE first. In the runs table, a run still running or
    retrying is left until it finishes (see UNFINISHED_RUN_GRACE_SECONDS)."""

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        tables: Sequence[str],
        marks: TtlDeletes,
        *,
        runs_table: str | None = None,
        streamed: Collection[str] = (),
        ttl_attribute: str = "expires_at",
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._dynamodb = dynamodb
        self._tables = list(tables)
        self._marks = marks
        self._runs_table = runs_table
        self._streamed = set(streamed)
        self._ttl = ttl_attribute
        self._clock = clock
        self._key_names: dict[str, list[str]] = {}

    def reap_once(self) -> int:
        """Delete every expired item now; returns how many were deleted."""
        now = self._clock() // 1000
        return sum(self._reap(table, now) for table in self._tables)

    def _expired(self, table: str, now: int) -> tuple[str, dict[str, str], dict[str, Any]]:
        condition = "#ttl <= :now"
        names = {"#ttl": self._ttl}
        values: dict[str, Any] = {":now": {"N": str(now)}}
        if table == self._runs_table:
            condition += " AND (#status IN (:succeeded, :failed, :skipped) OR #ttl <= :stale)"
            names["#status"] = "status"
            values |= {
                ":succeeded": {"S": RunStatus.SUCCEEDED.value},
                ":failed": {"S": RunStatus.FAILED.value},
                ":skipped": {"S": RunStatus.SKIPPED.value},
                ":stale": {"N": str(now - UNFINISHED_RUN_GRACE_SECONDS)},
            }
        return condition, names, values

    def _reap(self, table: str, now: int) -> int:
        keys = self._keys_of(table)
        condition, names, values = self._expired(table, now)
        deleted = 0
        pages = self._dynamodb.get_paginator("scan").paginate(
            TableName=table,
            FilterExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        for page in pages:
            for item in page.get("Items", []):
                key = {name: item[name] for name in keys}
                deleted += self._delete(table, key, condition, names, values)
        return deleted

    def _delete(
        self,
        table: str,
        key: dict[str, Any],
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> int:
        from botocore.exceptions import ClientError

        streamed = table in self._streamed
        if streamed:
            self._marks.add(table, key)
        try:
            self._dynamodb.delete_item(
                TableName=table,
                Key=key,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if streamed:
                self._marks.discard(table, key)
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return 0  # changed since the scan: no longer expired
            raise
        except BaseException:
            if streamed:
                self._marks.discard(table, key)
            raise
        return 1

    def _keys_of(self, table: str) -> list[str]:
        if table not in self._key_names:
            schema = self._dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
            self._key_names[table] = [k["AttributeName"] for k in schema]
        return self._key_names[table]
