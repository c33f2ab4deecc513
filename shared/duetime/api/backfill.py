"""`POST /jobs/{id}/backfill` (duetime.services.backfill): registered by build_app, which
passes its own request helpers (the tenant, the JSON body, the id check) and limiter."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from duetime.api.quotas import TenantLimiter
from duetime.api.schema_parts import INSTANT, obj
from duetime.domain.backfill import MAX_BACKFILL_OCCURRENCES
from duetime.services.backfill import Backfill

# The document's (duetime.api.openapi) schemas of the route.
SCHEMAS: dict[str, Any] = {
    "BackfillRequest": obj(
        {
            "from": {**INSTANT, "description": "The range's start (inclusive)."},
            "to": {
                **INSTANT,
                "description": "The range's end (exclusive): not after now, after `from`.",
            },
        },
        ("from", "to"),
    ),
    "BackfillAccepted": obj(
        {
            "occurrences": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_BACKFILL_OCCURRENCES,
                "description": "How many occurrences were sent (those without a run record).",
            }
        },
        ("occurrences",),
    ),
}


def register(
    route: Callable[[str, str], Callable[[Callable[..., Response[Any]]], Any]],
    backfill: Backfill | None,
    *,
    tenant: Callable[[], str],
    body: Callable[[], object],
    checked_id: Callable[[str], str],
    limiter: TenantLimiter,
    conditions: Callable[[str, str], None],
    fan_out: Callable[[str, str], int],
    clock: Callable[[], int],
) -> None:
    @route("POST", "/jobs/{id}/backfill")
    def backfill_job(job_id: str) -> Response[Any]:
        owner = tenant()
        job_id = checked_id(job_id)
        if backfill is None:
            raise RuntimeError("build_app was given no backfill")
        conditions(owner, job_id)  # If-Match, If-None-Match: a 412 before anything is sent
        # A token to be let in, and one for each other run it sends and for each run its
        # `after` jobs make of them, owed when it has (until 2026-11-30 one token sent up to
        # 1,000 runs, again after each PATCH, and their dependents' for free: outside audits)
        limiter.take(owner)
        # Counted before anything is sent, charged as each part is (until 2026-11-30 counted
        # after: a count that failed, or a part's send, left the sent runs uncharged).
        asked = clock()  # its runs trigger the `after` jobs there are by then: those counted
        fanned = fan_out(owner, job_id)
        prepaid = 1  # the token that let it in pays for its first run

        def charge(count: int) -> None:
            nonlocal prepaid
            cost = count * (1 + fanned)
            limiter.charge(owner, cost - min(prepaid, cost))
            prepaid -= min(prepaid, cost)

        sent = backfill.backfill(owner, job_id, body, sent=charge, asked_ms=asked)
        return Response(
            status_code=HTTPStatus.ACCEPTED.value,
            content_type=content_types.APPLICATION_JSON,
            body={"occurrences": sent},
        )
