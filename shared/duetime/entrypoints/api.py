"""API Lambda: API Gateway HTTP API (payload format 2.0, JWT authorizer) → duetime.api.app.

The resolver is built on the first invocation, not at import time, from the process-wide
components and the API settings read from the environment.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.observability import logger, metrics, tracer
from duetime.settings import ApiSettings
from duetime.wiring import components

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]

# Powertools keeps the current event on the resolver class: one request at a time. Lambda
# never overlaps invocations in a container; the lock keeps in-process hosts (the local
# gateway's threads) from mixing two requests' events, and so two tenants.
_lock = threading.Lock()


def make_handler(resolver: Callable[[], APIGatewayHttpResolver]) -> Handler:
    """The handler over the resolver `resolver()` returns (the local stack passes its own)."""

    @logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
    )
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        with _lock:
            return resolver().resolve(event, context)

    return handler


@functools.cache
def resolver() -> APIGatewayHttpResolver:
    return wiring.api(components(), ApiSettings.from_env())


handler = make_handler(resolver)
