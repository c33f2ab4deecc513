"""The component schemas of the OpenAPI document (duetime.api.openapi): jobs, runs, the
webhook secret and errors (schedules and targets: duetime.api.spec_schemas), written by hand
from the domain's own limits.
"""

from __future__ import annotations

from typing import Any

from duetime.api.schema_parts import (
    INSTANT,
    INTEGER_OR_NULL,
    LINE,
    LINES,
    NOT_BLANK,
    OPTIONAL_INSTANT,
    SECRET,
    STRING_OR_NULL,
    enum_values,
    obj,
    ref,
)
from duetime.api.spec_schemas import schedule_schemas, target_schemas
from duetime.domain.jobs import (
    MAX_DESCRIPTION_CHARS,
    MAX_JITTER_SECONDS,
    MAX_NAME_CHARS,
    MAX_PAYLOAD_BYTES,
    MAX_STAGE_SECONDS,
    MAX_TAG_KEY_CHARS,
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    MAX_TIMEOUT_SECONDS,
    PATCHABLE_FIELDS,
    CatchupMode,
    JobStatus,
    Priority,
    Runtime,
)
from duetime.domain.overlap import Overlap
from duetime.domain.runs import RunStatus

ERROR_CODES = (
    "invalid",
    "payload_too_large",
    "unauthorized",
    "forbidden",
    "not_found",
    "method_not_allowed",
    "conflict",
    "idempotency_conflict",
    "precondition_failed",
    "quota_exceeded",
    "internal",
    "unavailable",  # the local stack's gateway while it stops (a 503)
)


_OVERLAP = {
    "enum": enum_values(Overlap),
    "description": "What an occurrence of a recurring job does while another run of the job "
    "is running or retrying: allow (runs anyway), skip (recorded as a skipped run), "
    "buffer_one (at most one waits, and starts when the active run finishes). A one-off job "
    "accepts only allow.",
}


def _jobs() -> dict[str, Any]:
    retry_fields = {
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 20, "default": 3},
        "backoff_seconds": {"type": "number", "minimum": 0, "maximum": 900, "default": 2},
        "max_backoff_seconds": {
            "type": "number",
            "minimum": 0,
            "maximum": 900,
            "description": "Default: 300, or backoff_seconds when that is larger. At least "
            "backoff_seconds.",
        },
    }
    catchup_fields = {
        "mode": {"enum": enum_values(CatchupMode), "default": "latest"},
        "window_seconds": {"type": "integer", "minimum": 0, "maximum": 604_800, "default": 3600},
    }
    payload = {
        "description": f"Any JSON value, at most {MAX_PAYLOAD_BYTES} bytes as compact JSON "
        "with non-ASCII characters written as \\u escapes; what the target receives."
    }
    name = {
        **LINE,
        "type": ["string", "null"],
        "minLength": 1,
        "maxLength": MAX_NAME_CHARS,
        "description": "One line: no control characters, line or paragraph separators, or "
        "bidirectional overrides." + NOT_BLANK,
    }
    description = {
        **LINES,
        "type": ["string", "null"],
        "maxLength": MAX_DESCRIPTION_CHARS,
        "description": "Free text for people: lines and tabs, no other control characters "
        "and no bidirectional overrides.",
    }
    tags = {
        "type": "object",
        "maxProperties": MAX_TAGS,
        "propertyNames": {"pattern": f"^[A-Za-z0-9_./+@-]{{1,{MAX_TAG_KEY_CHARS}}}$"},
        "additionalProperties": {**LINE, "maxLength": MAX_TAG_VALUE_CHARS},
        "description": "Labels (key: value) to find jobs by: GET /jobs?tag=key:value. A "
        "value is one line, as a name (it may be empty).",
    }
    return {
        "JobRequest": obj(
            {
                "schedule": ref("Schedule"),
                "target": ref("Target"),
                "payload": payload,
                "name": name,
                "description": description,
                "tags": {**tags, "type": ["object", "null"]},
                "priority": {"enum": enum_values(Priority), "default": "normal"},
                "runtime": {"enum": enum_values(Runtime), "default": "lambda"},
                "retry": {**obj(retry_fields), "type": ["object", "null"]},
                "timeout_seconds": {
                    "description": "Seconds one attempt may take. On the lambda runtime at most "
                    "the worker's timeout less 60 s (840 as deployed): a larger value is a 400.",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_SECONDS,
                    "default": 30,
                },
                "catchup": {
                    "description": "What runs after downtime: a mode, or mode and window.",
                    "oneOf": [
                        {"enum": enum_values(CatchupMode)},
                        obj(catchup_fields),
                        {"type": "null"},
                    ],
                },
                "jitter_seconds": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_JITTER_SECONDS,
                    "default": 0,
                    "description": "Each occurrence starts at its instant plus a fixed offset "
                    "in [0, jitter_seconds) drawn from the job id and the instant (the same for "
                    "every retry and duplicate): spreads runs that share an instant.",
                },
                "stage_seconds": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_STAGE_SECONDS,
                    "default": 0,
                    "description": "Each run is handed to a worker this long before the start "
                    "of the second it is due in: the job is read and the run claimed then, and "
                    "the target started on the instant. For bursts that must start on the "
                    "second; on the lambda runtime the wait is billed. A cancel or pause "
                    "acknowledged within this window (or the deployment's claim lead, if "
                    "longer) may not stop the run.",
                },
                "overlap": {**_OVERLAP, "default": "allow"},
            },
            ("schedule", "target"),
            description="A job submission. Unknown fields (id, status, tenant, ...) are "
            "refused with 400.",
        ),
        "Job": obj(
            {
                "id": {"type": "string", "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$"},
                "name": STRING_OR_NULL,
                "description": STRING_OR_NULL,
                "tags": tags,
                "version": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "+1 per change of the job (update, pause, resume, cancel, "
                    "completion); the ETag, for If-Match.",
                },
                "status": {
                    "enum": enum_values(JobStatus),
                    "description": "A one-off job is succeeded/failed once its run is.",
                },
                "schedule": ref("Schedule"),
                "target": ref("Target"),
                "payload": payload,
                "priority": {"enum": enum_values(Priority)},
                "runtime": {"enum": enum_values(Runtime)},
                "retry": obj(retry_fields, tuple(retry_fields)),
                "timeout_seconds": {"type": "integer"},
                "catchup": obj(catchup_fields, tuple(catchup_fields)),
                "jitter_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_JITTER_SECONDS},
                "stage_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_STAGE_SECONDS},
                "overlap": _OVERLAP,
                "next_run_at": {
                    **OPTIONAL_INSTANT,
                    "description": "Recurring: the next occurrence from now on (a completed "
                    "job's last occurrences too). One-off: its instant until its run has "
                    "finished. Null when paused or finished.",
                },
                "created_at": INSTANT,
                "updated_at": INSTANT,
                "last_run": {"oneOf": [ref("Run"), {"type": "null"}]},
            },
            (
                "id",
                "name",
                "description",
                "tags",
                "version",
                "status",
                "schedule",
                "target",
                "payload",
                "priority",
                "runtime",
                "retry",
                "timeout_seconds",
                "catchup",
                "jitter_seconds",
                "stage_seconds",
                "overlap",
                "next_run_at",
                "created_at",
                "updated_at",
                "last_run",
            ),
        ),
        "Run": obj(
            {
                "run_id": {"type": "string", "description": "<job id>-<scheduled epoch ms>"},
                "scheduled_for": INSTANT,
                "due_at": {
                    **INSTANT,
                    "description": "When the run was due to start: scheduled_for plus the "
                    "job's jitter (scheduled_for itself without jitter, and for a run-now).",
                },
                "status": {
                    "enum": enum_values(RunStatus),
                    "description": "skipped: did not start, another run of its job was "
                    "active (overlap skip or buffer_one), or the job was paused or changed "
                    "while it waited (a buffered one, an after job's triggered run); buffered: "
                    "waits for the active run (buffer_one).",
                },
                "attempts": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "0 for a skipped or buffered run.",
                },
                "started_at": OPTIONAL_INSTANT,
                "finished_at": {
                    **OPTIONAL_INSTANT,
                    "description": "Set once the run has succeeded or failed.",
                },
                "lateness_ms": {
                    **INTEGER_OR_NULL,
                    "description": "How late the first attempt started, after due_at.",
                },
                "early_wait_ms": {
                    **INTEGER_OR_NULL,
                    "description": "How long the first attempt's delivery waited for due_at "
                    "(SQS delays count whole seconds); null on runs recorded before it was kept.",
                },
                "error": {**STRING_OR_NULL, "description": "The last attempt's error."},
            },
            (
                "run_id",
                "scheduled_for",
                "due_at",
                "status",
                "attempts",
                "started_at",
                "finished_at",
                "lateness_ms",
                "early_wait_ms",
                "error",
            ),
        ),
        "JobPage": obj(
            {"items": {"type": "array", "items": ref("Job")}, "next_cursor": STRING_OR_NULL},
            ("items", "next_cursor"),
        ),
        "RunPage": obj(
            {"items": {"type": "array", "items": ref("Run")}, "next_cursor": STRING_OR_NULL},
            ("items", "next_cursor"),
        ),
        "RunAccepted": obj(
            {"job_id": {"type": "string"}, "run_id": {"type": "string"}, "scheduled_for": INSTANT},
            ("job_id", "run_id", "scheduled_for"),
        ),
        "WebhookSecret": obj(
            {
                "secret": {
                    **SECRET,
                    "description": "The current secret: signs every HTTP delivery.",
                },
                "previous_secret": {
                    "oneOf": [SECRET, {"type": "null"}],
                    "description": "The secret before the last rotation while it still "
                    "signs too (until previous_expires_at); null otherwise.",
                },
                "rotated_at": {
                    **OPTIONAL_INSTANT,
                    "description": "When the secret was last rotated; null if never.",
                },
                "previous_expires_at": {
                    **OPTIONAL_INSTANT,
                    "description": "When previous_secret stops signing; null when there "
                    "is no previous secret.",
                },
            },
            ("secret", "previous_secret", "rotated_at", "previous_expires_at"),
            description="The tenant's webhook signing secrets (Standard Webhooks). The HMAC "
            "key is the base64 after whsec_.",
        ),
        "Health": obj({"status": {"const": "ok"}}, ("status",)),
        "Error": obj(
            {
                "error": obj(
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


def _job_patch(request: dict[str, Any]) -> dict[str, Any]:
    """The body of PATCH /jobs/{id}: the submission's fields that an update may change."""
    properties = request["properties"]
    return obj(
        {key: properties[key] for key in PATCHABLE_FIELDS},
        description="Fields to replace (a whole schedule, target, retry or tags map); null "
        "(where a submission accepts it) resets a field to its default. Validated as a "
        "submission is; unknown or read-only fields (id, status, version, ...) are refused "
        "with 400.",
    )


def _batch(request: dict[str, Any]) -> dict[str, Any]:
    """POST /jobs/batch: submissions that may each carry an idempotency key, and the answer
    of each item (duetime.api.batch)."""
    key = {
        "type": "string",
        "pattern": "^[\\x21-\\x7e]{1,255}$",
        "description": "As the Idempotency-Key header of POST /jobs, for this item: a replay "
        "(for 24 hours) answers the same job; the key with another body is a 409 item.",
    }
    # Every schedule kind but `after` (created alone with POST /jobs: a 400 item).
    alone = {"oneOf": [ref(f"Schedule{kind}") for kind in ("At", "Delay", "Rate", "Cron")]}
    properties = {**request["properties"], "schedule": alone, "idempotency_key": key}
    item = {**request, "properties": properties}
    return {
        "JobBatchItem": {**item, "description": "A job submission (JobRequest) and its key."},
        "JobBatchRequest": obj(
            {
                "jobs": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 100,
                    "items": ref("JobBatchItem"),
                }
            },
            ("jobs",),
        ),
        "JobBatchResult": obj(
            {
                "items": {
                    "type": "array",
                    "description": "One per submitted job, in order.",
                    "items": {
                        "oneOf": [
                            obj({"status": {"const": 201}, "job": ref("Job")}, ("status", "job")),
                            obj(
                                {
                                    "status": {"type": "integer", "minimum": 400, "maximum": 499},
                                    "error": {
                                        "$ref": "#/components/schemas/Error/properties/error"
                                    },
                                    "retry_after_seconds": {
                                        "type": "integer",
                                        "minimum": 1,
                                        "description": "With status 429: seconds to wait.",
                                    },
                                },
                                ("status", "error"),
                            ),
                        ]
                    },
                }
            },
            ("items",),
        ),
    }


def component_schemas() -> dict[str, Any]:
    jobs = _jobs()
    return {
        **schedule_schemas(),
        **target_schemas(),
        **jobs,
        "JobPatch": _job_patch(jobs["JobRequest"]),
        **_batch(jobs["JobRequest"]),
    }
