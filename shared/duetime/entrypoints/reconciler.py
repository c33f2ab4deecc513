"""Reconciler Lambda: invoked once a day by an EventBridge rule; re-arms recurring jobs whose
chain has no live timer (duetime.services.reconcile)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
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
        report = parts().reconciler.reconcile()
        if report.failed:
            raise RuntimeError(
                f"{report.failed} job(s) could not be re-armed (the next run retries)"
            )
        return asdict(report) | {"active_recurring": len(report.active_recurring)}

    return handler


handler = make_handler(components)  # the process-wide components, built on first use
