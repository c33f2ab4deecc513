"""POST /jobs/batch: the request's parsing and the answer's shape (the route is registered by
duetime.api.app; the submission is duetime.services.batch).

`{"jobs": [<job body>, ...]}` with 1 to MAX_BATCH_JOBS bodies, each a POST /jobs body that may
also carry its own `idempotency_key`. A body that is not a list of that size is a 400 on
`jobs`; anything wrong with one item is that item's answer. The submission rate counts a
batch as one submission per job: each item spends a token of the tenant's bucket, and an item
beyond the bucket is answered 429 on its own (with `retry_after_seconds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from duetime.api import views
from duetime.api.params import IDEMPOTENCY_KEY  # as the Idempotency-Key header's
from duetime.api.quotas import TenantLimiter
from duetime.domain.errors import (
    IDEMPOTENCY_FIELD,
    DomainError,
    QuotaExceeded,
    ValidationError,
    unknown_field,
)
from duetime.domain.jobs import parse_job_spec
from duetime.services.batch import MAX_BATCH_JOBS, BatchJob, BatchResult, BatchSubmitter
from duetime.settings import Quotas


def parse_batch(raw: object, admit: Callable[[], None]) -> list[BatchJob | DomainError]:
    """The batch's items in order, each a job to submit or the error that refuses it.
    `admit` spends one submission token per item (QuotaExceeded when none is left)."""
    if not isinstance(raw, Mapping):
        raise ValidationError("body", "must be a JSON object")
    for key in raw:
        if key != "jobs":
            raise ValidationError(str(key), unknown_field(key, ("jobs",)))
    jobs = raw.get("jobs")
    if not isinstance(jobs, list) or not 1 <= len(jobs) <= MAX_BATCH_JOBS:
        raise ValidationError("jobs", f"must be a list of 1 to {MAX_BATCH_JOBS} job bodies")
    items: list[BatchJob | DomainError] = []
    for body in jobs:
        try:
            admit()
            items.append(_item(body))
        except DomainError as exc:
            items.append(exc)
    return items


def _item(body: object) -> BatchJob:
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object")
    fields = dict(body)
    key = fields.pop(IDEMPOTENCY_FIELD, None)
    if key is not None and (not isinstance(key, str) or not IDEMPOTENCY_KEY.fullmatch(key)):
        raise ValidationError(IDEMPOTENCY_FIELD, "must be 1 to 255 visible ASCII characters")
    return BatchJob(parse_job_spec(fields, also=(IDEMPOTENCY_FIELD,)), key)


def item_json(
    result: BatchResult, now_ms: int, status_of: Callable[[DomainError], HTTPStatus]
) -> dict[str, Any]:
    """One item of the answer: the job with status 201, or the error a single POST /jobs
    would have answered, with its status."""
    if not isinstance(result, DomainError):
        return {"status": HTTPStatus.CREATED.value, "job": views.job_json(result, now_ms)}
    error: dict[str, Any] = {
        "code": result.code,
        "message": getattr(result, "message", str(result)),
    }
    where = getattr(result, "field", None)
    if where is not None:
        error["field"] = where
    item: dict[str, Any] = {"status": status_of(result).value, "error": error}
    if isinstance(result, QuotaExceeded):
        item["retry_after_seconds"] = result.retry_after_seconds
    return item


def batch_route(
    submitter: BatchSubmitter,
    tenant: Callable[[], str],
    body: Callable[[], object],
    limiter: TenantLimiter,
    quotas: Quotas,
    clock: Callable[[], int],
    status_of: Callable[[DomainError], HTTPStatus],
) -> Callable[[], Response[Any]]:
    """The route's handler, over the app's own helpers (its tenant, body and error status)."""

    def create_jobs() -> Response[Any]:
        owner = tenant()
        items = parse_batch(body(), lambda: limiter.take(owner))
        results = submitter.create(owner, items, quotas=quotas)
        now = clock()
        return Response(
            status_code=HTTPStatus.OK.value,
            content_type=content_types.APPLICATION_JSON,
            body={"items": [item_json(result, now, status_of) for result in results]},
        )

    return create_jobs
