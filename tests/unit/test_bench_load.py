"""The bench's load scenario without a benchmark (scripts/bench_load.py): its bodies are
accepted whatever the clock's phase, and its clients, against the local gateway with a stub
API, count accepted jobs, statuses and connection errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from duetime.domain.timeutil import rfc3339_ms
from duetime.local.gateway import Gateway
from duetime.local.keys import issue_token
from scripts.bench_load import due_ms, load_body, run_load
from tests.unit.test_bench_plans import MINUTE, PHASES_MS, Service

KEY = b"k" * 48


@pytest.mark.parametrize("phase", PHASES_MS)
def test_given_any_clock_phase_then_every_load_body_is_accepted_due_after_its_delay(
    phase: int,
) -> None:
    # Given the job service's clock anywhere in the minute (10 s before a boundary included)
    now = MINUTE + phase
    service = Service(now)

    # When the first bodies of a client are submitted, each a little later
    jobs = [service.submit_at(now + 137 * i, load_body(i)) for i in range(6)]

    # Then each is accepted, due 1 to 3 s after the server received it
    delays = [j.next_due_ms - (now + 137 * i) for i, j in enumerate(jobs)]
    assert delays == [1000, 2000, 3000, 1000, 2000, 3000]


def test_given_an_api_answer_then_due_ms_is_its_next_run_at() -> None:
    ms = MINUTE + 59_999
    assert due_ms({"id": "j", "next_run_at": rfc3339_ms(ms)}) == ms


@dataclass
class StubJobsApi:
    """Answers POST /jobs with 201 and a job (or `status`), checking each body is a load body."""

    status: int = 201
    count: int = 0
    # When set: answer a `created_at` too, each job due at its delay after it, but for the
    # job numbers in `shifted`, due 1 ms later (a scheduler that moved the instant).
    created_ms: int | None = None
    shifted: frozenset[int] = frozenset()
    tenants: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        body = json.loads(event["body"])
        assert body["schedule"]["delay_seconds"] in (1, 2, 3)
        with self.lock:
            self.count += 1
            n = self.count
            self.tenants.add(event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"])
        job = {"id": f"job-{n}", "next_run_at": rfc3339_ms(MINUTE + n)}
        if self.created_ms is not None:
            due = self.created_ms + body["schedule"]["delay_seconds"] * 1000
            job["created_at"] = rfc3339_ms(self.created_ms)
            job["next_run_at"] = rfc3339_ms(due + (n in self.shifted))
        return {"statusCode": self.status, "body": json.dumps(job)}


@pytest.fixture
def api() -> StubJobsApi:
    return StubJobsApi()


@pytest.fixture
def gateway(api: StubJobsApi) -> Iterator[Gateway]:
    with Gateway(api, KEY, port=0) as running:
        yield running


def tokens(n: int) -> list[tuple[str, str]]:
    return [(f"load-{k}", issue_token(f"load-{k}", 60, KEY)) for k in range(n)]


def test_given_16_clients_then_every_answer_is_counted_and_none_is_a_connection_error(
    gateway: Gateway, api: StubJobsApi
) -> None:
    result = run_load(gateway.url, tokens(16), seconds=1.0)

    assert result.connection_errors == []
    assert api.tenants == {f"load-{k}" for k in range(16)}
    assert len(result.accepted) == api.count == result.statuses[201] > 16
    assert len(result.latencies_ms) == api.count
    assert sorted(due for _, due in result.accepted) == [
        MINUTE + n for n in range(1, api.count + 1)
    ]
    assert set(result.tenant_of.values()) == api.tenants
    assert 0.9 < result.seconds < 10


def test_given_refusals_then_they_are_counted_by_status_and_nothing_is_accepted(
    gateway: Gateway, api: StubJobsApi
) -> None:
    api.status = 429

    result = run_load(gateway.url, tokens(4), seconds=0.3)

    assert result.accepted == []
    assert result.statuses[429] == api.count > 0
    assert result.connection_errors == []


def test_given_a_server_that_is_gone_then_each_failed_request_is_a_connection_error() -> None:
    gateway = Gateway(StubJobsApi(), KEY, port=0)
    url = gateway.url
    gateway.stop()  # nothing listens on that port any more: connections are refused

    result = run_load(url, tokens(2), seconds=0.2)

    assert result.accepted == []
    assert len(result.connection_errors) >= 2
    assert all("Connection" in e for e in result.connection_errors)


def test_given_a_url_that_is_not_loopback_then_the_load_does_not_start() -> None:
    with pytest.raises(ValueError, match="loopback"):
        run_load("http://example.com:8080", tokens(1), seconds=0.1)


def test_given_an_answer_due_elsewhere_than_the_delay_asked_then_it_is_recorded(
    gateway: Gateway, api: StubJobsApi
) -> None:
    api.created_ms = MINUTE + 59_999
    api.shifted = frozenset({2})

    result = run_load(gateway.url, tokens(1), seconds=0.3)

    assert len(result.requested) == len(result.accepted) >= 2
    wrong = [(job_id, asked, got) for job_id, asked, got in result.requested if asked != got]
    asked = MINUTE + 59_999 + 2_000  # the second body's delay is 2 s
    assert wrong == [("job-2", asked, asked + 1)]
