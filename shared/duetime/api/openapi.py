"""The OpenAPI 3.1 document of the HTTP API, written by hand.

It has exactly the operations in duetime.api.app.ROUTES, and tests/integration/test_api.py
validates every response it receives against the schema of its route and status (JSON Schema
2020-12, the dialect of OpenAPI 3.1). Keep the two in step: change a route, change this. The
component schemas it refers to are in duetime.api.schemas.
"""

from __future__ import annotations

from typing import Any

from duetime import __version__
from duetime.api import admin, preview
from duetime.api.backfill import SCHEMAS as BACKFILL_SCHEMAS
from duetime.api.params import JOB_ID
from duetime.api.schema_parts import ETAG_HEADER, NO_STORE_HEADER, PARAMETERS, ref
from duetime.api.schemas import component_schemas


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    # Every answer of the API carries no-store, errors too (declared since 2026-11-30: only
    # the successes said so; a contract audit, round three).
    return {
        "description": description,
        "content": _json_content(ref("Error")),
        "headers": {**NO_STORE_HEADER, **(headers or {})},
    }


_RESPONSES = {
    "BadRequest": _error(
        "Invalid input (code invalid), a query parameter the operation does not take "
        "included; `field` names it."
    ),
    "Unauthorized": _error("No tenant claim in the token (code unauthorized)."),
    "Forbidden": _error("The token lacks the operator scope (code forbidden)."),
    "NotFound": _error("No such job for this tenant (code not_found)."),
    "Conflict": _error("The job cannot make this transition (code conflict)."),
    "PreconditionFailed": _error(
        "If-Match names a version the job no longer has, or If-None-Match one it has (code "
        "precondition_failed): read it again."
    ),
    "IdempotencyConflict": _error(
        "The Idempotency-Key was used for another request (code idempotency_conflict), or an "
        "`after` schedule names a job that runs no more (code conflict, field "
        "schedule.after.job_id)."
    ),
    "RunConflict": _error(
        "The job is paused, cancelled or completed (code conflict), or the Idempotency-Key "
        "was used for another request, or is in use by a copy being refused (code "
        "idempotency_conflict)."
    ),
    "PayloadTooLarge": _error("Body over 256 KiB or payload over 64 KiB."),
    "TooManyRequests": _error(
        "A tenant quota refused the request (code quota_exceeded): its submissions' or its "
        "requests' rate, its active recurring jobs, the minimum rate interval.",
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
    success: dict[str, Any] = {"description": description, "content": _json_content(ref(schema))}
    success["headers"] = {**NO_STORE_HEADER, **(headers or {})}  # every answer: no-store
    responses: dict[str, Any] = {str(status): success}
    # Every operation that needs a token refuses a query parameter it does not take (400), and
    # a tenant over its request rate (429; since 2026-11-30, submissions' only before).
    common = (400, "BadRequest"), (401, "Unauthorized"), (429, "TooManyRequests")
    for code, name in (*common, *errors, (500, "InternalError")):
        responses[str(code)] = _response(name)
    return dict(sorted(responses.items()))


_TRANSITION = (404, "NotFound"), (409, "Conflict")
_TOO_LARGE = 413, "PayloadTooLarge"
# A status change with If-Match: a malformed one is a 400, another version a 412; a body (it
# takes none, or `{}`) is a 400, or a 413 over 256 KiB.
_IF_MATCHED = (400, "BadRequest"), *_TRANSITION, (412, "PreconditionFailed"), _TOO_LARGE
# RFC 9110 13.1: If-Match and If-None-Match, on every operation about one job.
_CONDITIONS = [_param("IfMatch"), _param("IfNoneMatch")]
# A read whose If-None-Match names the job's version: no body, its ETag.
NOT_MODIFIED = {
    "304": {
        "description": "Not modified: If-None-Match names the job's version. No body.",
        "headers": {**NO_STORE_HEADER, **ETAG_HEADER},
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
                    "200": {
                        "description": "Up.",
                        "content": _json_content(ref("Health")),
                        "headers": NO_STORE_HEADER,
                    }
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
                        "headers": NO_STORE_HEADER,
                    }
                },
            }
        },
        "/jobs": {
            "post": {
                "operationId": "createJob",
                "summary": "Submit a job",
                "parameters": [_param("IdempotencyKey")],
                "requestBody": {"required": True, "content": _json_content(ref("JobRequest"))},
                "responses": _ok(
                    201,
                    "The job, durable and scheduled. A replay with the same Idempotency-Key "
                    "answers 201 too, with the job as it is now.",
                    "Job",
                    (400, "BadRequest"),
                    (404, "NotFound"),
                    (409, "IdempotencyConflict"),
                    _TOO_LARGE,
                    (429, "TooManyRequests"),
                    headers={
                        **ETAG_HEADER,
                        "Location": {
                            "required": True,
                            "description": "The job's path, /jobs/{id}.",
                            "schema": {"type": "string", "pattern": f"^/jobs/{JOB_ID.pattern}$"},
                        },
                    },
                ),
            },
            "get": {
                "operationId": "listJobs",
                "summary": "The tenant's jobs, newest first",
                "parameters": [
                    _param("Status"),
                    _param("Tag"),
                    _param("NamePrefix"),
                    _param("Limit"),
                    _param("Cursor"),
                ],
                "responses": _ok(200, "A page of jobs.", "JobPage", (400, "BadRequest")),
            },
        },
        "/jobs/batch": {
            "post": {
                "operationId": "createJobs",
                "summary": "Submit up to 100 jobs, each answered on its own",
                "description": "Each item is a POST /jobs body with an optional "
                "idempotency_key, and is answered in order with 201 and the job, or with the "
                "4xx and error POST /jobs would have answered: one bad item does not reject "
                "the others. Each item spends one token of the tenant's submission rate. The "
                "writes and the SQS sends are batched (docs/api.md tells the cost).",
                "requestBody": {
                    "required": True,
                    "content": _json_content(ref("JobBatchRequest")),
                },
                "responses": _ok(
                    200,
                    "A result per item, in order.",
                    "JobBatchResult",
                    (400, "BadRequest"),
                    _TOO_LARGE,
                ),
            },
        },
        "/jobs/{id}": {
            "parameters": [_param("JobId")],
            "get": {
                "operationId": "getJob",
                "summary": "A job",
                "parameters": _CONDITIONS,
                "responses": _ok(
                    200,
                    "The job.",
                    "Job",
                    (400, "BadRequest"),
                    (404, "NotFound"),
                    (412, "PreconditionFailed"),
                    headers=ETAG_HEADER,
                )
                | NOT_MODIFIED,
            },
            "patch": {
                "operationId": "updateJob",
                "summary": "Update or reschedule a scheduled or paused job",
                "description": "A new schedule (or priority or runtime) re-arms the job: "
                "occurrences of the old schedule that have not started never start. Other "
                "fields apply to runs not claimed yet. A cancelled or finished job is a 409.",
                "parameters": _CONDITIONS,
                "requestBody": {"required": True, "content": _json_content(ref("JobPatch"))},
                "responses": _ok(
                    200,
                    "The job as updated.",
                    "Job",
                    (400, "BadRequest"),
                    *_TRANSITION,
                    (412, "PreconditionFailed"),
                    _TOO_LARGE,
                    (429, "TooManyRequests"),
                    headers=ETAG_HEADER,
                ),
            },
            "delete": {
                "operationId": "cancelJob",
                "summary": "Cancel a job (idempotent)",
                "parameters": _CONDITIONS,
                "responses": _ok(
                    200, "The job, status cancelled.", "Job", *_IF_MATCHED, headers=ETAG_HEADER
                ),
            },
        },
        "/jobs/{id}/pause": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "pauseJob",
                "summary": "Pause a recurring job (idempotent)",
                "parameters": _CONDITIONS,
                "responses": _ok(
                    200, "The job, status paused.", "Job", *_IF_MATCHED, headers=ETAG_HEADER
                ),
            },
        },
        "/jobs/{id}/resume": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "resumeJob",
                "summary": "Resume a paused job from the next occurrence",
                "parameters": _CONDITIONS,
                "responses": _ok(
                    200,
                    "The job, status scheduled. Spends a submission token: it sends the job's "
                    "next run.",
                    "Job",
                    *_IF_MATCHED,
                    (429, "TooManyRequests"),
                    headers=ETAG_HEADER,
                ),
            },
        },
        "/jobs/{id}/run": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "runJob",
                "summary": "One extra run now, besides the schedule",
                "parameters": [_param("IdempotencyKey"), *_CONDITIONS],
                "responses": _ok(
                    202,
                    "The run is queued. A replay with the same Idempotency-Key answers 202 "
                    "too, with the same run.",
                    "RunAccepted",
                    (400, "BadRequest"),
                    (404, "NotFound"),
                    (409, "RunConflict"),
                    (412, "PreconditionFailed"),
                    _TOO_LARGE,
                    (429, "TooManyRequests"),
                ),
            },
        },
        "/jobs/{id}/backfill": {
            "parameters": [_param("JobId")],
            "post": {
                "operationId": "backfillJob",
                "summary": "Run a recurring job's past occurrences in [from, to) that never ran",
                "description": "At most 1,000 occurrences, within the run records' hot window. "
                "Occurrences with a run record are not sent again. A one-off, paused or "
                "cancelled job is a 409.",
                "parameters": _CONDITIONS,
                "requestBody": {
                    "required": True,
                    "content": _json_content(ref("BackfillRequest")),
                },
                "responses": _ok(
                    202,
                    "The occurrences are queued.",
                    "BackfillAccepted",
                    (400, "BadRequest"),
                    *_TRANSITION,
                    (412, "PreconditionFailed"),
                    _TOO_LARGE,
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
        "/schedules/preview": preview.operation(_ok),
        "/admin/stats": admin.operation(_ok),
        "/webhook-secret": {
            "get": {
                "operationId": "getWebhookSecret",
                "summary": "The tenant's webhook signing secrets (created on first use)",
                "responses": _ok(200, "The secrets.", "WebhookSecret", headers=NO_STORE_HEADER),
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
                    (400, "BadRequest"),
                    (409, "RotationConflict"),
                    _TOO_LARGE,
                    headers=NO_STORE_HEADER,
                ),
            },
        },
    }


def query_parameters(method: str, path: str) -> frozenset[str]:
    """The names of the query parameters the document gives an operation (its own and its
    path's): the API refuses others (duetime.api.params.known_query)."""
    item = OPENAPI["paths"][path]
    found = [*item.get("parameters", []), *item[method.lower()].get("parameters", [])]
    resolved: list[dict[str, Any]] = [
        PARAMETERS[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p for p in found
    ]
    return frozenset(p["name"] for p in resolved if p["in"] == "query")


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
    "info": {
        "title": "duetime",
        "version": __version__,
        "description": "Schedule jobs that run at a time, after a delay, on a rate or on a "
        'cron schedule. Errors are JSON: {"error": {"code", "message", "field"?}}. HTTP '
        "deliveries are signed (Standard Webhooks) with the tenant's secret: see "
        "/webhook-secret. HEAD is answered wherever GET is (its status and headers, no "
        "body); another method a path does not have is a 405 with an Allow header.",
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
        "parameters": PARAMETERS,
        "responses": _RESPONSES,
        "schemas": {**component_schemas(), **BACKFILL_SCHEMAS, **preview.SCHEMAS, **admin.SCHEMAS},
    },
}
