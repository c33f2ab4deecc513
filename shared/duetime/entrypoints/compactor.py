"""Compactor Lambda: once a day (an EventBridge schedule), merge the small Parquet objects of
the archive partitions that have stopped receiving writes; `{"dt": "YYYY-MM-DD"}` in the event
compacts that day instead. Safe to re-run at any time (see duetime.history.compaction).
"""

from __future__ import annotations

import functools
from datetime import date
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.clock import wall_ms
from duetime.domain.timeutil import from_ms
from duetime.history.archive import HistoryBucket
from duetime.history.compaction import compact_partition, settled_days
from duetime.history.settings import CompactorSettings
from duetime.observability import count, logger, metrics, tracer


class CompactionMetric:
    OBJECTS_MERGED = "HistoryObjectsMerged"
    OBJECTS_WRITTEN = "HistoryObjectsCompacted"


@functools.cache
def settings() -> CompactorSettings:
    return CompactorSettings.from_env()


@functools.cache
def bucket() -> HistoryBucket:
    return wiring.history_bucket(settings().bucket)


def days_to_compact(event: dict[str, Any], today: date) -> list[str]:
    requested = event.get("dt") if isinstance(event, dict) else None
    if requested is not None:
        return [str(requested)]  # compact_partition checks the form
    return [d.isoformat() for d in settled_days(today, settings().run_ttl_seconds)]


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    results = []
    for dt in days_to_compact(event, from_ms(wall_ms()).date()):
        report = compact_partition(bucket(), dt)
        count(CompactionMetric.OBJECTS_MERGED, len(report.merged))
        count(CompactionMetric.OBJECTS_WRITTEN, len(report.written))
        logger.info(report.summary(), extra={"dt": dt, "written": report.written})
        results.append(
            {
                "dt": dt,
                "merged": len(report.merged),
                "written": report.written,
                "rows": report.rows,
                "recovered": len(report.recovered),
            }
        )
    return {"partitions": results}
