"""`GET /admin/stats`: the operators' view (duetime.services.operator_stats), for a token that
carries the operator scope; any other token, whatever its tenant, gets a 403.

The scope is checked here, at the HTTP door, on the claim API Gateway's JWT authorizer passes:
`DUETIME_OPERATOR_CLAIM` (default `scope`) must hold `DUETIME_OPERATOR_SCOPE` (default
`duetime/operator`) as one of its words. API Gateway hands every claim over as a string: a
space-separated `scope` stays as it is, an array claim (`scp`, `cognito:groups`) is rendered
`[a b]`; both are read as a list of words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from duetime.api.schema_parts import INTEGER_OR_NULL, enum_values, obj, ref
from duetime.domain.errors import DomainError
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.timeutil import rfc3339_ms
from duetime.services.operator_stats import OperatorStats, SystemStats


class Forbidden(DomainError):
    code = "forbidden"


def claim_words(event: Mapping[str, Any], claim: str) -> list[str]:
    """The words of a claim as API Gateway passes it ("a b" or "[a b]"); none if absent."""
    value: object = event
    for key in ("requestContext", "authorizer", "jwt", "claims", claim):
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, list):  # a host that passes arrays as they are
        return [str(item) for item in value]
    if not isinstance(value, str):
        return []
    text = value.strip(" ")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    # Words are separated by spaces (RFC 6749's scope syntax), not by any Unicode whitespace:
    # "duetime/operator\u00a0x" is one word, not the operator's (found by an outside audit).
    return [word for word in text.split(" ") if word]


def require_scope(event: Mapping[str, Any], claim: str, scope: str) -> None:
    if scope not in claim_words(event, claim):
        raise Forbidden(f"this route needs a token whose {claim!r} claim holds {scope!r}")


def stats_json(stats: SystemStats) -> dict[str, Any]:
    figures = stats.figures
    return {
        "generated_at": rfc3339_ms(stats.generated_ms),
        "queues": [
            {
                "name": f"{queue.runtime.value}-{queue.priority.value}",
                "runtime": queue.runtime.value,
                "priority": queue.priority.value,
                "depth": queue.depth,
                "in_flight": queue.in_flight,
                "delayed": queue.delayed,
                "oldest_age_seconds": queue.oldest_age_seconds,
                "dlq_depth": queue.dlq_depth,
            }
            for queue in figures.queues
        ],
        "shards": [
            {"shard": shard, "lag_seconds": lag} for shard, lag in sorted(stats.shard_lags.items())
        ],
        "runs_last_hour": {
            "started": figures.runs.started,
            "failed": figures.runs.failed,
            "lateness_ms": {
                "p50": figures.runs.lateness_p50_ms,
                "p99": figures.runs.lateness_p99_ms,
            },
        },
    }


_COUNT = {"type": "integer", "minimum": 0}
SCHEMAS: dict[str, Any] = {
    "SystemStats": obj(
        {
            "generated_at": {"type": "string", "format": "date-time"},
            "queues": {"type": "array", "items": ref("QueueStats")},
            "shards": {
                "type": "array",
                "items": obj(
                    {
                        "shard": _COUNT,
                        "lag_seconds": {
                            **INTEGER_OR_NULL,
                            "minimum": 0,
                            "description": "How long ago the shard's oldest unswept bucket "
                            "minute began (under about 60 when healthy); null: never swept.",
                        },
                    },
                    ("shard", "lag_seconds"),
                ),
            },
            "runs_last_hour": obj(
                {
                    "started": _COUNT,
                    "failed": {**_COUNT, "description": "Runs failed for good (no retry left)."},
                    "lateness_ms": obj(
                        {"p50": INTEGER_OR_NULL, "p99": INTEGER_OR_NULL},
                        ("p50", "p99"),
                        description="Start lateness percentiles; null when no run started.",
                    ),
                },
                ("started", "failed", "lateness_ms"),
            ),
        },
        ("generated_at", "queues", "shards", "runs_last_hour"),
    ),
    "QueueStats": obj(
        {
            "name": {"type": "string", "pattern": "^[a-z]+-[a-z]+$"},
            "runtime": {"enum": enum_values(Runtime)},
            "priority": {"enum": enum_values(Priority)},
            "depth": {**_COUNT, "description": "Messages visible, waiting for a worker."},
            "in_flight": {**_COUNT, "description": "Messages received, not yet deleted."},
            "delayed": {**_COUNT, "description": "Messages whose delay has not passed."},
            "oldest_age_seconds": {
                **INTEGER_OR_NULL,
                "description": "On AWS: ApproximateAgeOfOldestMessage (CloudWatch, its "
                "latest minute; null before its first data point). Locally: how long the "
                "oldest message ready for a worker has waited.",
            },
            "dlq_depth": {**_COUNT, "description": "Messages in the dead-letter queue."},
        },
        (
            "name",
            "runtime",
            "priority",
            "depth",
            "in_flight",
            "delayed",
            "oldest_age_seconds",
            "dlq_depth",
        ),
    ),
}


def operation(ok: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The path item; `ok` is the document's builder of an operation's responses."""
    return {
        "get": {
            "operationId": "systemStats",
            "summary": "Queues, sweep lag and the last hour's runs (operators)",
            "description": "Needs a token whose DUETIME_OPERATOR_CLAIM claim (default scope) "
            "holds DUETIME_OPERATOR_SCOPE (default duetime/operator); any other token is a "
            "403. System-wide: not limited to the token's tenant.",
            "responses": ok(200, "The figures.", "SystemStats", (403, "Forbidden")),
        }
    }


def register(
    route: Callable[[str, str], Callable[[Callable[..., Response[Any]]], Any]],
    stats: OperatorStats | None,
    *,
    event: Callable[[], Mapping[str, Any]],
    tenant: Callable[[], str],
    claim: str,
    scope: str,
) -> None:
    @route("GET", "/admin/stats")
    def system_stats() -> Response[Any]:
        tenant()  # a verified token naming someone, like every other route
        require_scope(event(), claim, scope)
        if stats is None:
            raise RuntimeError("build_app was given no operator stats")
        return Response(
            status_code=HTTPStatus.OK.value,
            content_type=content_types.APPLICATION_JSON,
            body=stats_json(stats.stats()),
            headers={"Cache-Control": "no-store"},
        )
