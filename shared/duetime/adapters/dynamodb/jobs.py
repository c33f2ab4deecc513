"""The job store on DynamoDB: jobs by (tenant, id), beside each tenant's idempotency records
(duetime.adapters.dynamodb.job_table), its count of active recurring jobs, the overlap gates
and the `after` dependents."""

from __future__ import annotations

import builtins
import re
import secrets
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from duetime.adapters.codec import from_item, to_item
from duetime.adapters.dynamodb.common import (
    BATCH_WRITE,
    batch_get,
    batch_write,
    decode_cursor,
    encode_cursor,
    is_cancelled_by_condition,
    is_condition_failure,
    query_page,
    refused_only_by_last,
    store_error,
    store_errors,
)
from duetime.adapters.dynamodb.job_table import (
    IDEMPOTENCY_PREFIX,
    RECURRING_COUNTER,
    RELEASE,
    JobTable,
)
from duetime.domain.jobs import Job, JobStatus
from duetime.domain.overlap import Gate
from duetime.observability import logger
from duetime.ports import ConditionFailed, CounterRead, KeyCount, KeyHold, Page, StoreError

# A job cursor names a job id: a ULID (Crockford base32, its first character 0-7: 48 bits of
# time). Anything else could sort outside the query's key condition (DynamoDB refuses such an
# ExclusiveStartKey) or inside the idempotency records.
_JOB_ID_CURSOR = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")


# Items beside the jobs have sort keys that sort before every job id (ULIDs start with a
# digit), so a tenant's job listing never meets them (the recurring count: job_table).
# A recurring job's overlap gate (skip, buffer_one): one small item beside the job.
OVERLAP_GATE_PREFIX = "!overlap#"
# The jobs that run after a job (`after` schedules): a string set `ids` beside the upstream.
DEPENDENTS_PREFIX = "!dependents#"
# A job item's attribute: a random mark of the conditional write that put it (`_landed`).
WRITE_MARK = "wt"


class DynamoJobStore(JobTable):
    """Jobs by (tenant, id), on the jobs table (JobTable: its keys, and the idempotency
    records)."""

    @store_errors()
    def create(self, job: Job) -> None:
        item = self._signed(job)
        try:
            self._client.put_item(
                TableName=self._table, Item=item, ConditionExpression="attribute_not_exists(id)"
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                if self._landed(job, item):
                    return
                raise ConditionFailed(f"job {job.id} exists") from exc
            raise store_error(exc) from exc

    def _signed(self, job: Job) -> dict[str, Any]:
        """The job's item with a mark of this write (WRITE_MARK): `_landed` tells it apart
        from another request's write of an identical job (two copies of one request, in one
        millisecond)."""
        return self._item(job) | {WRITE_MARK: {"S": secrets.token_hex(8)}}

    def _landed(self, job: Job, item: dict[str, Any]) -> bool:
        """Whether a conditional write of `item` that failed its condition was our own: DynamoDB
        may apply a write and still answer 500, and the SDK's retry then fails on the item
        the first request wrote (with this write's mark)."""
        stored = self._client.get_item(
            TableName=self._table,
            Key=self._key(job.tenant, job.id),
            ConsistentRead=True,
            ProjectionExpression=WRITE_MARK,
        ).get("Item")
        return stored is not None and stored.get(WRITE_MARK) == item[WRITE_MARK]

    def create_many(self, jobs: Sequence[Job]) -> None:
        items = [{"PutRequest": {"Item": self._item(job)}} for job in jobs]
        for start in range(0, len(items), BATCH_WRITE):
            batch_write(self._client, self._table, items[start : start + BATCH_WRITE])

    @store_errors()
    def get(self, tenant: str, job_id: str) -> Job | None:
        if job_id.startswith(IDEMPOTENCY_PREFIX[0]):
            return None  # not a job id: an idempotency record's key
        item = self._client.get_item(
            TableName=self._table, Key=self._key(tenant, job_id), ConsistentRead=True
        ).get("Item")
        return self._job(from_item(item)) if item else None

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        unique = [self._key(t, i) for t, i in dict.fromkeys(keys)]
        jobs = (self._job(v) for v in batch_get(self._client, self._table, unique, consistent=True))
        return {job.id: job for job in jobs}

    @store_errors()
    def list(self, tenant: str, limit: int, cursor: str | None) -> Page[Job]:
        start: str | None = None
        if cursor:
            start = decode_cursor(cursor, frozenset({"id"}))["id"]
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
            return query_page(self._client, params, limit, "id")  # ULIDs: newest first

        if self._partitions == 1:
            items, last = page_of(tenant)
            return Page(self._readables(items), encode_cursor({"id": last}) if last else None)
        # Each partition's newest `limit` after the cursor hold the tenant's newest `limit`.
        pks = [f"{tenant}#{k}" for k in range(self._partitions)]
        with ThreadPoolExecutor(max_workers=self._partitions) as pool:
            pages = list(pool.map(page_of, pks))
        merged = sorted(
            (v for items, _ in pages for v in items), key=lambda v: v["id"], reverse=True
        )
        more = len(merged) > limit or any(last is not None for _, last in pages)
        read = merged[:limit]
        cursor = encode_cursor({"id": read[-1]["id"]}) if more and read else None
        return Page(self._readables(read), cursor)

    @store_errors()
    def replace(
        self,
        job: Job,
        *,
        expected: Job,
        unchanged: Sequence[Job] = (),
        hold: KeyHold | None = None,
        release: bool = False,
    ) -> None:
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": self._signed(job),
            # An item written before versions were stored has none: it reads as 1.
            "ConditionExpression": "#s = :s AND gen = :g AND created_ms = :c AND "
            "(attribute_not_exists(ver) OR ver = :v)",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {
                ":s": {"S": expected.status.value},
                ":g": {"N": str(expected.generation)},
                ":c": {"N": str(expected.created_ms)},
                ":v": {"N": str(expected.version)},
            },
        }
        # (Rare writes, an `after` moved, a failed submission withdrawn, a recurring job ended:
        # a transaction costs twice a put.)
        transaction: list[Any] = [{"Put": put}] if unchanged or hold or release else []
        if hold is not None:  # no replay answered with the job, or only the holder
            check: dict[str, Any] = {
                "TableName": self._table,
                "Key": self._key(job.tenant, IDEMPOTENCY_PREFIX + hold.key),
                "ConditionExpression": "attribute_not_exists(replayed)",
            }
            if hold.token:
                check["ConditionExpression"] += " OR replayed = :t"
                check["ExpressionAttributeValues"] = {":t": {"S": hold.token}}
            transaction.append({"ConditionCheck": check})
        transaction += [
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": self._key(read.tenant, read.id),
                    "ConditionExpression": "gen = :g",
                    "ExpressionAttributeValues": {":g": {"N": str(read.generation)}},
                }
            }
            for read in unchanged
        ]
        if release:  # last: with its job's change (until 2026-11-30 a write of its own after it)
            transaction.append({"Update": self._counted(job.tenant, *RELEASE)})
        try:
            if transaction:
                self._client.transact_write_items(TransactItems=transaction)
            else:
                self._client.put_item(**put)
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError):
                if release and refused_only_by_last(exc):  # a count of 0: nothing to release
                    return self.replace(job, expected=expected, unchanged=unchanged, hold=hold)
                if is_condition_failure(exc) or is_cancelled_by_condition(exc):
                    if self._landed(job, put["Item"]):
                        return
                    raise ConditionFailed(f"job {job.id} or its chain changed") from exc
            # Applied, its answer a 500 (or the SDK's retries of it throttled)? Read it back: a
            # cancel or PATCH written so was taken for unwritten, and its quota change lost
            # (until 2026-11-30; found by an outside audit). A StoreError now is unwritten, or
            # unknown when the read fails too: transient for no answer (until 2026-12-01
            # botocore's error went through, and the sweep parked the chain it completed with an
            # attempt counted: an outside audit). No answer to any of the SDK's tries: unknown
            # at once, as a read-back would wait as long again (an API request then outlasted
            # its function's 29 s: an outside contract audit, round eight).
            if store_error(exc).unknown:
                raise store_error(exc) from exc
            try:
                landed = self._landed(job, put["Item"])
            except (ClientError, BotoCoreError):  # written or not: unknown (`unknown`: its
                error = store_error(exc)  # count's change is kept; a contract audit, round 7)
                raise StoreError(str(error), transient=error.transient, unknown=True) from exc
            if landed:
                return
            raise StoreError(str(exc), transient=store_error(exc).transient) from exc  # unwritten

    def scan_active(
        self,
        segment: int,
        segments: int,
        counters: dict[str, CounterRead] | None = None,
        keys: Callable[[KeyCount], None] | None = None,
    ) -> Iterator[Job]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "Segment": segment,
            "TotalSegments": segments,
            # Jobs (idempotency records, counters and webhook secrets have no status), the
            # recurring counters (at zero too: the recount may have to raise one) and the keys
            # that carry a count.
            "FilterExpression": "#s IN (:s, :p) OR #id = :c OR attribute_exists(counted)",
            "ExpressionAttributeNames": {"#s": "status", "#id": "id"},
            "ExpressionAttributeValues": {
                ":s": {"S": JobStatus.SCHEDULED.value},
                ":p": {"S": JobStatus.PAUSED.value},
                ":c": {"S": RECURRING_COUNTER},
            },
        }
        while True:
            with store_errors():
                response = self._client.scan(**params)
            for item in response.get("Items", []):
                values = from_item(item)
                if str(values["id"]).startswith(IDEMPOTENCY_PREFIX):
                    if keys is not None:  # (the tenant as written, before its partition's suffix)
                        tenant = str(values["tenant"])
                        tenant = tenant if self._partitions == 1 else tenant.rsplit("#", 1)[0]
                        keys((tenant, str(values["job_id"]), int(values["expires_at"])))
                elif values["id"] != RECURRING_COUNTER:
                    job = self._readable(values)
                    if job is not None:
                        yield job
                elif counters is not None:
                    read = (int(values.get("active", 0)), int(values.get("changes", 0)))
                    counters[str(values["tenant"])] = read
            if "LastEvaluatedKey" not in response:
                return
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _readables(self, items: Sequence[dict[str, Any]]) -> builtins.list[Job]:
        """A page's jobs, but for items that do not decode (logged): one such item made every
        page holding it a 500, and the tenant's listing could not go past it (found by an
        outside audit)."""
        return [job for job in map(self._readable, items) if job is not None]

    def _readable(self, values: dict[str, Any]) -> Job | None:
        """A scanned job, or None for an item that does not decode: one such item must not stop
        the daily scan, and the repairs of every job after it (found by an outside audit). It
        is logged for the operator; its tenant's recurring count may come out one low."""
        try:
            return self._job(values)
        except Exception:
            logger.exception(
                "an unreadable job item was skipped",
                extra={"tenant": values.get("tenant"), "job_id": values.get("id")},
            )
            return None

    # A job's overlap gate (duetime.domain.overlap): `!overlap#<job id>` beside its job, with
    # no status (so neither listings nor the reconciler's scan take it for a job).
    def _gate_key(self, tenant: str, job_id: str) -> dict[str, Any]:
        sort_key = OVERLAP_GATE_PREFIX + job_id
        return {"tenant": {"S": self._pk(tenant, sort_key)}, "id": {"S": sort_key}}

    @store_errors()
    def gate(self, tenant: str, job_id: str) -> Gate:
        item = self._client.get_item(
            TableName=self._table, Key=self._gate_key(tenant, job_id), ConsistentRead=True
        ).get("Item")
        if not item:
            return Gate()
        values = from_item(item)
        held = values.get("holder"), values["since"], values.get("buffered"), values["v"]
        return Gate(*held, values.get("gen"), values.get("hgen"), values.get("pin") is True)

    @store_errors()
    def put_gate(self, tenant: str, job_id: str, gate: Gate, expires_at: int) -> bool:
        values = {
            "holder": gate.holder_ms,
            "since": gate.since_ms,
            "buffered": gate.buffered_ms,
            "v": gate.version + 1,
            "gen": gate.generation,
            "hgen": gate.holder_generation,
            "pin": gate.pinned or None,
            "expires_at": expires_at,
        }
        params: dict[str, Any] = {
            "TableName": self._table,
            "Item": self._gate_key(tenant, job_id) | to_item(values),
        }
        if gate.version == 0:
            params["ConditionExpression"] = "attribute_not_exists(id)"
        else:
            params["ConditionExpression"] = "v = :v"
            params["ExpressionAttributeValues"] = {":v": {"N": str(gate.version)}}
        try:
            self._client.put_item(**params)
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise store_error(exc) from exc
        return True

    # A job's dependents: `!dependents#<upstream id>`, a string set of job ids, no status.
    def _dependents_key(self, tenant: str, upstream_id: str) -> dict[str, Any]:
        sort_key = DEPENDENTS_PREFIX + upstream_id
        return {"tenant": {"S": self._pk(tenant, sort_key)}, "id": {"S": sort_key}}

    def _change_dependents(
        self, tenant: str, upstream_id: str, verb: str, job_id: str, at_most: int | None = None
    ) -> None:
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._dependents_key(tenant, upstream_id),
            "UpdateExpression": f"{verb} ids :id",
            "ExpressionAttributeValues": {":id": {"SS": [job_id]}},
        }
        if at_most is not None:  # room for one more, or there already (idempotent)
            request["ConditionExpression"] = (
                "attribute_not_exists(ids) OR size(ids) < :max OR contains(ids, :one)"
            )
            request["ExpressionAttributeValues"] |= {
                ":max": {"N": str(at_most)},
                ":one": {"S": job_id},
            }
        try:
            self._client.update_item(**request)
        except ClientError as exc:
            if is_condition_failure(exc):
                raise ConditionFailed(f"job {upstream_id} has {at_most} dependents") from exc
            raise store_error(exc) from exc

    @store_errors()
    def add_dependent(
        self, tenant: str, upstream_id: str, dependent_id: str, *, at_most: int | None = None
    ) -> None:
        # The mark first, once in the upstream's life, as a write of its item (a new version:
        # a replace that read the item before it fails, so no write drops the mark).
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(tenant, upstream_id),
                UpdateExpression="SET deps = :t, ver = if_not_exists(ver, :one) + :one",
                ConditionExpression="attribute_exists(id) AND "
                "(attribute_not_exists(deps) OR deps = :f)",
                ExpressionAttributeValues={
                    ":t": {"BOOL": True},
                    ":f": {"BOOL": False},
                    ":one": {"N": "1"},
                },
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # marked already, or no such job
                raise store_error(exc) from exc
        self._change_dependents(tenant, upstream_id, "ADD", dependent_id, at_most)

    @store_errors()
    def remove_dependent(self, tenant: str, upstream_id: str, dependent_id: str) -> None:
        self._change_dependents(tenant, upstream_id, "DELETE", dependent_id)

    @store_errors()
    def dependents(self, tenant: str, upstream_id: str) -> tuple[str, ...]:
        item = self._client.get_item(
            TableName=self._table,
            Key=self._dependents_key(tenant, upstream_id),
            ConsistentRead=True,
        ).get("Item")
        return tuple(sorted(item["ids"]["SS"])) if item and "ids" in item else ()

    def get_with_dependents(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[Job, tuple[str, ...]]]:
        # The jobs, then the dependents' items of the jobs marked as having some (or stored
        # before the mark): most jobs have none, and reading a missing item costs as much as
        # reading one.
        request = [self._key(t, i) for t, i in dict.fromkeys(keys)]
        jobs: dict[tuple[str, str], Job] = {}
        for values in batch_get(self._client, self._table, request, consistent=True):
            if not str(values["id"]).startswith("!"):
                job = self._job(values)
                jobs[(job.tenant, job.id)] = job
        marked = [
            self._dependents_key(*key)
            for key, job in jobs.items()
            if job.has_dependents is not False
        ]
        dependents: dict[tuple[str, str], tuple[str, ...]] = {}
        for values in batch_get(self._client, self._table, marked, consistent=True):
            tenant = self._tenant(str(values["tenant"]))
            ids = values.get("ids") or set()
            dependents[(tenant, str(values["id"])[len(DEPENDENTS_PREFIX) :])] = tuple(sorted(ids))
        return {key: (job, dependents.get(key, ())) for key, job in jobs.items()}
