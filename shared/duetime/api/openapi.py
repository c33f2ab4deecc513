"""The OpenAPI 3.1 document of the HTTP API, written by hand.

It has exactly the operations in duetime.api.app.ROUTES, and tests/integration/test_api.py
validates every response it receives against the schema of its route and status (JSON Schema
2020-12, the dialect of OpenAPI 3.1). Keep the two in step: change a route, change this.
"""

from __future__ import annotations

from typing import Any

from duetime import __version__
from duetime.domain.cron import MAX_CRON_LENGTH
from duetime.domain.jobs import (
    MAX_NAME_CHARS,
    MAX_PAYLOAD_BYTES,
    MAX_TIMEOUT_SECONDS,
    CatchupMode,
    JobStatus,
    Priority,
    Runtime,
)
from duetime.domain.runs import RunStatus
from duetime.domain.schedule import MAX_DELAY_SECONDS, MAX_RATE_SECONDS
from duetime.domain.targets import HTTP_METHODS, MAX_HEADERS

ERROR_CODES = (
    "invalid",
    "payload_too_large",
    "unauthorized",
    "not_found",
    "method_not_allowed",
    "conflict",
    "idempotency_conflict",
    "quota_exceeded",
    "internal",
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(
    properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return {**schema, **extra}


def _values(kind: Any) -> list[str]:
    return [member.value for member in kind]


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" for c in word)


_INSTANT = {
    "type": "string",
    "format": "date-time",
    "description": "RFC 3339 with an offset or Z; answers are UTC with milliseconds.",
}
_OPTIONAL_INSTANT = {"type": ["string", "null"], "format": "date-time"}
_INTEGER_OR_NULL = {"type": ["integer", "null"]}
_SECRET = {"type": "string", "pattern": "^whsec_[A-Za-z0-9+/]{32,88}={0,2}$"}
_STRING_OR_NULL = {"type": ["string", "null"]}


def _schedules() -> dict[str, Any]:
    return {
        "ScheduleAt": _obj(
            {"at": _INSTANT}, ("at",), description="Once, at an instant (a past one runs now)."
        ),
        "ScheduleDelay": _obj(
            {"delay_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_SECONDS}},
            ("delay_seconds",),
            description="Once, this many seconds after creation.",
        ),
        "ScheduleRate": _obj(
            {
                "rate_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RATE_SECONDS,
                    "description": "Interval between runs. Below the deployment's minimum "
                    "(DUETIME_MIN_RATE_SECONDS) it is refused with 429 quota_exceeded.",
                },
                "start_at": _OPTIONAL_INSTANT,
                "end_at": _OPTIONAL_INSTANT,
            },
            ("rate_seconds",),
            description="Every rate_seconds from start_at (default: creation + one interval).",
        ),
        "ScheduleCron": _obj(
            {
                "cron": {
                    "type": "string",
                    "maxLength": MAX_CRON_LENGTH,
                    "description": "5 fields (minute hour day-of-month month day-of-week) or "
                    "a macro such as @daily.",
                },
                "timezone": {
                    "type": ["string", "null"],
                    "description": "IANA time zone name; default UTC.",
                },
                "start_at": _OPTIONAL_INSTANT,
                "end_at": _OPTIONAL_INSTANT,
            },
            ("cron",),
            description="On a cron expression evaluated on the wall clock of `timezone`.",
        ),
        "Schedule": {
            "description": "Exactly one schedule kind.",
            "oneOf": [
                _ref("ScheduleAt"),
                _ref("ScheduleDelay"),
                _ref("ScheduleRate"),
                _ref("ScheduleCron"),
            ],
        },
    }


def _targets() -> dict[str, Any]:
    text = {"type": "string", "minLength": 1}
    method_pattern = "^(" + "|".join(_any_case(m) for m in HTTP_METHODS) + ")$"
    return {
        "HttpTarget": _obj(
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
        "SqsTarget": _obj(
            {"type": {"const": "sqs"}, "queue_url": {**text, "maxLength": 2048}},
            ("type", "queue_url"),
        ),
        "SnsTarget": _obj(
            {"type": {"const": "sns"}, "topic_arn": {**text, "pattern": "^arn:.*:sns:"}},
            ("type", "topic_arn"),
        ),
        "EventBridgeTarget": _obj(
            {
                "type": {"const": "eventbridge"},
                "source": {**text, "maxLength": 256},
                "detail_type": {**text, "maxLength": 128},
                "event_bus": {**text, "default": "default"},
            },
            ("type", "source", "detail_type"),
        ),
        "LambdaTarget": _obj(
            {"type": {"const": "lambda"}, "function_arn": {**text, "pattern": "^arn:.*:lambda:"}},
            ("type", "function_arn"),
        ),
        "HandlerTarget": _obj(
            {
                "type": {"const": "handler"},
                "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,127}$"},
            },
            ("type", "name"),
        ),
        "Target": {
            "oneOf": [_ref(name) for name in _TARGET_SCHEMAS.values()],
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


def _jobs() -> dict[str, Any]:
    retry_fields = {
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 20, "default": 3},
        "backoff_seconds": {"type": "number", "minimum": 0, "maximum": 900, "default": 2},
        "max_backoff_seconds": {"type": "number", "minimum": 0, "maximum": 900, "default": 300},
    }
    catchup_fields = {
        "mode": {"enum": _values(CatchupMode), "default": "latest"},
        "window_seconds": {"type": "integer", "minimum": 0, "maximum": 604_800, "default": 3600},
    }
    payload = {
        "description": f"Any JSON value, at most {MAX_PAYLOAD_BYTES} bytes (compact JSON); "
        "what the target receives."
    }
    name = {"type": ["string", "null"], "minLength": 1, "maxLength": MAX_NAME_CHARS}
    return {
        "JobRequest": _obj(
            {
                "schedule": _ref("Schedule"),
                "target": _ref("Target"),
                "payload": payload,
                "name": name,
                "priority": {"enum": _values(Priority), "default": "normal"},
                "runtime": {"enum": _values(Runtime), "default": "lambda"},
                "retry": {**_obj(retry_fields), "type": ["object", "null"]},
                "timeout_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_SECONDS,
                    "default": 30,
                },
                "catchup": {
                    "description": "What runs after downtime: a mode, or mode and window.",
                    "oneOf": [
                        {"enum": _values(CatchupMode)},
                        _obj(catchup_fields),
                        {"type": "null"},
                    ],
                },
            },
            ("schedule", "target"),
            description="A job submission. Unknown fields (id, status, tenant, ...) are "
            "refused with 400.",
        ),
        "Job": _obj(
            {
                "id": {"type": "string", "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$"},
                "name": _STRING_OR_NULL,
                "status": {
                    "enum": _values(JobStatus),
                    "description": "A one-off job is succeeded/failed once its run is.",
                },
                "schedule": _ref("Schedule"),
                "target": _ref("Target"),
                "payload": payload,
                "priority": {"enum": _values(Priority)},
                "runtime": {"enum": _values(Runtime)},
                "retry": _obj(retry_fields, tuple(retry_fields)),
                "timeout_seconds": {"type": "integer"},
                "catchup": _obj(catchup_fields, tuple(catchup_fields)),
                "next_run_at": {
                    **_OPTIONAL_INSTANT,
                    "description": "Recurring: the next occurrence from now on. One-off: its "
                    "instant until its run has finished. Null when paused or finished.",
                },
                "created_at": _INSTANT,
                "updated_at": _INSTANT,
                "last_run": {"oneOf": [_ref("Run"), {"type": "null"}]},
            },
            (
                "id",
                "name",
                "status",
                "schedule",
                "target",
                "payload",
                "priority",
                "runtime",
                "retry",
                "timeout_seconds",
                "catchup",
                "next_run_at",
                "created_at",
                "updated_at",
                "last_run",
            ),
        ),
        "Run": _obj(
            {
                "run_id": {"type": "string", "description": "<job id>-<scheduled epoch ms>"},
                "scheduled_for": _INSTANT,
                "status": {"enum": _values(RunStatus)},
                "attempts": {"type": "integer", "minimum": 1},
                "started_at": _OPTIONAL_INSTANT,
                "finished_at": {
                    **_OPTIONAL_INSTANT,
                    "description": "Set once the run has succeeded or failed.",
                },
                "lateness_ms": {
                    **_INTEGER_OR_NULL,
                    "description": "How late the first attempt started.",
                },
                "error": {**_STRING_OR_NULL, "description": "The last attempt's error."},
            },
            (
                "run_id",
                "scheduled_for",
                "status",
                "attempts",
                "started_at",
                "finished_at",
                "lateness_ms",
                "error",
            ),
        ),
        "JobPage": _obj(
            {"items": {"type": "array", "items": _ref("Job")}, "next_cursor": _STRING_OR_NULL},
            ("items", "next_cursor"),
        ),
        "RunPage": _obj(
            {"items": {"type": "array", "items": _ref("Run")}, "next_cursor": _STRING_OR_NULL},
            ("items", "next_cursor"),
        ),
        "RunAccepted": _obj(
            {"job_id": {"type": "string"}, "run_id": {"type": "string"}, "scheduled_for": _INSTANT},
            ("job_id", "run_id", "scheduled_for"),
        ),
        "WebhookSecret": _obj(
            {
                "secret": {
                    **_SECRET,
                    "description": "The current secret: signs every HTTP delivery.",
                },
                "previous_secret": {
                    "oneOf": [_SECRET, {"type": "null"}],
                    "description": "The secret before the last rotation while it still "
                    "signs too (until previous_expires_at); null otherwise.",
                },
                "rotated_at": {
                    **_OPTIONAL_INSTANT,
                    "description": "When the secret was last rotated; null if never.",
                },
                "previous_expires_at": {
                    **_OPTIONAL_INSTANT,
                    "description": "When previous_secret stops signing; null when there "
                    "is no previous secret.",
                },
            },
            ("secret", "previous_secret", "rotated_at", "previous_expires_at"),
            description="The tenant's webhook signing secrets (Standard Webhooks). The HMAC "
            "key is the base64 after whsec_.",
        ),
        "Health": _obj({"status": {"const": "ok"}}, ("status",)),
        "Error": _obj(
            {
                "error": _obj(
                    {
                        "code": {"enum": list(ERROR_CODES)},
                        "message": {"type": "string"},
                        "field": {
                            "type": "string",
                            "description": "The offending input as a dotted path "
                            "(schedule.cron), a query parameter or a header name.",
                        },
                    },
                    ("code", "message"),
                )
            },
            ("error",),
        ),
    }


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": _json_content(_ref("Error")),
    }
    if headers:
        response["headers"] = headers
    return response


_RESPONSES = {
    "BadRequest": _error("Invalid input (code invalid); `field` names it."),
    "Unauthorized": _error("No tenant claim in the token (code unauthorized)."),
    "NotFound": _error("No such job for this tenant (code not_found)."),
    "Conflict": _error("The job cannot make this transition (code conflict)."),
    "IdempotencyConflict": _error(
        "The Idempotency-Key was used for another request (code idempotency_conflict)."
    ),
    "PayloadTooLarge": _error("Body over 256 KiB or payload over 64 KiB."),
    "TooManyRequests": _error(
        "A tenant quota refused the request (code quota_exceeded).",
        {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "required": True,
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    ),
    "RotationConflict": _error(
        "Another rotation happened at the same time (code conflict); read the secret again."
    ),
    "InternalError": _error("An unexpected failure (code internal); safe to retry."),
}


def _response(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/responses/{name}"}


def _param(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/parameters/{name}"}


def _ok(
    status: int,
    description: str,
    schema: str,
    *errors: tuple[int, str],
    headers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    success: dict[str, Any] = {"description": description, "content": _json_content(_ref(schema))}
    if headers:
        success["headers"] = headers
    responses: dict[str, Any] = {str(status): success}
    for code, name in (*errors, (401, "Unauthorized"), (500, "InternalError")):
        responses[str(code)] = _response(name)
    return dict(sorted(responses.items()))


_PARAMETERS = {
    "JobId": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
    "Limit": {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
    },
    "Cursor": {
        "name": "cursor",
        "in": "query",
        "description": "`next_cursor` of the previous page.",
        "schema": {"type": "string", "maxLength": 1024},
    },
    "Status": {
        "name": "status",
        "in": "query",
        "description": "Only jobs with this (effective) status. Applied to each page after "
        "it is read: a page can hold fewer items than `limit`, even none, while "
        "`next_cursor` is set.",
        "schema": {"enum": _values(JobStatus)},
    },
    "IdempotencyKey": {
        "name": "Idempotency-Key",
        "in": "header",
        "description": "Repeat the request with the same key (for 24 hours) to get the same "
        "job back instead of a second one; the same key with another body is a 409.",
        "schema": {"type": "string", "pattern": "^[\\x21-\\x7e]{1,255}$"},
    },
}

_TRANSITION = (404, "NotFound"), (409, "Conflict")
_NO_STORE = {
    "Cache-Control": {
        "description": "no-store: the answer holds secrets (always sent).",
        "schema": {"const": "no-store"},
    }
}


def _paths() -> dict[str, Any]:
    public: list[dict[str, list[str]]] = []
    return {
        "/health": {
            "get": {
                "operationId": "health",
                "summary": "Liveness check",
                "security": public,
                "responses": {
                    "200": {"description": "Up.", "content": _json_content(_ref("Health"))}
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "security": public,
                "responses": {
                    "200": {
                        "description": "The OpenAPI 3.1 document.",
                        "content": _json_content({"type": "object"}),
                    }
                },
            }
        },
        "/jobs": {
            "post": {
                "operationId": "createJob",
                "summary": "Submit a job",
                "parameters": [_param("IdempotencyKey")],
                "requestBody": {"required": True, "content": _json_content(_ref("JobRequest"))},
                "responses": _ok(
                    201,
                    "The job, durable and scheduled. A replay with the same Idempotency-Key "
                    "answers 201 too, with the job as it is now.",
                    "Job",
                    (400, "BadRequest"),
                    (409, "IdempotencyConflict"),
                    (413, "PayloadTooLarge"),
                    (429, "TooManyRequests"),
                ),
            },
            "get": {
                "operationId": "listJobs",
                "summary": "The tenant's jobs, newest first",
                "parameters": [_param("Status"), _param("Limit"), _param("Cursor")],
                "responses": _ok(200, "A page of jobs.", "JobPage", (400, "BadRequest")),
            },
        },
        "/jobs/{id}": {
            "parameters": [_param("JobId")],
            "get": {
                "operationId": "getJob",
                "summary": "A job",
                "responses": _ok(200, "The job.", "Job", (404, "NotFound")),
            },
            "delete": {
                "operationId": "cancelJob",
                "summary": "Cancel a job (idempotent)",
                "responses": _ok(200, "The job, status cancelled.", "Job", *_TRANSITION),
            },
        },
        "/jobs/{id}/pause": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "pauseJob",
                "summary": "Pause a recurring job (idempotent)",
                "responses": _ok(200, "The job, status paused.", "Job", *_TRANSITION),
            },
        },
        "/jobs/{id}/resume": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "resumeJob",
                "summary": "Resume a paused job from the next occurrence",
                "responses": _ok(200, "The job, status scheduled.", "Job", *_TRANSITION),
            },
        },
        "/jobs/{id}/run": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "runJob",
                "summary": "One extra run now, besides the schedule",
                "responses": _ok(
                    202,
                    "The run is queued.",
                    "RunAccepted",
                    *_TRANSITION,
                    (429, "TooManyRequests"),
                ),
            },
        },
        "/jobs/{id}/runs": {
            "parameters": [_param("JobId")],
            "get": {
                "operationId": "listRuns",
                "summary": "A job's recent runs (hot window), newest first",
                "parameters": [_param("Limit"), _param("Cursor")],
                "responses": _ok(
                    200, "A page of runs.", "RunPage", (400, "BadRequest"), (404, "NotFound")
                ),
            },
        },
        "/webhook-secret": {
            "get": {
                "operationId": "getWebhookSecret",
                "summary": "The tenant's webhook signing secrets (created on first use)",
                "responses": _ok(200, "The secrets.", "WebhookSecret", headers=_NO_STORE),
            },
        },
        "/webhook-secret/rotate": {
            "post": {
                "operationId": "rotateWebhookSecret",
                "summary": "A new signing secret; the old one signs too for a grace period",
                "responses": _ok(
                    200,
                    "The secrets after the rotation.",
                    "WebhookSecret",
                    (409, "RotationConflict"),
                    headers=_NO_STORE,
                ),
            },
        },
    }


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
    "info": {
        "title": "duetime",
        "version": __version__,
        "description": "Schedule jobs that run at a time, after a delay, on a rate or on a "
        'cron schedule. Errors are JSON: {"error": {"code", "message", "field"?}}. HTTP '
        "deliveries are signed (Standard Webhooks) with the tenant's secret: see "
        "/webhook-secret.",
    },
    "security": [{"bearerJwt": []}],
    "paths": _paths(),
    "components": {
        "securitySchemes": {
            "bearerJwt": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": "The tenant is the claim named by DUETIME_TENANT_CLAIM "
                "(default sub).",
            }
        },
        "parameters": _PARAMETERS,
        "responses": _RESPONSES,
        "schemas": {**_schedules(), **_targets(), **_jobs()},
    },
}
