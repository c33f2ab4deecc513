"""The end an attempt whose worker died is given, and what it must not disturb (a review of
the session's own change, 2026-11-30): capping every outcome at the lease's end freed an
overlap gate while the abandoned attempt's retry still waited (the retry was then deleted as
a late copy, the run `retrying` for good), and rewrote a live worker's own late outcome. The
cap is for a run that ends with its abandoned attempt, nothing else."""

from __future__ import annotations

import contextlib
from typing import Any

from duetime.domain.invocation import Invocation
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.runs import RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_dependencies import T0, TENANT, Engine


class Crash(Exception):
    """The worker dies mid-attempt: no outcome is recorded."""


class Scripted(Engine):
    def __init__(self) -> None:
        super().__init__()
        self.crash_first = True
        self.during_second: Any = None
        self.target_seconds = 0

    def execute(self, target: Target, invocation: Invocation) -> None:
        self.ran.append(invocation)
        self.now += self.target_seconds * 1000
        if self.crash_first:
            self.crash_first = False
            raise Crash()
        if self.during_second is not None:
            hook, self.during_second = self.during_second, None
            hook(invocation)


def one_attempt_at_t0(engine: Scripted, *, timeout_seconds: int) -> str:
    """A one-off HTTP job at T0 with one attempt: its id."""
    body = {
        "schedule": {"at": rfc3339_ms(T0)},
        "target": {"type": "http", "url": "https://example.com/hook"},
        "timeout_seconds": timeout_seconds,
        "retry": {"max_attempts": 1},
    }
    return engine.service.create(TENANT, parse_job_spec(body)).id


def test_an_abandoned_attempt_s_retry_keeps_the_overlap_gate_until_it_runs() -> None:
    engine = Scripted()
    body = {
        "schedule": {"rate_seconds": 86_400},
        "target": {"type": "http", "url": "https://example.com/hook"},
        "timeout_seconds": 10,
        "overlap": "skip",
        "retry": {"max_attempts": 3, "backoff_seconds": 60},
    }
    job = engine.service.create(TENANT, parse_job_spec(body)).id
    first = engine.service.run_now(TENANT, job)
    (delivery,) = engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    with contextlib.suppress(Crash):
        engine.executor.handle(delivery)
    # Its message back 30 minutes later: the attempt is found abandoned, its retry sent
    engine.now += 30 * 60_000
    (again,) = engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    assert engine.executor.handle(again).disposition == "done"
    engine.queue.delete([again])
    retrying = engine.runs.get(job, first)
    assert retrying is not None
    assert retrying.status == RunStatus.RETRYING
    assert retrying.finished_ms == engine.now  # found now: the gate counts from here

    second = engine.service.run_now(TENANT, job)  # while the retry waits for its backoff
    engine.work()
    for _ in range(10):
        engine.now += 600_000
        engine.work()

    assert [i.scheduled_ms for i in engine.ran] == [first, first]  # the retry ran; skipped:
    skipped = engine.runs.get(job, second)
    assert skipped is not None
    assert skipped.status == RunStatus.SKIPPED
    done = engine.runs.get(job, first)
    assert done is not None
    assert (done.status, done.attempt) == (RunStatus.SUCCEEDED, 2)


def test_a_live_worker_s_late_outcome_is_recorded_as_it_came() -> None:
    # An AWS target is bounded by botocore's timeouts, not the job's: it may return after the
    # lease's end, and its worker's record says when.
    engine = Scripted()
    engine.crash_first = False
    engine.target_seconds = 90
    job = one_attempt_at_t0(engine, timeout_seconds=1)
    engine.work()

    run = engine.runs.get(job, T0)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    attempt = run.attempts[-1]
    assert attempt.finished_ms is not None
    assert attempt.finished_ms - attempt.started_ms == 90_000


def test_a_run_that_ends_with_its_abandoned_attempt_ends_by_the_lease_s_end() -> None:
    engine = Scripted()
    job = one_attempt_at_t0(engine, timeout_seconds=10)
    (delivery,) = engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    with contextlib.suppress(Crash):
        engine.executor.handle(delivery)
    lease = engine.runs.get(job, T0).lease  # type: ignore[union-attr]
    assert lease is not None
    engine.now += 30 * 60_000
    (again,) = engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    engine.executor.handle(again)

    run = engine.runs.get(job, T0)
    assert run is not None
    assert run.status == RunStatus.FAILED
    assert run.finished_ms == lease.until_ms  # not 30 minutes on, when it was found
