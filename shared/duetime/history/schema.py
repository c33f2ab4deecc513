"""The archive's schema: one definition for the Parquet files the archiver writes and the Glue
table Athena reads (the CDK app builds its columns from `glue_columns()`; a test checks they
match).

Objects live at `s3://<bucket>/history/dt=YYYY-MM-DD/<name>.parquet`; `dt` (the UTC day of
`scheduled_for`) is a Hive partition, so it is a table partition key, not a file column.
"""

from __future__ import annotations

import pyarrow as pa

TABLE_NAME = "runs"
PREFIX = "history/"
PARTITION_KEY = "dt"

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
        pa.field("attempts", pa.int32()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
    ]
)

_GLUE_TYPES = {
    pa.string(): "string",
    _TIMESTAMP: "timestamp",
    pa.int64(): "bigint",
    pa.int32(): "int",
}


def glue_columns() -> list[tuple[str, str]]:
    """(name, Glue/Hive type) of every file column, in order."""
    return [(f.name, _GLUE_TYPES[f.type]) for f in HISTORY_SCHEMA]
