"""The component schemas of a job's schedule and target (duetime.api.openapi), written by hand
from the domain's own limits."""

from __future__ import annotations

from typing import Any

from duetime.api.schema_parts import (
    INSTANT,
    LINE,
    OPTIONAL_INSTANT,
    any_case,
    obj,
    ref,
    whole,
)
from duetime.domain.cron import MAX_CRON_LENGTH
from duetime.domain.schedule import AFTER_OUTCOMES, MAX_DELAY_SECONDS, MAX_RATE_SECONDS
from duetime.domain.targets import (
    EVENT_BUS,
    HEADER_NAME,
    HEADER_VALUE,
    HTTP_METHODS,
    LAMBDA_FUNCTION_ARN,
    MAX_HEADER_VALUE_CHARS,
    MAX_HEADERS,
    MAX_SQS_QUEUE_NAME_CHARS,
    RESERVED_HEADER_PREFIXES,
    RESERVED_HEADERS,
    SNS_TOPIC_ARN,
)

# An AWS target's region (duetime.domain.reach.region_refusal).
IN_REGION = "In the deployment's region: another region's is a 400 naming the field."


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
                    **LINE,
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


# A URL's start as the server reads it: http(s) in any case, an authority with no user, no
# space and no control character (its host's shape, and a port from 1, are in descriptions).
HTTP_SCHEME = "[Hh][Tt][Tt][Pp][Ss]?://"
AUTHORITY = "[^/?#@\\s\\x00-\\x1f\\x7f-\\x9f]+"


def target_schemas() -> dict[str, Any]:
    text = {"type": "string", "minLength": 1}
    names = [any_case(h) for h in sorted(RESERVED_HEADERS)]
    names += [any_case(p) + ".*" for p in RESERVED_HEADER_PREFIXES]
    reserved = {"pattern": "^(?:" + "|".join(names) + ")$"}
    method_pattern = "^(" + "|".join(any_case(m) for m in HTTP_METHODS) + ")$"
    return {
        "HttpTarget": obj(
            {
                "type": {"const": "http"},
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2048,
                    "pattern": f"^{HTTP_SCHEME}{AUTHORITY}(?:[/?#][\\x21-\\x7e]*)?$",
                    "description": "http or https, a host that is a DNS name (an "
                    "internationalised one too) or an IP address, a port from 1 to 65535, no "
                    "user or password, no spaces, the rest printable ASCII. A "
                    "deployment that requires https, or refuses internal addresses given "
                    "literally (localhost, 10.0.0.1), answers 400 on target.url for them.",
                },
                "method": {
                    "type": "string",
                    "pattern": method_pattern,
                    "default": "POST",
                    "description": "One of " + ", ".join(HTTP_METHODS) + " (any case).",
                },
                "headers": {
                    "type": "object",
                    "maxProperties": MAX_HEADERS,
                    "propertyNames": {"pattern": whole(HEADER_NAME), "not": reserved},
                    "additionalProperties": {
                        "type": "string",
                        "maxLength": MAX_HEADER_VALUE_CHARS,
                        "pattern": whole(HEADER_VALUE),
                    },
                    "description": "Names are tokens, each once in any case; those duetime "
                    "sets (Host, Content-Length, Transfer-Encoding, Connection, duetime-*, "
                    "webhook-*) are refused. Values are visible ASCII, spaces and tabs.",
                },
            },
            ("type", "url"),
        ),
        "SqsTarget": obj(
            {
                "type": {"const": "sqs"},
                "queue_url": {
                    **text,
                    "maxLength": 2048,
                    "pattern": f"^{HTTP_SCHEME}{AUTHORITY}/[A-Za-z0-9_.-]+/"
                    f"(?:[A-Za-z0-9_-]{{1,{MAX_SQS_QUEUE_NAME_CHARS}}}"
                    f"|[A-Za-z0-9_-]{{1,{MAX_SQS_QUEUE_NAME_CHARS - 5}}}\\.fifo)/?$",
                    "description": "https://<host>/<account>/<queue>: on AWS's hosts the "
                    "account in digits; the queue 1 to 80 letters, digits, - or _ (.fifo at "
                    "the end of a FIFO queue's); no query. " + IN_REGION,
                },
            },
            ("type", "queue_url"),
        ),
        "SnsTarget": obj(
            {
                "type": {"const": "sns"},
                "topic_arn": {**text, "pattern": whole(SNS_TOPIC_ARN), "description": IN_REGION},
            },
            ("type", "topic_arn"),
        ),
        "EventBridgeTarget": obj(
            {
                "type": {"const": "eventbridge"},
                "source": {
                    **LINE,
                    "minLength": 1,
                    "maxLength": 256,
                    "not": {"pattern": "^aws\\."},
                    "description": "One line, not only white space, not starting aws. (AWS's own).",
                },
                "detail_type": {
                    **LINE,
                    "minLength": 1,
                    "maxLength": 128,
                    "description": "One line, not only white space.",
                },
                "event_bus": {
                    **text,
                    "pattern": whole(EVENT_BUS),
                    "default": "default",
                    "description": "A name, or an ARN " + IN_REGION[0].lower() + IN_REGION[1:],
                },
            },
            ("type", "source", "detail_type"),
        ),
        "LambdaTarget": obj(
            {
                "type": {"const": "lambda"},
                "function_arn": {
                    **text,
                    "pattern": whole(LAMBDA_FUNCTION_ARN),
                    "description": IN_REGION,
                },
            },
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
