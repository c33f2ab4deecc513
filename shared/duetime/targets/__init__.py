"""Running a job's target: HTTP, SQS, SNS, EventBridge, Lambda or an in-process Python handler.

`TargetExecutor.execute(target, invocation)` returns on success and raises `TargetError` on
failure; `TargetError.retryable` says whether another attempt can help.
"""

from __future__ import annotations

from duetime.domain.addresses import refusal_reason
from duetime.domain.invocation import Invocation, TargetError
from duetime.targets.address_guard import check_addresses, resolve_host
from duetime.targets.clients import AwsClients
from duetime.targets.executor import TargetExecutor
from duetime.targets.handlers import DEFAULT_HANDLERS, Handler, HandlerRegistry, handler
from duetime.targets.http import HttpDelivery

__all__ = [
    "DEFAULT_HANDLERS",
    "AwsClients",
    "Handler",
    "HandlerRegistry",
    "HttpDelivery",
    "Invocation",
    "TargetError",
    "TargetExecutor",
    "check_addresses",
    "handler",
    "refusal_reason",
    "resolve_host",
]
