"""Clock skew: workers whose clocks are off by seconds, while SQS and the store keep real time.

"Real time" here is the `engine` fixture's time-machine clock, which moto's SQS delays and
visibility timeouts follow. Each worker is a RunExecutor of its own whose clock reads real time
plus a skew (and whose short waits move real time forward, so nothing sleeps). What the tests
show, and docs/schedules.md ("Clocks") states:

- a worker never starts a run before *its own* clock reads the due instant, so one that is
  behind starts late by its lag and one that is ahead starts early by at most its lead (at
  most a second, SQS's granularity, when the message arrives on time); lateness is measured
  with the worker's clock, so the recorded figure is off by the skew;
- a dead worker's run is reclaimed when SQS makes its message visible again, whatever the
  clocks say;
- a *duplicate* message of a run (another SQS message for the same run, e.g. a sweeper page
  re-sent after a crash) compares the holder's lease deadline, written with the holder's
  clock, with its own clock; the claim rule allows CLOCK_SKEW_ALLOWANCE_MS (two minutes) of
  disagreement on top of the lease margin, so workers 60 s apart never both execute a run.
  (Before that allowance, 30 s was enough for the duplicate to take a live lease.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Job, Priority, Runtime
from duetime.domain.messages import MessageAuth, run_message
from duetime.domain.runs import CLOCK_SKEW_ALLOWANCE_MS, Run, RunStatus
from duetime.ports import Delivery
from duetime.services.dropped import ABANDONED_ERROR
from duetime.services.execute import LEASE_MARGIN_MS, RunExecutor
from duetime.services.queue_worker import QueueWorker
from duetime.services.results import Disposition, Result
from duetime.targets import DEFAULT_HANDLERS, Invocation, TargetExecutor
from tests.integration.conftest import Engine
from tests.waiting import wait_for

SECOND = 1_000
SKEWS = (-30 * SECOND, -5 * SECOND, 5 * SECOND, 30 * SECOND)
TIMEOUT_SECONDS = 10  # the jobs' target timeout: a holder's lease is 10 s + LEASE_MARGIN_MS
VISIBILITY_SECONDS = 60  # as the Fargate worker receives
POLL_STEP_SECONDS = 0.5  # how far real time moves between two empty receives


class WorkerCrash(BaseException):
    """The worker process dies mid-run: nothing in the worker catches a BaseException."""


@dataclass
class Probe:
    """The target: records the real instant each execution starts; can crash the first one or
    let something happen elsewhere while the first one runs."""

    starts: list[int] = field(default_factory=list)
    crash_first: bool = False
    while_first_runs: Callable[[], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, invocation: Invocation) -> None:
        with self.lock:
            self.starts.append(wall_ms())
            first = len(self.starts) == 1
        if first and self.crash_first:
            raise WorkerCrash
        if first and self.while_first_runs is not None:
            self.while_first_runs()


PROBE = Probe()
DEFAULT_HANDLERS.register("test.skew.probe", PROBE)


@pytest.fixture(autouse=True)
def probe() -> Probe:
    PROBE.starts.clear()
    PROBE.crash_first = False
    PROBE.while_first_runs = None
    return PROBE


def skewed_worker(engine: Engine, skew_ms: int) -> RunExecutor:
    """A worker whose clock is `skew_ms` off real time; the store and SQS are shared."""
    parts = engine.parts
    return RunExecutor(
        parts.jobs,
        parts.runs,
        parts.queue,
        TargetExecutor(allow_private=True),
        parts.settings,
        clock=lambda: wall_ms() + skew_ms,
        auth=MessageAuth.from_text(parts.settings.run_signing_key),
        sleep=engine.advance,
    )


def submit(engine: Engine, delay_seconds: int) -> Job:
    job_id = engine.submit(
        {
            "schedule": {"delay_seconds": delay_seconds},
            "runtime": "fargate",
            "timeout_seconds": TIMEOUT_SECONDS,
            "target": {"type": "handler", "name": "test.skew.probe"},
        }
    )
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    return job


def due_of(job: Job) -> int:
    assert job.next_due_ms is not None
    return job.next_due_ms


def receive(engine: Engine, count: int = 1) -> list[Delivery]:
    return engine.parts.queue.receive(
        Runtime.FARGATE, Priority.NORMAL, count, 0, VISIBILITY_SECONDS
    )


def next_delivery(engine: Engine, within_seconds: float = 120) -> Delivery:
    """Poll as a worker does while real time goes by, until a message is visible."""
    deadline = wall_ms() + within_seconds * SECOND
    while wall_ms() < deadline:
        got = receive(engine)
        if got:
            return got[0]
        engine.advance(POLL_STEP_SECONDS)
    raise AssertionError(f"no message within {within_seconds} s")


def work_until_started(engine: Engine, executor: RunExecutor) -> int:
    """Receive and handle deliveries (a put-back comes round again) until the target starts."""
    while not PROBE.starts:
        executor.handle(next_delivery(engine))
    return PROBE.starts[0]


def run_of(engine: Engine, job: Job) -> Run:
    run = engine.parts.runs.get(job.id, due_of(job))
    assert run is not None
    return run


# --- (a) when a skewed worker starts a run ------------------------------------------------------


@pytest.mark.parametrize("skew_ms", SKEWS)
def test_given_skewed_worker_when_message_arrives_on_time_then_starts_by_its_own_clock(
    engine: Engine, skew_ms: int
) -> None:
    # Given a run due in 20 s, sent to SQS with DelaySeconds by the (correct) API clock (which
    # stands: only the polls and the worker's waits move it, not a loaded machine's own time)
    engine.stand_at(wall_ms())
    job = submit(engine, delay_seconds=20)
    due = due_of(job)

    # When a worker whose clock is skew_ms off receives and handles it
    started = work_until_started(engine, skewed_worker(engine, skew_ms))

    # Then it starts when its own clock reads the due instant, or when SQS releases the message
    # (at most a second early), whichever is later: ahead, it is early by at most 1 s; behind,
    # it is late by its lag
    assert started + skew_ms >= due
    assert started >= due - min(max(skew_ms, 0), SECOND)
    assert started <= due + max(-skew_ms, 0) + SECOND
    # And the lateness it records is measured with its own clock: off by the skew
    recorded = run_of(engine, job).lateness_ms
    assert recorded is not None
    assert abs(recorded - max(0, started + skew_ms - due)) < SECOND


@pytest.mark.parametrize("skew_ms", [-30 * SECOND, 30 * SECOND])
def test_given_skewed_worker_when_message_arrives_early_then_early_by_at_most_its_skew(
    engine: Engine, skew_ms: int
) -> None:
    # Given a run due in 10 minutes whose message reaches the queue 40 s before it is due
    # (its sender's clock was ahead): more than 2 s early, so the worker puts it back
    job = submit(engine, delay_seconds=600)
    due = due_of(job)
    engine.advance_to(due - 40 * SECOND)
    engine.parts.queue.send([(run_message(job, due), 0)])

    # When a worker whose clock is skew_ms off handles it until it runs
    started = work_until_started(engine, skewed_worker(engine, skew_ms))

    # Then it starts when its own clock reads the due instant: early by its lead, late by its
    # lag, never more (plus the polling step)
    assert started + skew_ms >= due
    assert started <= due - skew_ms + SECOND


# --- (b) leases and reclaiming ------------------------------------------------------------------


# (holder, duplicate): within the lease margin either way, then beyond it (the allowance).
PAIRS = [
    (-5 * SECOND, 5 * SECOND),
    (5 * SECOND, -5 * SECOND),
    (-30 * SECOND, -5 * SECOND),
    (30 * SECOND, -30 * SECOND),
    (-5 * SECOND, 30 * SECOND),
    (-30 * SECOND, 30 * SECOND),
]


@pytest.mark.parametrize(("holder_ms", "duplicate_ms"), PAIRS)
def test_given_two_skewed_workers_when_a_duplicate_arrives_mid_run_then_target_runs_once(
    engine: Engine, holder_ms: int, duplicate_ms: int
) -> None:
    # Given a run and a second SQS message for it (a sweeper page re-sent after a crash),
    # due by every worker's clock
    job = submit(engine, delay_seconds=0)
    engine.parts.queue.send([(run_message(job, due_of(job)), 0)])
    engine.advance(31)
    first, second = receive(engine, 1)[0], receive(engine, 1)[0]
    assert first.message_id != second.message_id
    holder, duplicate = skewed_worker(engine, holder_ms), skewed_worker(engine, duplicate_ms)

    # When the second message reaches another worker 9 s into the holder's 10 s execution
    seen: list[Result] = []

    def duplicate_arrives() -> None:
        engine.advance(TIMEOUT_SECONDS - 1)
        seen.append(duplicate.handle(second))

    PROBE.while_first_runs = duplicate_arrives
    result = holder.handle(first)

    # Then the target ran once: the duplicate found the lease live and comes back later
    assert result.disposition == Disposition.DONE
    assert len(PROBE.starts) == 1
    assert seen[0].disposition == Disposition.RETRY_LATER
    run = run_of(engine, job)
    assert run.status == RunStatus.SUCCEEDED
    assert len(run.attempts) == 1


CRASHES = [
    pytest.param(-30 * SECOND, 30 * SECOND, id="behind-dies-ahead-reclaims"),
    pytest.param(30 * SECOND, -30 * SECOND, id="ahead-dies-behind-reclaims"),
]


@pytest.mark.parametrize(("dead_ms", "reclaimer_ms"), CRASHES)
def test_given_worker_dies_mid_run_then_its_attempt_is_abandoned_after_its_lease_and_retried(
    engine: Engine, dead_ms: int, reclaimer_ms: int
) -> None:
    # Given a worker with a skewed clock that claims a run and dies while executing it
    job = submit(engine, delay_seconds=0)
    engine.advance(31)  # due by every clock here
    PROBE.crash_first = True
    delivery = receive(engine)[0]
    with pytest.raises(WorkerCrash):
        skewed_worker(engine, dead_ms).handle(delivery)
    died = PROBE.starts[0]
    held = run_of(engine, job)
    assert held.status == RunStatus.RUNNING
    assert held.lease is not None  # its deadline was written with the dead worker's clock
    lease_ms = (TIMEOUT_SECONDS * SECOND) + LEASE_MARGIN_MS
    assert abs(held.lease.until_ms - (died + dead_ms + lease_ms)) < SECOND

    # When another worker, skewed the other way, handles what SQS hands out again
    engine.advance(VISIBILITY_SECONDS - 1)
    assert receive(engine) == []  # SQS still holds it for the dead worker
    reclaimer = skewed_worker(engine, reclaimer_ms)
    again = next_delivery(engine)
    assert (again.message_id, again.receive_count) == (
        delivery.message_id,
        delivery.receive_count + 1,
    )
    # The redelivery alone does not take the run: its lease, by the run record, is live
    # (judged with the clock-skew allowance), so the message comes back when it has passed
    assert reclaimer.handle(again).disposition == Disposition.RETRY_LATER
    assert len(PROBE.starts) == 1
    while len(PROBE.starts) < 2:
        reclaimer.handle(next_delivery(engine, within_seconds=600))

    # Then the dead attempt counts as a failed one, and attempt 2 ran once, after the lease
    reclaimed_after = PROBE.starts[1] - died
    assert reclaimed_after >= lease_ms + CLOCK_SKEW_ALLOWANCE_MS - abs(dead_ms - reclaimer_ms)
    assert reclaimed_after <= lease_ms + CLOCK_SKEW_ALLOWANCE_MS + abs(dead_ms - reclaimer_ms) + (
        10 * SECOND
    )
    run = run_of(engine, job)
    assert run.status == RunStatus.SUCCEEDED
    assert [(a.number, a.error) for a in run.attempts] == [(1, ABANDONED_ERROR), (2, None)]


def test_given_two_fargate_workers_with_opposite_skews_when_duplicates_then_each_run_once(
    engine: Engine,
) -> None:
    # Given three runs, each sent twice, due by both workers' clocks
    jobs = [submit(engine, delay_seconds=0) for _ in range(3)]
    engine.parts.queue.send([(run_message(job, due_of(job)), 0) for job in jobs])
    engine.advance(6)
    workers = [
        QueueWorker(
            engine.parts.queue,
            skewed_worker(engine, skew_ms),
            Runtime.FARGATE,
            priorities=(Priority.NORMAL,),
            concurrency=2,
            wait_seconds=1,
            visibility_seconds=VISIBILITY_SECONDS,
            heartbeat_seconds=1,
            stop_timeout_seconds=5,
        )
        for skew_ms in (-5 * SECOND, 5 * SECOND)
    ]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]

    # When two Fargate workers, 5 s behind and 5 s ahead, drain the queue together
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: all(run_of_or_none(engine, job) == RunStatus.SUCCEEDED for job in jobs))
        wait_for(lambda: sum(w.processed for w in workers) >= 6)
    finally:
        for w in workers:
            w.stop()
        for thread in threads:
            thread.join(timeout=15)

    assert not any(t.is_alive() for t in threads), "a worker did not stop"
    # Then each run's target ran once
    assert len(PROBE.starts) == 3
    for job in jobs:
        assert len(run_of(engine, job).attempts) == 1


def run_of_or_none(engine: Engine, job: Job) -> RunStatus | None:
    run = engine.parts.runs.get(job.id, due_of(job))
    return None if run is None else run.status
