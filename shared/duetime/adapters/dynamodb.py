"""DynamoDB adapters for the job, timer and run stores.

Tables (see duetime.resources): jobs (tenant, id); timers (pk = `<yyyymmddHHMM>#<shard>`,
sk = `<due ms>#<job id>`, plus one `~sweep` item per partition, one `sweeper#<shard>` state
item per shard, the `sweeper`/`shards` count, and `stuck#<shard>` partitions of stuck timers);
runs (job_id, scheduled_ms) with a stream for the archiver.
"""

from __future__ import annotations

import base64
import json
import random
import re
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from duetime.adapters.codec import (
    from_item,
    job_from_values,
    job_to_values,
    run_from_values,
    run_to_values,
    to_item,
)
from duetime.config import queue_key
from duetime.domain.jobs import Job, JobStatus, Priority, Runtime
from duetime.domain.runs import (
    ClaimOutcome,
    Run,
    RunClaim,
    RunOutcome,
    claimed_run,
    decide_claim,
    finished_run,
)
from duetime.domain.timers import (
    PartitionState,
    StuckTimer,
    SweepState,
    Timer,
    parse_timer_sort_key,
    shard_of,
    timer_partition,
)
from duetime.ports import ConditionFailed, Page, StoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SWEEP_SK = "~sweep"  # sorts after every `<13 digits>#...` timer key in the same partition
# How many shards the sweeps cover (the most ever configured): one item for the deployment.
CONFIG_KEY = {"pk": {"S": "sweeper"}, "sk": {"S": "shards"}}
MAX_STUCK_REASON_CHARS = 1000
_BATCH_GET = 100
_BATCH_WRITE = 25


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError as exc:
        raise ValueError("invalid cursor") from exc
    if not isinstance(value, dict) or not value:
        raise ValueError("invalid cursor")
    return value


def _batch_get(
    client: DynamoDBClient, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool
) -> list[dict[str, Any]]:
    """BatchGetItem in chunks of 100, retrying unprocessed keys; items in plain values."""
    items: list[dict[str, Any]] = []
    for start in range(0, len(keys), _BATCH_GET):
        request: Any = {
            table: {"Keys": keys[start : start + _BATCH_GET], "ConsistentRead": consistent}
        }
        for _ in _unprocessed_rounds("BatchGetItem"):
            response = client.batch_get_item(RequestItems=request)
            items += [from_item(i) for i in response.get("Responses", {}).get(table, [])]
            request = response.get("UnprocessedKeys") or None
            if not request:
                break
    return items


def _batch_write(client: DynamoDBClient, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem of up to 25 requests, retrying unprocessed ones."""
    request: Any = {table: requests}
    for _ in _unprocessed_rounds("BatchWriteItem"):
        response = client.batch_write_item(RequestItems=request)
        request = response.get("UnprocessedItems") or None
        if not request:
            break


# Items a batch call leaves unprocessed (throttled partitions) are sent again after a backoff
# with full jitter, as DynamoDB asks, not at once: an immediate resend lands on the same
# throttled partition. After this many rounds the call fails.
UNPROCESSED_ROUNDS = 8
UNPROCESSED_BACKOFF_S = 0.05
UNPROCESSED_BACKOFF_CAP_S = 2.0


def _unprocessed_rounds(
    operation: str, sleep: Callable[[float], None] = time.sleep
) -> Iterator[int]:
    """Round numbers for a batch call and its resends; sleeps before each resend, and raises
    StoreError when the rounds run out with items still unprocessed."""
    for round_ in range(UNPROCESSED_ROUNDS):
        if round_:
            ceiling = min(UNPROCESSED_BACKOFF_CAP_S, UNPROCESSED_BACKOFF_S * 2**round_)
            time.sleep(random.uniform(0, ceiling))
        yield round_
    raise StoreError(f"{operation}: items still unprocessed after {UNPROCESSED_ROUNDS} rounds")


def _query_page(
    client: DynamoDBClient, params: dict[str, Any], limit: int, sort_key: str
) -> tuple[list[dict[str, Any]], Any]:
    """One page of a query, newest first, and the sort-key value to continue after (None at
    the end). One extra item tells whether another page exists: a query that stops at its
    Limit returns a LastEvaluatedKey even when nothing follows."""
    response = client.query(**params, ScanIndexForward=False, Limit=limit + 1)
    items = [from_item(i) for i in response.get("Items", [])]
    last = response.get("LastEvaluatedKey")  # also set when the 1 MB page limit cut it short
    if len(items) > limit:
        return items[:limit], items[limit - 1][sort_key]
    return items, from_item(last)[sort_key] if last else None


def _cursor_int(start: dict[str, Any], key: str) -> int:
    value = start.get(key)
    # Epoch milliseconds: DynamoDB refuses numbers beyond 38 digits with a 500-worthy error.
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 10**15:
        raise ValueError("invalid cursor")
    return value


# A job cursor names a job id: a ULID (Crockford base32). Anything else could sort outside the
# query's key condition (DynamoDB refuses such an ExclusiveStartKey) or inside the
# idempotency records.
_JOB_ID_CURSOR = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


# Idempotency records share the jobs table under sort keys that sort before every job id
# (ULIDs start with a digit), so a tenant's job listing never meets them.
IDEMPOTENCY_PREFIX = "!idem#"
RECURRING_COUNTER = "!count#recurring"


class DynamoJobStore:
    """Jobs by (tenant, id). With `partitions` > 1 a tenant's items are spread over that many
    partition keys, `<tenant>#<crc32(sort key) mod partitions>`: one DynamoDB partition takes
    1,000 writes and 3,000 strong reads a second, and that is a tenant's ceiling when all its
    jobs share one. The count is fixed for a table's life (a job is found by recomputing its
    key); 1 keeps the key the tenant itself."""

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

    def _job(self, values: dict[str, Any]) -> Job:
        if self._partitions > 1:
            values = values | {"tenant": str(values["tenant"]).rpartition("#")[0]}
        return job_from_values(values)

    def claim_key(
        self, tenant: str, key: str, job_id: str, fingerprint: str, expires_at: int
    ) -> tuple[str, str] | None:
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
                    }
                ),
                ConditionExpression="attribute_not_exists(id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError(str(exc)) from exc
            old: Any = exc.response.get("Item") or {}
            values = from_item(old)
            return str(values.get("job_id", "")), str(values.get("fingerprint", ""))
        return None

    def create(self, job: Job) -> None:
        try:
            self._client.put_item(
                TableName=self._table,
                Item=self._item(job),
                ConditionExpression="attribute_not_exists(id)",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ConditionFailed(f"job {job.id} exists") from exc
            raise StoreError(str(exc)) from exc

    def get(self, tenant: str, job_id: str) -> Job | None:
        if job_id.startswith(IDEMPOTENCY_PREFIX[0]):
            return None  # not a job id: an idempotency record's key
        item = self._client.get_item(
            TableName=self._table, Key=self._key(tenant, job_id), ConsistentRead=True
        ).get("Item")
        return self._job(from_item(item)) if item else None

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        unique = [self._key(t, i) for t, i in dict.fromkeys(keys)]
        jobs = (
            self._job(v) for v in _batch_get(self._client, self._table, unique, consistent=True)
        )
        return {job.id: job for job in jobs}

    def list(self, tenant: str, limit: int, cursor: str | None) -> Page[Job]:
        start: str | None = None
        if cursor:
            start = _decode_cursor(cursor).get("id")
            if not isinstance(start, str) or not _JOB_ID_CURSOR.fullmatch(start):
                raise ValueError("invalid cursor")

        def page_of(pk: str) -> tuple[list[dict[str, Any]], Any]:
            params: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "tenant = :t AND id >= :first",
                "ExpressionAttributeValues": {":t": {"S": pk}, ":first": {"S": "0"}},
            }
            if start is not None:
                # A cursor only ever names this tenant's partitions: another tenant's cursor
                # cannot be used to read across tenants.
                params["ExclusiveStartKey"] = {"tenant": {"S": pk}, "id": {"S": start}}
            return _query_page(self._client, params, limit, "id")  # ULIDs: newest first

        if self._partitions == 1:
            items, last = page_of(tenant)
            return Page(
                [self._job(v) for v in items], _encode_cursor({"id": last}) if last else None
            )
        # Each partition's newest `limit` after the cursor hold the tenant's newest `limit`.
        pks = [f"{tenant}#{k}" for k in range(self._partitions)]
        with ThreadPoolExecutor(max_workers=self._partitions) as pool:
            pages = list(pool.map(page_of, pks))
        merged = sorted(
            (v for items, _ in pages for v in items), key=lambda v: v["id"], reverse=True
        )
        more = len(merged) > limit or any(last is not None for _, last in pages)
        jobs = [self._job(v) for v in merged[:limit]]
        return Page(jobs, _encode_cursor({"id": jobs[-1].id}) if more and jobs else None)

    def replace(self, job: Job, *, expected: Job) -> None:
        try:
            self._client.put_item(
                TableName=self._table,
                Item=self._item(job),
                ConditionExpression="#s = :s AND gen = :g",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":s": {"S": expected.status.value},
                    ":g": {"N": str(expected.generation)},
                },
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ConditionFailed(f"job {job.id} changed") from exc
            raise StoreError(str(exc)) from exc

    def scan_active(self, segment: int, segments: int) -> Iterator[Job]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "Segment": segment,
            "TotalSegments": segments,
            # Jobs only: idempotency records, counters and webhook secrets have no status.
            "FilterExpression": "#s IN (:s, :p)",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {
                ":s": {"S": JobStatus.SCHEDULED.value},
                ":p": {"S": JobStatus.PAUSED.value},
            },
        }
        while True:
            response = self._client.scan(**params)
            for item in response.get("Items", []):
                yield self._job(from_item(item))
            if "LastEvaluatedKey" not in response:
                return
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # A tenant's count of active recurring jobs: one item beside its jobs (ids never start
    # with `!`), changed once per recurring job created, cancelled or completed.
    def _counter_key(self, tenant: str) -> dict[str, Any]:
        return {"tenant": {"S": tenant}, "id": {"S": RECURRING_COUNTER}}

    def reserve_recurring(self, tenant: str, limit: int) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._counter_key(tenant),
                UpdateExpression="ADD active :one",
                ConditionExpression="attribute_not_exists(active) OR active < :limit",
                ExpressionAttributeValues={":one": {"N": "1"}, ":limit": {"N": str(limit)}},
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise StoreError(str(exc)) from exc
        return True

    def release_recurring(self, tenant: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._counter_key(tenant),
                UpdateExpression="ADD active :minus",
                ConditionExpression="active > :zero",
                ExpressionAttributeValues={":minus": {"N": "-1"}, ":zero": {"N": "0"}},
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):  # already at zero: nothing to release
                raise StoreError(str(exc)) from exc

    def set_recurring_count(self, tenant: str, count: int) -> None:
        self._client.update_item(
            TableName=self._table,
            Key=self._counter_key(tenant),
            UpdateExpression="SET active = :n",
            ExpressionAttributeValues={":n": {"N": str(count)}},
        )


class DynamoTimerStore:
    def __init__(
        self, client: DynamoDBClient, table: str, shards: int, ttl_seconds: int = 7 * 86_400
    ) -> None:
        self._client = client
        self._table = table
        self.shards = shards
        self._ttl_seconds = ttl_seconds

    def shard_of(self, job_id: str) -> int:
        return shard_of(job_id, self.shards)

    def _item(self, timer: Timer) -> dict[str, Any]:
        return to_item(timer_values(timer, self.shard_of(timer.job_id), self._ttl_seconds))

    def put(self, timers: Sequence[Timer]) -> None:
        # BatchWriteItem rejects a batch that names one key twice: the last write of a key wins.
        items = list({(i["pk"]["S"], i["sk"]["S"]): i for i in map(self._item, timers)}.values())
        if len(items) == 1:
            self._client.put_item(TableName=self._table, Item=items[0])
            return
        for start in range(0, len(items), _BATCH_WRITE):
            _batch_write(
                self._client,
                self._table,
                [{"PutRequest": {"Item": item}} for item in items[start : start + _BATCH_WRITE]],
            )

    def find(self, timers: Sequence[Timer]) -> list[Timer]:
        keys = {
            (item["pk"]["S"], item["sk"]["S"]): timer
            for timer in timers
            for item in [self._item(timer)]
        }
        wanted = [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in keys]
        found = _batch_get(self._client, self._table, wanted, consistent=True)
        return [keys[(values["pk"], values["sk"])] for values in found]

    def read_due(
        self, minute: int, shard: int, after_key: str | None, before_ms: int, limit: int
    ) -> tuple[list[Timer], bool]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":p": {"S": timer_partition(minute, shard)},
                ":lo": {"S": after_key + "\x00" if after_key else "0"},
                # Strictly before the horizon: `<before_ms>` sorts before `<before_ms>#...`.
                ":hi": {"S": f"{before_ms:013d}"},
            },
            "ConsistentRead": True,
            # One extra item tells whether more remain: a query that stops at its Limit returns
            # a LastEvaluatedKey even when nothing follows.
            "Limit": limit + 1,
        }
        response = self._client.query(**params)
        timers = [timer_from_values(from_item(raw), minute) for raw in response.get("Items", [])]
        return timers[:limit], len(timers) > limit or "LastEvaluatedKey" in response

    # --- sweep progress: the shard count, one state item per shard, one per partition --------

    def shard_count(self) -> int:
        item = self._client.get_item(TableName=self._table, Key=CONFIG_KEY, ConsistentRead=True)
        values = from_item(item["Item"]) if "Item" in item else {}
        return max(self.shards, int(values.get("shards", 0)))

    def raise_shard_count(self, count: int) -> int:
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=CONFIG_KEY,
                UpdateExpression="SET shards = :n",
                ConditionExpression="attribute_not_exists(shards) OR shards < :n",
                ExpressionAttributeValues={":n": {"N": str(count)}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError(str(exc)) from exc
            return self.shard_count()
        return int(from_item(response["Attributes"])["shards"])

    def sweep_states(self, shards: Sequence[int]) -> dict[int, SweepState]:
        wanted = [_shard_state_key(s) for s in dict.fromkeys(shards)]
        return {
            int(str(values["pk"]).rpartition("#")[2]): SweepState(
                values.get("cursor"), values.get("horizon")
            )
            for values in _batch_get(self._client, self._table, wanted, consistent=True)
        }

    def raise_horizon(self, shard: int, minute: int) -> SweepState:
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=_shard_state_key(shard),
                UpdateExpression="SET horizon = :m, #c = if_not_exists(#c, :m)",
                ConditionExpression="attribute_not_exists(horizon) OR horizon < :m",
                ExpressionAttributeNames={"#c": "cursor"},
                ExpressionAttributeValues={":m": {"N": str(minute)}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError(str(exc)) from exc
            # Someone already raised it at least this far.
            return self.sweep_states([shard]).get(shard, SweepState(None, None))
        values = from_item(response["Attributes"])
        return SweepState(values.get("cursor"), values.get("horizon"))

    def advance_cursor(self, shard: int, expected: int | None, minute: int) -> bool:
        condition = "#c = :e" if expected is not None else "attribute_not_exists(#c)"
        values: dict[str, Any] = {":m": {"N": str(minute)}}
        if expected is not None:
            values[":e"] = {"N": str(expected)}
        return self._update_if(
            Key=_shard_state_key(shard),
            UpdateExpression="SET #c = :m",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#c": "cursor"},
            ExpressionAttributeValues=values,
        )

    def _update_if(self, **params: Any) -> bool:
        """A conditional UpdateItem: False when the condition did not hold."""
        try:
            self._client.update_item(TableName=self._table, **params)
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise StoreError(str(exc)) from exc
        return True

    def partition_states(
        self, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], PartitionState]:
        by_pk = {timer_partition(m, s): (m, s) for m, s in keys}
        wanted = [{"pk": {"S": pk}, "sk": {"S": SWEEP_SK}} for pk in by_pk]
        states: dict[tuple[int, int], PartitionState] = {}
        for values in _batch_get(self._client, self._table, wanted, consistent=True):
            minute, shard = by_pk[values["pk"]]
            states[(minute, shard)] = _partition_state(minute, shard, values)
        return states

    def acquire(
        self, minute: int, shard: int, owner: str, now_ms: int, lease_ms: int
    ) -> PartitionState | None:
        key = {"pk": {"S": timer_partition(minute, shard)}, "sk": {"S": SWEEP_SK}}
        values: dict[str, Any] = {
            ":o": {"S": owner},
            ":u": {"N": str(now_ms + lease_ms)},
            ":f": {"BOOL": False},
        }
        open_ = "(attribute_not_exists(complete) OR complete = :f)"
        try:
            # Free (released, never held) or ours: the usual case, one write.
            response = self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET #o = :o, lease_until = :u",
                ConditionExpression=f"{open_} AND (attribute_not_exists(#o) OR #o = :o)",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError(str(exc)) from exc
            # Held by another: take it over only if its lease ran out, which means its holder
            # died without releasing it. That counts a stall.
            try:
                response = self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET #o = :o, lease_until = :u ADD stalls :one",
                    ConditionExpression=f"{open_} AND attribute_exists(#o) AND lease_until <= :now",
                    ExpressionAttributeNames={"#o": "owner"},
                    ExpressionAttributeValues=values
                    | {":now": {"N": str(now_ms)}, ":one": {"N": "1"}},
                    ReturnValues="ALL_NEW",
                )
            except ClientError as again:
                if _is_condition_failure(again):
                    return None
                raise StoreError(str(again)) from again
        return _partition_state(minute, shard, from_item(response["Attributes"]))

    def advance(
        self,
        minute: int,
        shard: int,
        owner: str,
        watermark: str | None,
        *,
        complete: bool = False,
        release: bool = False,
        stalls: int | None = None,
    ) -> bool:
        sets = ["complete = :c"]
        values: dict[str, Any] = {":o": {"S": owner}, ":c": {"BOOL": complete}}
        if watermark is not None:
            sets.append("watermark = :w")
            values[":w"] = {"S": watermark}
        if stalls is not None:
            sets.append("stalls = :s")
            values[":s"] = {"N": str(stalls)}
        expression = "SET " + ", ".join(sets) + (" REMOVE #o, lease_until" if release else "")
        return self._update_if(
            Key={"pk": {"S": timer_partition(minute, shard)}, "sk": {"S": SWEEP_SK}},
            UpdateExpression=expression,
            ConditionExpression="#o = :o",
            ExpressionAttributeNames={"#o": "owner"},
            ExpressionAttributeValues=values,
        )

    # --- stuck timers: one partition per shard ---------------------------------------------

    def park(self, stuck: StuckTimer, *, replacing: StuckTimer | None = None) -> None:
        item = to_item(_stuck_to_values(stuck))
        self._client.put_item(TableName=self._table, Item=item)
        # Then the old record: a crash in between leaves both, and the timer is retried twice
        # (the run id absorbs the duplicate), never neither.
        if replacing is not None:
            old = to_item(_stuck_key(replacing))
            if old != {k: item[k] for k in old}:
                self._client.delete_item(TableName=self._table, Key=old)

    def parked_due(self, shard: int, now_ms: int, limit: int) -> list[StuckTimer]:
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":p": {"S": _stuck_partition(shard)},
                ":lo": {"S": RETRYING},
                ":hi": {"S": f"{RETRYING}{now_ms:013d}~"},
            },
            ConsistentRead=True,
            Limit=limit,
        )
        return [_stuck_from_values(from_item(i)) for i in response.get("Items", [])]

    def stuck(self, shard: int) -> list[StuckTimer]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": _stuck_partition(shard)}},
            "ConsistentRead": True,
        }
        found: list[StuckTimer] = []
        while True:
            response = self._client.query(**params)
            found += [_stuck_from_values(from_item(i)) for i in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return found
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def unpark(self, stuck: StuckTimer) -> None:
        self._client.delete_item(TableName=self._table, Key=to_item(_stuck_key(stuck)))


def timer_values(timer: Timer, shard: int, ttl_seconds: int) -> dict[str, Any]:
    """A timer's item: `pk = <bucket>#<shard>`, `sk = <due>#<job id>#<generation>`, the job's
    size and a one-off's queue when known, and a TTL of `ttl_seconds` after it is due."""
    values: dict[str, Any] = {
        "pk": timer_partition(timer.bucket, shard),
        "sk": timer.sort_key,
        "tenant": timer.tenant,
        "gen": timer.generation,
        "expires_at": max(timer.due_ms // 1000, timer.bucket * 60) + ttl_seconds,
    }
    if timer.job_bytes:
        values["bytes"] = timer.job_bytes
    if timer.runtime is not None and timer.priority is not None:
        values["q"] = queue_key(timer.runtime, timer.priority)
    return values


def timer_from_values(values: dict[str, Any], minute: int) -> Timer:
    """The timer an item of bucket `minute` holds."""
    due, job_id, _ = parse_timer_sort_key(str(values["sk"]))
    runtime, _, priority = str(values.get("q", "")).partition("/")
    return Timer(
        values["tenant"],
        job_id,
        due,
        values.get("gen", 0),
        bucket_minute=None if due // 60_000 == minute else minute,
        job_bytes=values.get("bytes", 0),
        runtime=Runtime(runtime) if runtime else None,
        priority=Priority(priority) if priority else None,
    )


# Stuck timers: pk `stuck#<shard>`; sk `r#<next attempt ms>#<timer sort key>` while they are
# retried (a range query finds those due), `q#<timer sort key>` once quarantined.
RETRYING = "r#"
QUARANTINED = "q#"


def _stuck_partition(shard: int) -> str:
    return f"stuck#{shard}"


def _stuck_key(stuck: StuckTimer) -> dict[str, Any]:
    if stuck.next_attempt_ms is None:
        sk = QUARANTINED + stuck.timer.sort_key
    else:
        sk = f"{RETRYING}{stuck.next_attempt_ms:013d}#{stuck.timer.sort_key}"
    return {"pk": _stuck_partition(stuck.shard), "sk": sk}


def _stuck_to_values(stuck: StuckTimer) -> dict[str, Any]:
    timer = stuck.timer
    return _stuck_key(stuck) | {
        "tenant": timer.tenant,
        "job_id": timer.job_id,
        "due": timer.due_ms,
        "gen": timer.generation,
        "bytes": timer.job_bytes,
        "q": queue_key(timer.runtime, timer.priority) if timer.runtime and timer.priority else "",
        "attempts": stuck.attempts,
        "reason": stuck.reason[:MAX_STUCK_REASON_CHARS],
        "first_failed": stuck.first_failed_ms,
        "last_failed": stuck.last_failed_ms,
    }


def _stuck_from_values(values: dict[str, Any]) -> StuckTimer:
    sk = str(values["sk"])
    next_attempt = int(sk[len(RETRYING) :].partition("#")[0]) if sk.startswith(RETRYING) else None
    runtime, _, priority = str(values.get("q", "")).partition("/")
    return StuckTimer(
        timer=Timer(
            values["tenant"],
            values["job_id"],
            values["due"],
            values.get("gen", 0),
            job_bytes=values.get("bytes", 0),
            runtime=Runtime(runtime) if runtime else None,
            priority=Priority(priority) if priority else None,
        ),
        shard=int(str(values["pk"]).rpartition("#")[2]),
        attempts=values["attempts"],
        reason=values.get("reason", ""),
        first_failed_ms=values["first_failed"],
        last_failed_ms=values["last_failed"],
        next_attempt_ms=next_attempt,
    )


def _shard_state_key(shard: int) -> dict[str, Any]:
    return {"pk": {"S": f"sweeper#{shard}"}, "sk": {"S": "state"}}


def _partition_state(minute: int, shard: int, values: dict[str, Any]) -> PartitionState:
    return PartitionState(
        minute=minute,
        shard=shard,
        watermark=values.get("watermark"),
        complete=bool(values.get("complete", False)),
        owner=values.get("owner"),
        lease_until_ms=values.get("lease_until", 0),
        stalls=values.get("stalls", 0),
    )


class DynamoRunStore:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def claim(self, claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        """First delivery: one conditional put. Otherwise the failed put returns the stored
        record (ALL_OLD), the pure claim rule decides, and a compare-and-set on its version
        applies the claim."""
        existing: Run | None = None
        for _ in range(5):
            outcome = decide_claim(existing, claim)
            if outcome != ClaimOutcome.CLAIMED:
                return outcome, existing
            run = claimed_run(existing, claim)
            current = self._put_if(run, existing)
            if current is None:
                return ClaimOutcome.CLAIMED, run
            existing = current
        raise StoreError(f"claim of {claim.run_id} kept conflicting")

    def _put_if(self, run: Run, expected: Run | None) -> Run | None:
        """Put `run` if the stored record is still `expected`; else return the stored one."""
        if expected is None:
            condition = "attribute_not_exists(job_id)"
            values: dict[str, Any] = {}
        else:
            condition = "v = :v"
            values = {":v": {"N": str(expected.version)}}
        params: dict[str, Any] = {
            "TableName": self._table,
            "Item": to_item(run_to_values(run)),
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if values:
            params["ExpressionAttributeValues"] = values
        try:
            self._client.put_item(**params)
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise StoreError(str(exc)) from exc
            old: Any = exc.response.get("Item")  # the ALL_OLD item, when there was one
            if old:
                return run_from_values(from_item(old))
            stored = self.get(run.job_id, run.scheduled_ms)
            if stored is None:
                raise StoreError(f"run {run.run_id} vanished during a claim") from exc
            return stored
        return None

    def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
        done = finished_run(run, outcome)
        return None if self._put_if(done, run) is not None else done

    def get(self, job_id: str, scheduled_ms: int) -> Run | None:
        item = self._client.get_item(
            TableName=self._table,
            Key={"job_id": {"S": job_id}, "scheduled_ms": {"N": str(scheduled_ms)}},
            ConsistentRead=True,
        ).get("Item")
        return run_from_values(from_item(item)) if item else None

    def get_many(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Run]:
        wanted = [
            {"job_id": {"S": j}, "scheduled_ms": {"N": str(ms)}} for j, ms in dict.fromkeys(keys)
        ]
        runs = (
            run_from_values(v)
            for v in _batch_get(self._client, self._table, wanted, consistent=True)
        )
        return {(run.job_id, run.scheduled_ms): run for run in runs}

    def list(self, job_id: str, limit: int, cursor: str | None) -> Page[Run]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "job_id = :j",
            "ExpressionAttributeValues": {":j": {"S": job_id}},
        }
        if cursor:
            start = _cursor_int(_decode_cursor(cursor), "s")
            params["ExclusiveStartKey"] = {
                "job_id": {"S": job_id},
                "scheduled_ms": {"N": str(start)},
            }
        items, last = _query_page(self._client, params, limit, "scheduled_ms")
        runs = [run_from_values(v) for v in items]
        return Page(runs, _encode_cursor({"s": last}) if last is not None else None)
