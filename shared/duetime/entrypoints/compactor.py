"""Compactor Lambda: once a day (an EventBridge schedule), merge the small Parquet objects of
the archive partitions that have stopped receiving writes, and of the days earlier runs left
unfinished (duetime.history.backlog); `{"dt": "YYYY-MM-DD"}` in the event compacts that day
instead. It stops before its timeout, the rest left for the next run. Safe to re-run at any
time (see duetime.history.compaction).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.clock import wall_ms
from duetime.domain.timeutil import from_ms
from duetime.history.archive import HistoryBucket
from duetime.history.backlog import compact_backlog
from duetime.history.compaction import CompactionReport, compact_partition, settled_days
from duetime.history.settings import CompactorSettings
from duetime.observability import count, logger, metrics, tracer

# Time kept back at the end of an invocation: one more merge (at most 64 MB of inputs, about
# 1,600 archiver objects read one by one: a minute or so) fits in it; a quarter of the time
# when the function's timeout is short.
STOP_MARGIN_MS = 180_000


class CompactionMetric:
    OBJECTS_MERGED = "HistoryObjectsMerged"
    OBJECTS_WRITTEN = "HistoryObjectsCompacted"


class DaysNotCompacted(RuntimeError):
    """Some days' compaction failed (the others went on): they stay in the backlog."""


@functools.cache
def settings() -> CompactorSettings:
    return CompactorSettings.from_env()


@functools.cache
def bucket() -> HistoryBucket:
    return wiring.history_bucket(settings().bucket)


def requested_day(event: dict[str, Any]) -> str | None:
    requested = event.get("dt") if isinstance(event, dict) else None
    return None if requested is None else str(requested)  # compact_partition checks the form


def deadline(context: LambdaContext) -> Callable[[], bool]:
    """A test of whether the invocation should stop: less than the margin left of its time."""
    margin = min(STOP_MARGIN_MS, context.get_remaining_time_in_millis() // 4)
    return lambda: context.get_remaining_time_in_millis() < margin


def _result(report: CompactionReport) -> dict[str, Any]:
    count(CompactionMetric.OBJECTS_MERGED, len(report.merged))
    count(CompactionMetric.OBJECTS_WRITTEN, len(report.written))
    logger.info(report.summary(), extra={"dt": report.dt, "written": report.written})
    return {
        "dt": report.dt,
        "merged": len(report.merged),
        "written": report.written,
        "rows": report.rows,
        "recovered": len(report.recovered),
        "finished": report.finished,
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out_of_time = deadline(context)
    requested = requested_day(event)
    if requested is not None:
        report = compact_partition(bucket(), requested, out_of_time=out_of_time)
        return {"partitions": [_result(report)]}
    today = from_ms(wall_ms()).date()
    run = compact_backlog(bucket(), settled_days(today, settings().run_ttl_seconds), out_of_time)
    results = [_result(report) for report in run.reports]
    # (A log line, no metric: a backlog that grows from day to day shows in its `days`.)
    logger.info("compaction backlog", extra={"days": run.left, "failed": run.failed})
    if run.failed:
        raise DaysNotCompacted(
            "; ".join(f"dt={dt}: {reason}" for dt, reason in sorted(run.failed.items()))
        )
    return {"partitions": results, "backlog": run.left}
