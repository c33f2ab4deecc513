"""API Lambda: API Gateway HTTP API (payload format 2.0, JWT authorizer) → duetime.api.app.

The resolver is built on the first invocation, not at import time, from the API's components
(their calls give up within the function's 29 s: duetime.wiring.API_ATTEMPTS) and the API
settings read from the environment.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime import wiring
from duetime.observability import logger, metrics, tracer
from duetime.settings import ApiSettings
from duetime.wiring import api_components as components

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]

# Powertools keeps the current event on the resolver class: one request at a time. Lambda
# never overlaps invocations in a container; the lock keeps in-process hosts (the local
# gateway's threads) from mixing two requests' events, and so two tenants.
_lock = threading.Lock()


def make_handler(resolver: Callable[[], APIGatewayHttpResolver]) -> Handler:
    """The handler over the resolver `resolver()` returns (the local stack passes its own)."""

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        # The request's keys are this thread's (the tenant's too: duetime.api.app), and gone
        # with it: in-process hosts run other functions' handlers on other threads of the one
        # logger (until 2026-11-30 their lines carried the last caller's tenant).
        context_of_request = event.get("requestContext")
        request_id = (
            context_of_request.get("requestId") if isinstance(context_of_request, dict) else None
        )
        logger.thread_safe_append_keys(correlation_id=request_id)
        try:
            with _lock:
                return resolver().resolve(event, context)
        finally:
            logger.thread_safe_remove_keys(["correlation_id", "tenant"])

    return handler


@functools.cache
def resolver() -> APIGatewayHttpResolver:
    return wiring.api(components(), ApiSettings.from_env())


handler = make_handler(resolver)
