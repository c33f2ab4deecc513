"""The component schemas of a job's schedule and target (duetime.api.openapi), written by hand
from the domain's own limits."""

from __future__ import annotations

from typing import Any

from duetime.api.schema_parts import INSTANT, OPTIONAL_INSTANT, any_case, obj, ref
from duetime.domain.cron import MAX_CRON_LENGTH
from duetime.domain.schedule import AFTER_OUTCOMES, MAX_DELAY_SECONDS, MAX_RATE_SECONDS
from duetime.domain.targets import HTTP_METHODS, MAX_HEADERS


def schedule_schemas() -> dict[str, Any]:
    return {
        "ScheduleAt": obj(
            {"at": INSTANT}, ("at",), description="Once, at an instant (a past one runs now)."
        ),
        "ScheduleDelay": obj(
            {"delay_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_SECONDS}},
            ("delay_seconds",),
            description="Once, this many seconds after creation.",
        ),
        "ScheduleRate": obj(
            {
                "rate_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RATE_SECONDS,
                    "description": "Interval between runs. Below the deployment's minimum "
                    "(DUETIME_MIN_RATE_SECONDS) it is refused with 429 quota_exceeded.",
                },
                "start_at": OPTIONAL_INSTANT,
                "end_at": OPTIONAL_INSTANT,
            },
            ("rate_seconds",),
            description="Every rate_seconds from start_at (default: creation + one interval).",
        ),
        "ScheduleCron": obj(
            {
                "cron": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_CRON_LENGTH,
                    "description": "5 fields (minute hour day-of-month month day-of-week) or "
                    "a macro such as @daily.",
                },
                "timezone": {
                    "type": ["string", "null"],
                    "description": "IANA time zone name; default UTC.",
                },
                "start_at": OPTIONAL_INSTANT,
                "end_at": OPTIONAL_INSTANT,
            },
            ("cron",),
            description="On a cron expression evaluated on the wall clock of `timezone`.",
        ),
        "ScheduleAfter": obj(
            {
                "after": obj(
                    {
                        "job_id": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 64,
                            "description": "Another job of the tenant (404 if none; a cycle "
                            "is refused with 400).",
                        },
                        "on": {
                            "type": "string",
                            "enum": list(AFTER_OUTCOMES),
                            "default": "succeeded",
                            "description": "Which final outcome of its run triggers a run.",
                        },
                    },
                    ("job_id",),
                )
            },
            ("after",),
            description="Once per run of another job that ends as `on` says; the run is at "
            "the upstream run's scheduled instant (run id `<job id>-<upstream ms>`) and carries "
            "`duetime-upstream-run-id`.",
        ),
        "Schedule": {
            "description": "Exactly one schedule kind.",
            "oneOf": [
                ref("ScheduleAt"),
                ref("ScheduleDelay"),
                ref("ScheduleRate"),
                ref("ScheduleCron"),
                ref("ScheduleAfter"),
            ],
        },
    }


def target_schemas() -> dict[str, Any]:
    text = {"type": "string", "minLength": 1}
    method_pattern = "^(" + "|".join(any_case(m) for m in HTTP_METHODS) + ")$"
    return {
        "HttpTarget": obj(
            {
                "type": {"const": "http"},
                "url": {"type": "string", "minLength": 1, "maxLength": 2048, "format": "uri"},
                "method": {
                    "type": "string",
                    "pattern": method_pattern,
                    "default": "POST",
                    "description": "One of " + ", ".join(HTTP_METHODS) + " (any case).",
                },
                "headers": {
                    "type": "object",
                    "maxProperties": MAX_HEADERS,
                    "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$"},
                    "additionalProperties": {"type": "string", "maxLength": 4096},
                },
            },
            ("type", "url"),
        ),
        "SqsTarget": obj(
            {"type": {"const": "sqs"}, "queue_url": {**text, "maxLength": 2048}},
            ("type", "queue_url"),
        ),
        "SnsTarget": obj(
            {"type": {"const": "sns"}, "topic_arn": {**text, "pattern": "^arn:.*:sns:"}},
            ("type", "topic_arn"),
        ),
        "EventBridgeTarget": obj(
            {
                "type": {"const": "eventbridge"},
                "source": {**text, "maxLength": 256},
                "detail_type": {**text, "maxLength": 128},
                "event_bus": {**text, "default": "default"},
            },
            ("type", "source", "detail_type"),
        ),
        "LambdaTarget": obj(
            {"type": {"const": "lambda"}, "function_arn": {**text, "pattern": "^arn:.*:lambda:"}},
            ("type", "function_arn"),
        ),
        "HandlerTarget": obj(
            {
                "type": {"const": "handler"},
                "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,127}$"},
            },
            ("type", "name"),
        ),
        "Target": {
            "oneOf": [ref(name) for name in _TARGET_SCHEMAS.values()],
            "discriminator": {
                "propertyName": "type",
                "mapping": {
                    kind: f"#/components/schemas/{name}" for kind, name in _TARGET_SCHEMAS.items()
                },
            },
        },
    }


_TARGET_SCHEMAS = {
    "http": "HttpTarget",
    "sqs": "SqsTarget",
    "sns": "SnsTarget",
    "eventbridge": "EventBridgeTarget",
    "lambda": "LambdaTarget",
    "handler": "HandlerTarget",
}
