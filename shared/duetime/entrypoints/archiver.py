"""Archiver Lambda: DynamoDB stream of the runs table (REMOVE records, old images) → Parquet.

TTL expirations become rows of the history archive; malformed records go to the failure queue
with their sequence numbers and the invocation succeeds, so the stream moves on. Only a failing
S3 or SQS call raises: the batch is retried and rewrites the same objects (no duplicates).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.history.archive import ArchiveMetric, Archiver
from duetime.history.settings import ArchiverSettings
from duetime.observability import count, logger, metrics, tracer

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def make_handler(archiver: Callable[[], Archiver]) -> Handler:
    """The handler over the archiver `archiver()` returns (the local stack passes its own)."""

    @logger.inject_lambda_context
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        records = event.get("Records") or []
        report = archiver().archive(records)
        for rejected in report.rejected:
            logger.error(
                "malformed stream record reported to the failure queue",
                extra={"sequence_number": rejected.sequence_number, "reason": rejected.reason},
            )
        count(ArchiveMetric.RUNS_ARCHIVED, report.rows)
        count(ArchiveMetric.OBJECTS_WRITTEN, len(report.keys))
        count(ArchiveMetric.RECORDS_IGNORED, report.ignored)
        count(ArchiveMetric.RECORDS_REJECTED, len(report.rejected))
        logger.info(
            "archived stream batch",
            extra={"records": len(records), "rows": report.rows, "objects": list(report.keys)},
        )
        return {
            "records": len(records),
            "archived": report.rows,
            "ignored": report.ignored,
            "rejected": [r.sequence_number for r in report.rejected],
            "objects": list(report.keys),
        }

    return handler


@functools.cache
def archiver() -> Archiver:
    """Built on the first invocation (cold start) from the environment; nothing at import."""
    return wiring.archiver(ArchiverSettings.from_env())


handler = make_handler(archiver)
