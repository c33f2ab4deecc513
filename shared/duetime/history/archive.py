"""Archive expired run records: DynamoDB stream REMOVE records → Parquet objects in S3.

The pure core, `plan_batch`, turns one stream batch (the `Records` of a Lambda event) into the
objects to write and the records to report; `Archiver` writes the objects (`HistoryBucket`,
S3) and reports the rest (`FailureQueue`, SQS). The archiver Lambda is a thin shell around it.

Which records are archived: only **TTL expirations**, the REMOVE records whose `userIdentity`
is the DynamoDB service (`{"type": "Service", "principalId": "dynamodb.amazonaws.com"}`).
- INSERT and MODIFY records are live state: the run is still in the hot table, where the API
  serves it, and will reach the archive once, when it expires.
- A REMOVE made by someone (an operator, a clean-up script, a test) is not an expiration: the
  run is being erased on purpose (a mistake, a tenant's data removal), and archiving it would
  keep what was meant to go. Only DynamoDB's own TTL deletes carry the service principal.

Object naming and retries: a batch's rows are grouped by `dt` (the UTC day of
`scheduled_for`) and each group is one zstd Parquet object,
`history/dt=YYYY-MM-DD/<first sequence number>-<last sequence number>.parquet`, named after
the batch's first and last stream sequence numbers. Lambda retries a failed batch with the same
records, so a retry rewrites the same objects with the same rows: overwrites, never duplicates.
(Keep BisectBatchOnFunctionError off: a bisected retry is a different batch with other names.)

Malformed records (no old image, a missing or ill-typed attribute, an unknown status…) are
reported with their sequence number to the failure queue and never stop the rest of the batch;
the invocation succeeds so the stream moves on. Only S3 or SQS failing makes it raise: the
whole batch is retried and overwrites what it already wrote.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from duetime.adapters.codec import from_item, run_from_values
from duetime.domain.runs import UnreadableRun
from duetime.history.schema import (
    HISTORY_SCHEMA,
    PARTITION_KEY,
    PREFIX,
    partition_from_key,
    partition_of,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
TTL_USER_IDENTITY = {"type": "Service", "principalId": TTL_PRINCIPAL}
COMPRESSION = "zstd"
FAILURE_SOURCE = "duetime.archiver"
# A reported record is sent whole when its JSON is at most this long (a run record is ~1 KB);
# ten of them stay well inside one SendMessageBatch (256 KB).
MAX_REPORTED_RECORD_CHARS = 16_000
# Timestamps outside the instants the API takes are corrupt data, not runs: a one-off's `at`
# may be any instant from 1970 on (a past one runs now) to the end of year 9999.
_MIN_MS = 0  # 1970-01-01
_MAX_MS = 253_402_300_800_000  # 10000-01-01
_INT32 = 2**31 - 1


class ArchiveMetric:
    """Metric names of the archiver (CloudWatch EMF; the CDK alarms use these)."""

    RUNS_ARCHIVED = "RunsArchived"
    OBJECTS_WRITTEN = "ArchiveObjectsWritten"
    RECORDS_IGNORED = "ArchiveRecordsIgnored"
    RECORDS_REJECTED = "ArchiveRecordsRejected"


class MalformedRecord(ValueError):
    """A stream record that cannot become a row; the message says why."""


@dataclass(frozen=True)
class Rejected:
    """A record that was not archived because it is malformed."""

    sequence_number: str  # "" when the record has none
    reason: str
    record: Any  # as delivered


@dataclass(frozen=True)
class ArchiveObject:
    key: str
    dt: str
    rows: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class BatchPlan:
    objects: tuple[ArchiveObject, ...]
    rejected: tuple[Rejected, ...]
    ignored: int  # INSERT, MODIFY and non-TTL REMOVE records

    @property
    def rows(self) -> int:
        return sum(len(o.rows) for o in self.objects)


# --- the pure core ---------------------------------------------------------------------------


def is_ttl_expiry(record: Mapping[str, Any]) -> bool:
    """A REMOVE made by DynamoDB's TTL process (Lambda's event spells the identity in
    lowerCamelCase, the Streams API in PascalCase: both are accepted)."""
    if record.get("eventName") != "REMOVE":
        return False
    identity = record.get("userIdentity")
    if not isinstance(identity, Mapping):
        return False
    kind = identity.get("type", identity.get("Type"))
    principal = identity.get("principalId", identity.get("PrincipalId"))
    return bool(kind == "Service" and principal == TTL_PRINCIPAL)


def sequence_number(record: Any) -> str:
    """The record's stream sequence number, or "" if it has no valid one."""
    if not isinstance(record, Mapping):
        return ""
    change = record.get("dynamodb")
    value = change.get("SequenceNumber") if isinstance(change, Mapping) else None
    if isinstance(value, str) and value.isdigit() and len(value) <= 40:
        return value
    return ""


def row_from_image(image: Mapping[str, Any]) -> dict[str, Any]:
    """A row of HISTORY_SCHEMA from a runs-table item (attribute-value form, the stream's old
    image). Timestamps are epoch milliseconds. Raises MalformedRecord."""
    try:
        run = run_from_values(from_item(dict(image)))
    except Exception as exc:  # any decoding failure of foreign data is a malformed record
        cause = exc.__cause__ if isinstance(exc, UnreadableRun) else exc
        if isinstance(cause, KeyError):
            raise MalformedRecord(f"OldImage lacks attribute {cause}") from None
        raise MalformedRecord(f"OldImage cannot be decoded: {cause}") from None
    # How long the target took: the last attempt, from its start to its end.
    duration: int | None = None
    if run.attempts:
        last = run.attempts[-1]
        if isinstance(last.finished_ms, int) and _is_int(last.started_ms):
            duration = last.finished_ms - last.started_ms
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "job_id": run.job_id,
        "tenant": run.tenant,
        "job_name": run.job_name,
        "target_type": run.target_type or None,
        "priority": run.priority,
        "runtime": run.runtime,
        "scheduled_for": run.scheduled_ms,
        "started_at": run.started_ms,
        "finished_at": run.finished_ms,
        "lateness_ms": run.lateness_ms,
        "duration_ms": duration,
        "attempts": run.attempt,
        "status": run.status.value,
        "error": run.error,
        "early_wait_ms": run.early_wait_ms,
        "due_at": run.scheduled_ms if run.due_ms is None else run.due_ms,  # as the API's
    }
    _check_row(row)
    return row


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unicode(text: str) -> bool:
    """Text Parquet can hold: no lone surrogate (JSON's `\\ud800` decodes to one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_row(row: Mapping[str, Any]) -> None:
    """Every value has its column's type (the image is foreign data: a number may arrive as a
    string), and non-nullable columns have one."""
    for field in HISTORY_SCHEMA:
        value = row[field.name]
        if value is None:
            if not field.nullable:
                raise MalformedRecord(f"{field.name} is missing")
            continue
        if pa.types.is_string(field.type):
            ok = isinstance(value, str) and (field.nullable or value != "") and _unicode(value)
        elif pa.types.is_timestamp(field.type):
            ok = _is_int(value) and _MIN_MS <= value < _MAX_MS
        elif pa.types.is_int32(field.type):
            ok = _is_int(value) and -_INT32 <= value <= _INT32
        else:  # int64 (until 2026-11-30 unbounded: Parquet refused it, and the whole batch)
            ok = _is_int(value) and -(2**63) <= value < 2**63
        if not ok:
            raise MalformedRecord(f"{field.name} has an invalid value: {value!r}")


def object_key(dt: str, first_sequence: str, last_sequence: str) -> str:
    return f"{PREFIX}{PARTITION_KEY}={dt}/{first_sequence}-{last_sequence}.parquet"


def plan_batch(records: Sequence[Any]) -> BatchPlan:
    """What to write and what to report for one stream batch (see the module's docstring)."""
    rows_by_dt: dict[str, list[Mapping[str, Any]]] = {}
    rejected: list[Rejected] = []
    ignored = 0
    sequences: list[int] = []
    for record in records:
        sequence = sequence_number(record)
        if sequence:
            sequences.append(int(sequence))
        try:
            if not isinstance(record, Mapping) or not isinstance(record.get("eventName"), str):
                raise MalformedRecord("not a stream record: no eventName")
            if not is_ttl_expiry(record):
                ignored += 1
                continue
            if not sequence:
                raise MalformedRecord("no valid dynamodb.SequenceNumber")
            image = record["dynamodb"].get("OldImage")
            if not isinstance(image, Mapping) or not image:
                raise MalformedRecord("no OldImage (the stream must include old images)")
            row = row_from_image(image)
        except MalformedRecord as exc:
            rejected.append(Rejected(sequence, str(exc), record))
            continue
        rows_by_dt.setdefault(partition_of(row["scheduled_for"]), []).append(row)
    objects: list[ArchiveObject] = []
    if rows_by_dt:
        first, last = str(min(sequences)), str(max(sequences))
        objects = [
            ArchiveObject(object_key(dt, first, last), dt, tuple(rows))
            for dt, rows in sorted(rows_by_dt.items())
        ]
    return BatchPlan(tuple(objects), tuple(rejected), ignored)


def to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows (timestamps as epoch milliseconds) as an Arrow table of HISTORY_SCHEMA."""
    rows = list(rows)
    return pa.Table.from_arrays(
        [pa.array([r[f.name] for r in rows], f.type) for f in HISTORY_SCHEMA],
        schema=HISTORY_SCHEMA,
    )


def parquet_bytes(table: pa.Table, metadata: Mapping[str, str] | None = None) -> bytes:
    """`table` as one zstd-compressed Parquet file (with `metadata` in its footer)."""
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=COMPRESSION)
    return sink.getvalue()


# --- S3 and SQS ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int


@dataclass(frozen=True)
class Footer:
    """What a Parquet object's footer says: its row count and key-value metadata."""

    num_rows: int
    metadata: Mapping[str, str]


class HistoryBucket:
    """The archive's objects in S3 (the archiver, the compactor and the local query engine)."""

    def __init__(self, s3: S3Client, bucket: str) -> None:
        self._s3 = s3
        self.name = bucket

    def put_table(
        self, key: str, table: pa.Table, metadata: Mapping[str, str] | None = None
    ) -> None:
        self._s3.put_object(
            Bucket=self.name,
            Key=key,
            Body=parquet_bytes(table, metadata),
            ContentType="application/vnd.apache.parquet",
        )

    def list(self, prefix: str = PREFIX) -> list[StoredObject]:
        """The data objects under `prefix` in `dt=` partitions, by key. As Hive and Athena
        read them: any name but one starting with `_` or `.` (until 2026-11-30 only names
        ending `.parquet`: a stray file was skipped here, and failed Athena's queries)."""
        found: list[StoredObject] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.name, Prefix=prefix):
            for item in page.get("Contents", []):
                key = item["Key"]
                name = key.rsplit("/", 1)[-1]
                if not name or name.startswith(("_", ".")):  # ("" : a console's folder)
                    continue
                if partition_from_key(key) is None:
                    continue
                found.append(StoredObject(key, int(item.get("Size", 0))))
        return sorted(found, key=lambda o: o.key)

    def read_table(self, key: str) -> pa.Table:
        """The object's rows; a ValueError naming it when it is not Parquet (an object put
        there by hand, cut short: it stops the query and the day's compaction, named)."""
        body = self._s3.get_object(Bucket=self.name, Key=key)["Body"].read()
        try:
            return pq.read_table(pa.BufferReader(body))
        except pa.ArrowException as exc:
            raise ValueError(
                f"s3://{self.name}/{key} is not a readable Parquet file: {exc}"
            ) from None

    def footer(self, key: str) -> Footer:
        """Read only the footer of a Parquet object (two ranged GETs at most)."""
        tail = self._range(key, 64 * 1024)
        if len(tail) < 12 or tail[-4:] != b"PAR1":
            raise ValueError(f"s3://{self.name}/{key} is not a Parquet file")
        (length,) = struct.unpack("<I", tail[-8:-4])
        if length + 8 > len(tail):
            tail = self._range(key, length + 8)
        footer = tail[-(length + 8) :]
        meta = pq.ParquetFile(pa.BufferReader(b"PAR1" + footer)).metadata
        values = {k.decode(): v.decode() for k, v in (meta.metadata or {}).items()}
        return Footer(int(meta.num_rows), values)

    def _range(self, key: str, last_bytes: int) -> bytes:
        reply = self._s3.get_object(Bucket=self.name, Key=key, Range=f"bytes=-{last_bytes}")
        return reply["Body"].read()

    def get_note(self, key: str) -> bytes | None:
        """A small object that is not data (its name starts with `_`), or None when there is
        none: listed first, as a GET of a missing key is refused (403) without s3:ListBucket."""
        listed = self._s3.list_objects_v2(Bucket=self.name, Prefix=key, MaxKeys=1)
        if not any(item["Key"] == key for item in listed.get("Contents", [])):
            return None
        return self._s3.get_object(Bucket=self.name, Key=key)["Body"].read()

    def put_note(self, key: str, body: bytes) -> None:
        self._s3.put_object(Bucket=self.name, Key=key, Body=body, ContentType="application/json")

    def delete(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            reply = self._s3.delete_objects(
                Bucket=self.name,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )
            errors = reply.get("Errors", [])
            if errors:
                first = errors[0]
                raise RuntimeError(
                    f"could not delete {len(errors)} object(s), e.g. {first.get('Key')}: "
                    f"{first.get('Code')} {first.get('Message')}"
                )


class FailureQueue:
    """Reports malformed stream records to an SQS queue, one message per record."""

    def __init__(self, sqs: SQSClient, queue_url: str) -> None:
        self._sqs = sqs
        self._url = queue_url

    def report(self, rejected: Sequence[Rejected]) -> None:
        for start in range(0, len(rejected), 10):
            chunk = rejected[start : start + 10]
            reply = self._sqs.send_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "MessageBody": failure_message(r)} for i, r in enumerate(chunk)
                ],
            )
            failed = reply.get("Failed", [])
            if failed:  # raise: the batch is retried, its objects are overwritten
                raise RuntimeError(
                    f"could not report {len(failed)} malformed record(s): {failed[0]['Code']}"
                )


def failure_message(rejected: Rejected) -> str:
    """The failure queue's message body: the sequence number, why, and the record itself
    when it is small enough."""
    record = rejected.record if isinstance(rejected.record, Mapping) else {}
    body: dict[str, Any] = {
        "source": FAILURE_SOURCE,
        "sequenceNumber": rejected.sequence_number,
        "reason": rejected.reason,
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventSourceARN": record.get("eventSourceARN"),
    }
    raw = json.dumps(rejected.record, default=str, separators=(",", ":"))
    if len(raw) <= MAX_REPORTED_RECORD_CHARS:
        body["record"] = json.loads(raw)
    else:
        body["recordOmitted"] = f"{len(raw)} characters"
    return json.dumps(body, separators=(",", ":"))


# --- the service -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveReport:
    keys: tuple[str, ...]  # objects written
    rows: int
    ignored: int
    rejected: tuple[Rejected, ...]


class Archiver:
    def __init__(self, bucket: HistoryBucket, failures: FailureQueue) -> None:
        self._bucket = bucket
        self._failures = failures

    def archive(self, records: Sequence[Any]) -> ArchiveReport:
        """Write one batch's objects, then report its malformed records. Raises only when S3
        or SQS fails (the caller lets the batch be retried)."""
        plan = plan_batch(records)
        for obj in plan.objects:
            self._bucket.put_table(obj.key, to_table(obj.rows))
        if plan.rejected:
            self._failures.report(plan.rejected)
        return ArchiveReport(
            tuple(o.key for o in plan.objects), plan.rows, plan.ignored, plan.rejected
        )
