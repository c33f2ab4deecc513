"""The API's pure parts: JSON views, request parsing, error statuses and quotas."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import pytest

from duetime.api.app import (
    Unauthorized,
    json_body,
    status_of,
    tenant_from_event,
)
from duetime.api.params import parse_limit
from duetime.api.quotas import QuotaExceeded, TenantLimiter
from duetime.api.views import job_json, run_json
from duetime.domain.errors import (
    IdempotencyConflict,
    IllegalTransition,
    NotFound,
    PayloadTooLarge,
    ValidationError,
)
from duetime.domain.jobs import Job, JobStatus, parse_job_spec
from duetime.domain.runs import Attempt, Run, RunStatus
from duetime.domain.timeutil import to_ms
from duetime.services.jobs import JobView
from duetime.settings import ApiSettings, QuotaEnv, Quotas

NOW = to_ms(datetime(2026, 11, 21, 10, 0, 5, tzinfo=UTC))
TARGET = {"type": "handler", "name": "test.record"}


def job(schedule: dict[str, Any], status: JobStatus = JobStatus.SCHEDULED, **kw: Any) -> Job:
    spec = parse_job_spec({"schedule": schedule, "target": TARGET})
    return Job(
        tenant=kw.pop("tenant", "t"),
        id=kw.pop("id", "01KAAAAAAAAAAAAAAAAAAAAAAA"),
        spec=spec,
        status=status,
        created_ms=NOW,
        updated_ms=NOW,
        next_due_ms=kw.pop("next_due_ms", NOW + 60_000),
    )


def run(status: RunStatus, *attempts: Attempt) -> Run:
    return Run("t", "J", NOW, status, attempt=len(attempts), attempts=attempts)


# --- views ---------------------------------------------------------------------------------


def test_a_scheduled_one_off_shows_its_instant_until_it_has_finished() -> None:
    one_off = job({"delay_seconds": 60})
    assert job_json(JobView(one_off, JobStatus.SCHEDULED, None), NOW + 120_000)["next_run_at"] == (
        "2026-11-21T10:01:05.000Z"
    )
    done = job_json(JobView(one_off, JobStatus.SUCCEEDED, None), NOW + 120_000)
    assert (done["status"], done["next_run_at"]) == ("succeeded", None)


def test_a_recurring_job_shows_its_next_occurrence_from_now() -> None:
    rate = job({"rate_seconds": 60})  # occurrences at created + 60 s, + 120 s, ...
    view = JobView(rate, JobStatus.SCHEDULED, None)
    assert job_json(view, NOW + 60_000)["next_run_at"] == "2026-11-21T10:01:05.000Z"
    assert job_json(view, NOW + 60_001)["next_run_at"] == "2026-11-21T10:02:05.000Z"
    paused = JobView(replace(rate, status=JobStatus.PAUSED), JobStatus.PAUSED, None)
    assert job_json(paused, NOW)["next_run_at"] is None


def test_a_recurring_job_past_its_end_has_no_next_run() -> None:
    ending = job({"rate_seconds": 60, "end_at": "2026-11-21T10:02:00Z"})
    assert (
        job_json(JobView(ending, JobStatus.SCHEDULED, None), NOW + 3_600_000)["next_run_at"] is None
    )


def test_a_completed_job_shows_its_occurrences_still_to_come() -> None:
    # Its last occurrences are handed over up to two minutes before they are due: the job
    # reads `completed`, and its next occurrence is still ahead (found by a new user's walk).
    ending = job({"rate_seconds": 60, "end_at": "2026-11-21T10:03:00Z"}, JobStatus.COMPLETED)
    view = JobView(ending, JobStatus.COMPLETED, None)
    assert job_json(view, NOW)["next_run_at"] == "2026-11-21T10:01:05.000Z"
    assert job_json(view, NOW + 60_001)["next_run_at"] == "2026-11-21T10:02:05.000Z"
    assert job_json(view, NOW + 120_001)["next_run_at"] is None


def test_job_json_has_every_field_once() -> None:
    body = job_json(JobView(job({"at": "2026-11-21T12:00:00Z"}), JobStatus.SCHEDULED, None), NOW)
    assert list(body) == [
        "id",
        "name",
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
        "description",
        "tags",
        "status",
        "version",
        "next_run_at",
        "created_at",
        "updated_at",
        "last_run",
    ]


def test_a_retrying_run_has_not_finished_though_its_last_attempt_has() -> None:
    first = Attempt(1, NOW + 5, 5, NOW + 50, "HTTP 503")
    retrying = run_json(run(RunStatus.RETRYING, first))
    assert retrying == {
        "run_id": f"J-{NOW}",
        "scheduled_for": "2026-11-21T10:00:05.000Z",
        "due_at": "2026-11-21T10:00:05.000Z",
        "status": "retrying",
        "attempts": 1,
        "started_at": "2026-11-21T10:00:05.005Z",
        "finished_at": None,
        "lateness_ms": 5,
        "early_wait_ms": None,  # an attempt recorded without it
        "error": "HTTP 503",
    }
    second = Attempt(2, NOW + 2000, 2000, NOW + 2100)
    succeeded = run_json(run(RunStatus.SUCCEEDED, first, second))
    assert (succeeded["attempts"], succeeded["finished_at"], succeeded["error"]) == (
        2,
        "2026-11-21T10:00:07.100Z",
        None,
    )
    assert succeeded["lateness_ms"] == 5  # the first attempt's


# --- request parsing -------------------------------------------------------------------------


def claims_event(claims: object) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims}}}}


def test_the_tenant_is_the_configured_claim() -> None:
    event = claims_event({"sub": "user", "org": "acme"})
    assert tenant_from_event(event, "sub") == "user"
    assert tenant_from_event(event, "org") == "acme"


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"requestContext": None},
        {"requestContext": {"authorizer": {"lambda": {"sub": "x"}}}},
        claims_event(None),
        claims_event({"sub": ""}),
        claims_event({"sub": 42}),
        claims_event({"sub": "a\nb"}),
        claims_event({"sub": "x" * 257}),
    ],
)
def test_no_usable_tenant_claim_is_unauthorized(event: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        tenant_from_event(event, "sub")


@pytest.mark.parametrize("rendered", ["[acme corp]", "[acme]", "[]"])
def test_a_tenant_claim_rendered_from_an_array_is_unauthorized(rendered: str) -> None:
    # Found by an outside audit: API Gateway renders an array claim as `[a b]`, so the arrays
    # ["acme", "corp"] and ["acme corp"] and the string "[acme corp]" were one tenant.
    with pytest.raises(Unauthorized, match="one string"):
        tenant_from_event(claims_event({"org": rendered}), "org")
    assert tenant_from_event(claims_event({"org": "acme [corp]"}), "org") == "acme [corp]"


def test_json_body_reads_plain_and_base64_bodies() -> None:
    assert json_body({"body": '{"a": [1, 2.5]}'}) == {"a": [1, 2.5]}
    assert json_body({"body": "eyJhIjogMX0=", "isBase64Encoded": True}) == {"a": 1}


@pytest.mark.parametrize(
    "body",
    [
        "{",
        "NaN",
        "-Infinity",
        "1e400",
        '{"payload": 1e-400}',  # stored as 0.0 without a word (found by a contract audit)
        "-2.5E-999",
        "9" * 5000,
        "[" * 65 + "]" * 65,
        '{"a": "\\ud800"}',
        '{"\\udfff": 1}',
        # An integer no double holds: stored and answered back, read as Infinity by most
        # clients (a contract audit, round three).
        '{"payload": 1' + "0" * 400 + "}",
        "[-1" + "0" * 309 + "]",
    ],
)
def test_json_body_refuses_what_is_not_plain_json(body: str) -> None:
    with pytest.raises(ValidationError) as raised:
        json_body({"body": body})
    assert raised.value.field == "body"
    assert "sys." not in raised.value.message  # (Python's hint for 4,300 digits)


def test_json_body_takes_an_integer_a_double_holds() -> None:
    assert json_body({"body": "[1" + "0" * 308 + "]"}) == [10**308]


def test_json_body_keeps_zeros_and_the_smallest_doubles() -> None:
    assert json_body({"body": "[0, 0.0, -0.0, 0e5, 5e-324, 1e-300]"}) == [
        0,
        0,
        0,
        0,
        5e-324,
        1e-300,
    ]


def test_json_body_accepts_64_levels() -> None:
    assert json_body({"body": "[" * 64 + "]" * 64}) is not None


@pytest.mark.parametrize(
    ("raw", "limit"), [(None, 50), ("1", 1), ("100", 100), ("007", 7), ("0" * 4_400 + "7", 7)]
)
def test_limit(raw: str | None, limit: int) -> None:
    assert parse_limit(raw) == limit


@pytest.mark.parametrize("raw", ["0", "101", "", " 5", "٣", "1.0", "9" * 4_301, "0" * 5_000])
def test_bad_limit(raw: str) -> None:
    with pytest.raises(ValidationError):
        parse_limit(raw)


def test_error_statuses() -> None:
    assert status_of(PayloadTooLarge("payload", "big")) == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert status_of(ValidationError("x", "bad")) == HTTPStatus.BAD_REQUEST
    assert status_of(NotFound("gone")) == HTTPStatus.NOT_FOUND
    assert status_of(IllegalTransition("j", "paused", "run")) == HTTPStatus.CONFLICT
    assert status_of(IdempotencyConflict("k")) == HTTPStatus.CONFLICT
    assert status_of(QuotaExceeded("slow down", 1)) == HTTPStatus.TOO_MANY_REQUESTS
    assert status_of(Unauthorized("who")) == HTTPStatus.UNAUTHORIZED


# --- quotas ----------------------------------------------------------------------------------


def test_quotas_from_env() -> None:
    assert Quotas.from_env({}) == Quotas()
    env = {
        QuotaEnv.MIN_RATE_SECONDS: "30",
        QuotaEnv.SUBMISSIONS_PER_SECOND: "2.5",
        QuotaEnv.SUBMISSION_BURST: "5",
        QuotaEnv.MAX_ACTIVE_RECURRING_JOBS: "10",
        QuotaEnv.REQUESTS_PER_SECOND: "7.5",
        QuotaEnv.REQUEST_BURST: "15",
    }
    assert Quotas.from_env(env) == Quotas(30, 2.5, 5, 10, 7.5, 15)
    assert ApiSettings.from_env({"DUETIME_TENANT_CLAIM": "org"}).tenant_claim == "org"
    assert ApiSettings.from_env({}).tenant_claim == "sub"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (QuotaEnv.MIN_RATE_SECONDS, "0"),
        (QuotaEnv.MIN_RATE_SECONDS, "1.5"),
        (QuotaEnv.SUBMISSIONS_PER_SECOND, "nan"),
        (QuotaEnv.SUBMISSIONS_PER_SECOND, "-1"),
        (QuotaEnv.SUBMISSION_BURST, "lots"),
        (QuotaEnv.MAX_ACTIVE_RECURRING_JOBS, "0"),
    ],
)
def test_a_malformed_quota_fails_loudly(name: str, value: str) -> None:
    with pytest.raises(RuntimeError, match=name):
        Quotas.from_env({name: value})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_token_bucket_allows_a_burst_then_the_rate() -> None:
    clock = FakeClock()
    limiter = TenantLimiter(rate=2, burst=3, clock=clock)
    for _ in range(3):
        limiter.take("a")
    with pytest.raises(QuotaExceeded) as raised:
        limiter.take("a")
    assert raised.value.retry_after_seconds == 1  # 0.5 s, rounded up
    limiter.take("b")  # per tenant
    clock.now += 0.5
    limiter.take("a")
    with pytest.raises(QuotaExceeded):
        limiter.take("a")
    clock.now += 60  # refills up to the burst, no more
    for _ in range(3):
        limiter.take("a")
    with pytest.raises(QuotaExceeded):
        limiter.take("a")


def test_the_limiter_forgets_the_least_recently_used_tenants() -> None:
    clock = FakeClock()
    limiter = TenantLimiter(rate=0.001, burst=1, clock=clock, max_tenants=2)
    limiter.take("a")
    limiter.take("b")
    limiter.take("c")  # "a" is forgotten: it starts again with a full bucket
    limiter.take("a")
    with pytest.raises(QuotaExceeded) as raised:
        limiter.take("c")
    assert raised.value.retry_after_seconds == 1000


def test_the_limiter_keeps_a_tenant_s_debt_while_other_tenants_come_and_go() -> None:
    # The least recently used bucket was forgotten whatever it held: 10,000 other tenants'
    # requests gave a tenant owing hours of submissions (a backfill's) a full burst again.
    clock = FakeClock()
    limiter = TenantLimiter(rate=1, burst=5, clock=clock, max_tenants=3)
    limiter.take("debtor")
    limiter.charge("debtor", 1000)
    for n in range(50):
        clock.now += 1
        limiter.take(f"other-{n}")  # each full again a second on: forgettable

    with pytest.raises(QuotaExceeded) as raised:
        limiter.take("debtor")
    assert raised.value.retry_after_seconds > 900
