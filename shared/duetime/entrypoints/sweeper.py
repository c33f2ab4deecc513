"""Sweeper Lambda: sweeps one shard, invoked asynchronously by the coordinator with
`{"shard": n}` (one invocation per shard each minute)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime.observability import logger, metrics, tracer
from duetime.wiring import components


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    shard = event.get("shard")
    if isinstance(shard, bool) or not isinstance(shard, int) or shard < 0:
        raise ValueError(f"the event must name a shard: {{'shard': n}}, not {event!r}")
    report = components().sweeper.sweep_shard(shard)
    if report.errors:
        # Fail the invocation so the error shows in Errors/alarms; progress made is kept
        # and the next tick resumes from the watermarks.
        raise RuntimeError(f"sweep of shard {shard} had {len(report.errors)} failed partition(s)")
    return {
        "shard": shard,
        "horizon_minute": report.horizon_minute,
        "partitions": report.partitions,
        "timers_read": report.timers_read,
        "messages_sent": report.messages_sent,
        "backlog_minutes": report.backlog_minutes,
        "parked": report.parked,
        "quarantined": report.quarantined,
    }
