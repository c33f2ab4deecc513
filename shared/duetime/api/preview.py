"""`POST /schedules/preview`: the next occurrences of a schedule, as a job submitted now would
have them (duetime.domain.planning.upcoming). Registered by build_app, which passes its request
helpers; the schedule is parsed by the parser of POST /jobs, so its errors name the same fields.
Nothing is stored and no quota is spent: it is a read."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from duetime.api.schema_parts import INSTANT, obj, ref
from duetime.domain.errors import ValidationError, unknown_field
from duetime.domain.planning import MAX_PREVIEW_OCCURRENCES as MAX_PREVIEW
from duetime.domain.planning import upcoming
from duetime.domain.schedule import parse_schedule, whole_number
from duetime.domain.timeutil import from_ms, rfc3339

DEFAULT_COUNT = 5

# The document's (duetime.api.openapi) schemas and operation of the route.
SCHEMAS: dict[str, Any] = {
    "SchedulePreviewRequest": obj(
        {
            # Every kind but `after`, which has no occurrences of its own (a 400).
            "schedule": {
                "oneOf": [ref(f"Schedule{kind}") for kind in ("At", "Delay", "Rate", "Cron")]
            },
            "count": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PREVIEW,
                "default": DEFAULT_COUNT,
                "description": "How many occurrences to show.",
            },
        },
        ("schedule",),
    ),
    "SchedulePreview": obj(
        {
            "occurrences": {
                "type": "array",
                "maxItems": MAX_PREVIEW,
                "items": INSTANT,
                "description": "The next `count` instants from now, in UTC, ascending; fewer "
                "when the schedule ends (an `at` or `delay_seconds` has one).",
            }
        },
        ("occurrences",),
    ),
}


def operation(ok: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The path item; `ok` is the document's builder of an operation's responses."""
    return {
        "post": {
            "operationId": "previewSchedule",
            "summary": "The next occurrences of a schedule, as a job submitted now would run",
            "description": "The schedule is validated as POST /jobs validates it (the same "
            "`field` names, such as schedule.cron). An `after` schedule has no occurrences of "
            "its own: a 400 naming schedule.after. Nothing is stored.",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref("SchedulePreviewRequest")}},
            },
            "responses": ok(
                200,
                "The occurrences.",
                "SchedulePreview",
                (400, "BadRequest"),
                (413, "PayloadTooLarge"),
            ),
        }
    }


def parse_preview(raw: object) -> tuple[Any, int]:
    """The schedule and count of a request body; ValidationError names the bad field."""
    if not isinstance(raw, Mapping):
        raise ValidationError("body", "must be a JSON object")
    for key in raw:
        if key not in ("schedule", "count"):
            raise ValidationError(str(key), unknown_field(key, ("schedule", "count")))
    if "schedule" not in raw:
        raise ValidationError("schedule", "required")
    schedule = parse_schedule(raw["schedule"])
    count = whole_number(raw.get("count", DEFAULT_COUNT), 1, MAX_PREVIEW)
    if count is None:
        raise ValidationError("count", f"must be an integer from 1 to {MAX_PREVIEW}")
    return schedule, count


def register(
    route: Callable[[str, str], Callable[[Callable[..., Response[Any]]], Any]],
    *,
    tenant: Callable[[], str],
    body: Callable[[], object],
    clock: Callable[[], int],
) -> None:
    @route("POST", "/schedules/preview")
    def preview_schedule() -> Response[Any]:
        tenant()  # a job route like the others: a token naming a tenant
        schedule, count = parse_preview(body())
        found = upcoming(schedule, now=from_ms(clock()), count=count)
        return Response(
            status_code=HTTPStatus.OK.value,
            content_type=content_types.APPLICATION_JSON,
            body={"occurrences": [rfc3339(instant) for instant in found]},
        )
