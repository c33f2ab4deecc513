"""API Lambda: API Gateway HTTP API (payload format 2.0, JWT authorizer) → duetime.api.app.

The resolver is built on the first invocation, not at import time, from the process-wide
components and the API settings read from the environment.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime.api.app import ApiSettings, build_app
from duetime.observability import logger, metrics, tracer
from duetime.wiring import components

# Powertools keeps the current event on the resolver class: one request at a time. Lambda
# never overlaps invocations in a container; the lock keeps in-process hosts (the local
# gateway's threads) from mixing two requests' events, and so two tenants.
_lock = threading.Lock()


@functools.cache
def resolver() -> APIGatewayHttpResolver:
    parts = components()
    return build_app(
        parts.service,
        parts.runs,
        ApiSettings.from_env(),
        webhook_secrets=parts.webhook_secrets,
    )


@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with _lock:
        return resolver().resolve(event, context)
