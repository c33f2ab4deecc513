"""Coordinator Lambda: invoked once a minute by an EventBridge rule; starts one sweep per
shard (duetime.services.coordinator)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime.observability import logger, metrics, tracer
from duetime.wiring import Components, components

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def make_handler(parts: Callable[[], Components]) -> Handler:
    """The handler over the components `parts()` returns (the local stack passes its own)."""

    @logger.inject_lambda_context
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        report = parts().coordinator.tick()
        if report.failed:
            # Fail the invocation so it shows in Errors/alarms; the shards that did start are
            # sweeping, and the next tick starts the others again.
            raise RuntimeError(f"{len(report.failed)} shard sweep(s) could not be started")
        return {
            "shards": report.shards,
            "launched": report.launched,
            "lag_minutes": report.lag_minutes,
            "lagging": report.lagging,
        }

    return handler


handler = make_handler(components)  # the process-wide components, built on first use
