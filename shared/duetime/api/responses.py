"""The API's answers: JSON bodies, a job with its ETag, and the one place errors become HTTP
(`ERROR_STATUS`: which DomainError is which status; any other DomainError is a 400)."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, TypeAlias

from aws_lambda_powertools.event_handler import Response, content_types

from duetime.api import admin as admin_route
from duetime.api import views
from duetime.domain.errors import (
    DomainError,
    IdempotencyConflict,
    IllegalTransition,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    QuotaExceeded,
    ValidationError,
)
from duetime.services.jobs import JobView
from duetime.services.webhook_secrets import RotationConflict

JsonResponse: TypeAlias = Response[Any]


class Unauthorized(DomainError):
    code = "unauthorized"


class MethodNotAllowed(DomainError):
    code = "method_not_allowed"

    def __init__(self, message: str, allow: list[str]) -> None:
        super().__init__(message)
        self.allow = allow


# Most specific first: PayloadTooLarge is a ValidationError. Any other DomainError is a 400.
ERROR_STATUS: tuple[tuple[type[DomainError], HTTPStatus], ...] = (
    (PayloadTooLarge, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (ValidationError, HTTPStatus.BAD_REQUEST),
    (Unauthorized, HTTPStatus.UNAUTHORIZED),
    (admin_route.Forbidden, HTTPStatus.FORBIDDEN),
    (NotFound, HTTPStatus.NOT_FOUND),
    (MethodNotAllowed, HTTPStatus.METHOD_NOT_ALLOWED),
    (IllegalTransition, HTTPStatus.CONFLICT),
    (IdempotencyConflict, HTTPStatus.CONFLICT),
    (PreconditionFailed, HTTPStatus.PRECONDITION_FAILED),
    (RotationConflict, HTTPStatus.CONFLICT),
    (QuotaExceeded, HTTPStatus.TOO_MANY_REQUESTS),
)


def json_response(
    status: HTTPStatus, body: Any, headers: Mapping[str, str] | None = None
) -> JsonResponse:
    return Response(
        status_code=status.value,
        content_type=content_types.APPLICATION_JSON,
        body=body,
        headers=dict(headers or {}),
    )


def job_response(status: HTTPStatus, view: JobView, now_ms: int) -> JsonResponse:
    """A job, with its version as the ETag (what `If-Match` of an update names)."""
    return json_response(status, views.job_json(view, now_ms), {"ETag": f'"{view.job.version}"'})


def status_of(exc: DomainError) -> HTTPStatus:
    for kind, status in ERROR_STATUS:
        if isinstance(exc, kind):
            return status
    return HTTPStatus.BAD_REQUEST


def error_response(exc: DomainError) -> JsonResponse:
    error: dict[str, Any] = {"code": exc.code, "message": getattr(exc, "message", str(exc))}
    where = getattr(exc, "field", None)
    if where is not None:  # "" too: a body key spelt "" is named as such
        error["field"] = where
    headers: dict[str, str] = {}
    if isinstance(exc, QuotaExceeded):
        headers["Retry-After"] = str(exc.retry_after_seconds)
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = ", ".join(exc.allow)
    return json_response(status_of(exc), {"error": error}, headers)
