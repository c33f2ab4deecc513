"""Job submission validation and user-driven status transitions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duetime.domain.errors import IllegalTransition, PayloadTooLarge, ValidationError
from duetime.domain.jobs import (
    CatchupMode,
    Job,
    JobStatus,
    Priority,
    Runtime,
    parse_job_spec,
    spec_to_dict,
)
from duetime.domain.targets import HttpTarget

VALID: dict[str, Any] = {
    "schedule": {"delay_seconds": 10},
    "target": {"type": "http", "url": "https://example.com/hook"},
}


def body(**changes: Any) -> dict[str, Any]:
    return {**VALID, **changes}


def test_given_a_minimal_body_then_defaults_apply() -> None:
    spec = parse_job_spec(VALID)
    assert spec.priority == Priority.NORMAL
    assert spec.runtime == Runtime.LAMBDA
    assert (spec.retry.max_attempts, spec.retry.backoff_seconds) == (3, 2.0)
    assert spec.retry.max_backoff_seconds == 300.0
    assert spec.catchup.mode == CatchupMode.LATEST
    assert spec.timeout_seconds == 30
    assert spec.target == HttpTarget(url="https://example.com/hook", method="POST", headers={})


def test_given_a_full_body_then_it_round_trips_through_spec_to_dict() -> None:
    full = body(
        name="nightly",
        payload={"a": [1, 2]},
        priority="high",
        runtime="fargate",
        retry={"max_attempts": 5, "backoff_seconds": 1, "max_backoff_seconds": 60},
        timeout_seconds=120,
        catchup={"mode": "all", "window_seconds": 600},
    )
    spec = parse_job_spec(full)
    assert parse_job_spec(spec_to_dict(spec)) == spec


def test_a_negative_zero_backoff_is_stored_and_echoed_as_zero() -> None:
    # Found by an audit: {"backoff_seconds": -0.0} was echoed back as -0.0.
    spec = parse_job_spec(body(retry={"backoff_seconds": -0.0, "max_backoff_seconds": -0.0}))
    shown = json.dumps(spec_to_dict(spec)["retry"])
    assert "-" not in shown, shown


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"id": "x"}, "id"),
        ({"status": "succeeded"}, "status"),
        ({"tenant": "other"}, "tenant"),
        ({"created_at": "2026-01-01T00:00:00Z"}, "created_at"),
        ({"priority": "urgent"}, "priority"),
        ({"runtime": "ec2"}, "runtime"),
        ({"name": ""}, "name"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"timeout_seconds": True}, "timeout_seconds"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"backoff_seconds": -1}}, "retry.backoff_seconds"),
        ({"retry": {"backoff_seconds": 10, "max_backoff_seconds": 5}}, "retry.max_backoff_seconds"),
        ({"retry": {"max_backoff_seconds": 901}}, "retry.max_backoff_seconds"),
        ({"retry": {"jitter": 1}}, "retry.jitter"),
        ({"catchup": "sometimes"}, "catchup"),  # the body's own field (catchup.mode until 11-30)
        ({"catchup": {"mode": "sometimes"}}, "catchup.mode"),
        ({"catchup": {"window_seconds": -1}}, "catchup.window_seconds"),
        ({"target": {"type": "ftp"}}, "target.type"),
        ({"target": {"type": "http", "url": "ftp://x"}}, "target.url"),
        ({"target": {"type": "http", "url": "https://u:p@x.com"}}, "target.url"),
        ({"target": {"type": "http", "url": "https://x.com", "method": "TRACE"}}, "target.method"),
        (
            {
                "target": {
                    "type": "http",
                    "url": "https://x.com",
                    "headers": {"duetime-run-id": "x"},
                }
            },
            "target.headers.duetime-run-id",
        ),
        (
            {"target": {"type": "http", "url": "https://x.com", "headers": {"X": "a\r\nB: c"}}},
            "target.headers.X",
        ),
        ({"target": {"type": "sns", "topic_arn": "arn:aws:sqs:x"}}, "target.topic_arn"),
        ({"target": {"type": "handler", "name": "not a name"}}, "target.name"),
        ({"target": {"type": "sqs", "queue_url": "https://q", "extra": 1}}, "target.extra"),
        ({"schedule": {"delay_seconds": 1, "cron": "* * * * *"}}, "schedule"),
    ],
)
def test_given_an_invalid_field_then_validation_names_it(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec(body(**changes))
    assert caught.value.field == field


@pytest.mark.parametrize("missing", ["schedule", "target"])
def test_given_a_missing_required_field_then_it_is_named(missing: str) -> None:
    raw = dict(VALID)
    del raw[missing]
    with pytest.raises(ValidationError) as caught:
        parse_job_spec(raw)
    assert caught.value.field == missing


def test_given_a_body_that_is_not_an_object_then_it_is_rejected() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec(["schedule"])
    assert caught.value.field == "body"


def test_given_a_payload_over_64_kib_then_it_is_too_large() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        parse_job_spec(body(payload="x" * 65_536))
    assert caught.value.field == "payload"
    assert parse_job_spec(body(payload="x" * 60_000)).payload == "x" * 60_000


def job(schedule: dict[str, Any], status: JobStatus = JobStatus.SCHEDULED) -> Job:
    return Job("t", "j1", parse_job_spec(body(schedule=schedule)), status, 0, 0)


RECURRING = {"rate_seconds": 60}


def test_given_a_recurring_job_then_pause_resume_bump_the_generation() -> None:
    paused = job(RECURRING).transition(JobStatus.PAUSED, 5)
    assert (paused.status, paused.generation, paused.updated_ms) == (JobStatus.PAUSED, 1, 5)
    resumed = paused.transition(JobStatus.SCHEDULED, 6)
    assert (resumed.status, resumed.generation) == (JobStatus.SCHEDULED, 2)


def test_given_a_cancelled_job_then_cancel_again_is_idempotent_and_resume_is_illegal() -> None:
    cancelled = job(RECURRING).transition(JobStatus.CANCELLED, 5)
    assert cancelled.transition(JobStatus.CANCELLED, 6) is cancelled
    with pytest.raises(IllegalTransition):
        cancelled.transition(JobStatus.SCHEDULED, 7)


def test_given_a_one_off_job_then_it_cannot_be_paused() -> None:
    with pytest.raises(IllegalTransition):
        job({"delay_seconds": 5}).transition(JobStatus.PAUSED, 1)


def test_given_a_scheduled_job_then_resume_is_idempotent() -> None:
    # The service arms it again: a resume whose dispatch failed is retried this way.
    scheduled = job(RECURRING)
    assert scheduled.transition(JobStatus.SCHEDULED, 1) is scheduled


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"description": "d" * 1025}, "description", "at most 1024 chars"),
        ({"tags": {"team": "v" * 257}}, "tags.team", "at most 256 chars"),
        ({"name": "n" * 129}, "name", "at most 128 chars"),
    ],
)
def test_a_text_too_long_is_refused_with_its_limit_in_characters(
    changes: dict[str, Any], field: str, says: str
) -> None:
    # (An outside contract audit, round eight: two messages stopped at the number.)
    with pytest.raises(ValidationError) as refused:
        parse_job_spec(body(**changes))
    assert refused.value.field == field
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("field", "header"),
    [("idempotency_key", "Idempotency-Key"), ("etag", "If-Match"), ("ETag", "If-Match")],
)
def test_a_body_field_a_header_carries_is_refused_naming_the_header(
    field: str, header: str
) -> None:
    # (Contract audits: `etag` was answered "did you mean tags?".)
    with pytest.raises(ValidationError) as refused:
        parse_job_spec(body(**{field: "x"}))
    assert refused.value.field == field
    assert str(refused.value).endswith(f"unknown field; send it as the {header} header")
