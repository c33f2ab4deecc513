"""The archive's schema: one definition for the Parquet files the archiver writes and the Glue
table Athena reads (the CDK app builds its columns from `glue_columns()` and its partition key
from `glue_partition_keys()`; a test checks the files match).

Objects live at `s3://<bucket>/history/dt=YYYY-MM-DD/<name>.parquet`; `dt` (the UTC day of
`scheduled_for`) is a Hive partition, so it is a table partition key, not a file column. It is
a string (`'2026-11-21'`) on both engines, so the same comparisons work on Athena and DuckDB.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

TABLE_NAME = "runs"
PREFIX = "history/"
PARTITION_KEY = "dt"
PARTITION_TYPE = "string"  # Glue type of `dt`; partition projection: date, format yyyy-MM-dd
PARTITION_FORMAT = "%Y-%m-%d"

_TIMESTAMP = pa.timestamp("ms", tz="UTC")

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("tenant", pa.string(), nullable=False),
        pa.field("job_name", pa.string()),
        pa.field("target_type", pa.string()),
        pa.field("priority", pa.string()),
        pa.field("runtime", pa.string()),
        pa.field("scheduled_for", _TIMESTAMP, nullable=False),
        pa.field("started_at", _TIMESTAMP),
        pa.field("finished_at", _TIMESTAMP),
        pa.field("lateness_ms", pa.int64()),
        pa.field("duration_ms", pa.int64()),
        pa.field("attempts", pa.int32()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        # Added later (older files read it as null, `conform`): how long the first attempt's
        # delivery waited for its due instant (SQS delays count whole seconds).
        pa.field("early_wait_ms", pa.int64()),
        # Added 2026-12-01 (older files read it as null): when the run was due to start, the
        # instant `lateness_ms` counts from (the API's `due_at`: jitter, an `after` job's
        # upstream end, a late one-off's arming); `scheduled_for` for a record without it.
        pa.field("due_at", _TIMESTAMP),
    ]
)

_GLUE_TYPES = {
    pa.string(): "string",
    _TIMESTAMP: "timestamp",
    pa.int64(): "bigint",
    pa.int32(): "int",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def glue_columns() -> list[tuple[str, str]]:
    """(name, Glue/Hive type) of every file column, in order."""
    return [(f.name, _GLUE_TYPES[f.type]) for f in HISTORY_SCHEMA]


def glue_partition_keys() -> list[tuple[str, str]]:
    """(name, Glue/Hive type) of the table's partition keys."""
    return [(PARTITION_KEY, PARTITION_TYPE)]


def partition_of(scheduled_ms: int) -> str:
    """The `dt` partition of a run: the UTC day of its scheduled instant."""
    return (_EPOCH + timedelta(milliseconds=scheduled_ms)).strftime(PARTITION_FORMAT)


def partition_prefix(dt: str) -> str:
    """`history/dt=YYYY-MM-DD/`; `dt` must be a real day in that exact form."""
    try:
        valid = datetime.strptime(dt, PARTITION_FORMAT).strftime(PARTITION_FORMAT) == dt
    except ValueError:
        valid = False
    if not valid:
        raise ValueError(f"not a day in the form YYYY-MM-DD: {dt!r}")
    return f"{PREFIX}{PARTITION_KEY}={dt}/"


def partition_from_key(key: str) -> str | None:
    """The `dt` of an object key under `history/dt=…/`, or None if it is not one."""
    if not key.startswith(f"{PREFIX}{PARTITION_KEY}="):
        return None
    dt = key[len(PREFIX) + len(PARTITION_KEY) + 1 :].split("/", 1)[0]
    try:
        partition_prefix(dt)
    except ValueError:
        return None
    return dt


def conform(table: pa.Table) -> pa.Table:
    """`table` with exactly HISTORY_SCHEMA's columns: files written before a column was added
    get it as nulls, extra columns are dropped, types are cast to the schema's."""
    columns = []
    for field in HISTORY_SCHEMA:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=HISTORY_SCHEMA)
