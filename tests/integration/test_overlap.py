"""The overlap policy (`allow`, `skip`, `buffer_one`) on the in-memory twins with a hand-driven
clock: a 1-second rate and a slow `duetime.sleep` handler, the real sweeper, dispatch and
executor. The slow target advances the clock a second at a time and, meanwhile, lets other
workers take every message that became visible: occurrences that arrive while a run is still
executing meet it exactly as they would on SQS with several workers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.errors import ValidationError
from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.messages import RunMessage
from duetime.domain.overlap import Admission, Gate, Overlap
from duetime.domain.runs import Run, RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.observability import Metric
from duetime.services import overlap as overlap_service
from duetime.services.coordinator import Coordinator, InProcessLauncher
from duetime.services.execute import RunExecutor
from duetime.services.jobs import JobService
from duetime.services.sweep import Sweeper
from duetime.settings import QueueUrls, Settings, queue_key

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC))


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass
class Execution:
    scheduled_ms: int
    start_ms: int
    end_ms: int = 0


class RecordingRuns(MemoryRunStore):
    """The run twin, remembering every occurrence ever recorded `buffered`."""

    def __init__(self) -> None:
        super().__init__()
        self.ever_buffered: set[int] = set()

    def record(self, run: Run) -> Run | None:
        if run.status == RunStatus.BUFFERED:
            self.ever_buffered.add(run.scheduled_ms)
        return super().record(run)


@dataclass
class OverlapTwins:
    """The engine on the twins; `duetime.sleep` takes virtual seconds."""

    clock: Clock = field(default_factory=lambda: Clock(T0))
    executions: list[Execution] = field(default_factory=list)
    max_buffered: int = 0

    def __post_init__(self) -> None:
        queues = {
            queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}")
            for r in Runtime
            for p in Priority
        }
        self.settings = Settings("jobs", "timers", "runs", queues, timer_shards=1)
        self.jobs, self.timers = MemoryJobStore(), MemoryTimerStore(shards=1)
        self.runs = RecordingRuns()
        self.queue = MemoryQueue(self.clock)
        self.service = JobService(
            self.jobs, self.timers, self.runs, self.queue, self.settings, clock=self.clock
        )
        sweeper = Sweeper(self.jobs, self.timers, self.queue, self.settings, clock=self.clock)
        self.coordinator = Coordinator(
            self.timers, InProcessLauncher(sweeper, parallelism=1), self.settings, clock=self.clock
        )
        self.executor = RunExecutor(
            self.jobs,
            self.runs,
            self.queue,
            self,  # the target runner: see execute
            self.settings,
            clock=self.clock,
            auth=self.queue.auth,
            sleep=lambda seconds: None,
            jitter=lambda: 0.5,
        )

    def submit(self, overlap: str, seconds: int = 3, occurrences: int = 12) -> str:
        body = {
            "schedule": {"rate_seconds": 1, "end_at": rfc3339_ms(T0 + occurrences * 1000 + 500)},
            "target": {"type": "handler", "name": "duetime.sleep"},
            "payload": {"seconds": seconds},
            "overlap": overlap,
        }
        job = self.service.create("t", parse_job_spec(body))
        return job.id

    # --- the target runner: a slow handler in virtual time

    def execute(self, target: Target, invocation: Invocation) -> None:
        run = Execution(invocation.scheduled_ms, self.clock.now)
        self.executions.append(run)
        end = self.clock.now + int(invocation.payload["seconds"] * 1000)
        while self.clock.now < end:
            self.clock.now += 1000
            self.work()  # other workers, meanwhile
        run.end_ms = self.clock.now

    # --- the rest of the system

    def work(self) -> None:
        """The coordinator's tick and the workers: every visible message is handled."""
        self.coordinator.tick()
        while deliveries := self.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0):
            result = self.executor.handle(deliveries[0])
            if result.disposition == "done":
                self.queue.delete(deliveries)
            self.max_buffered = max(self.max_buffered, len(self.waiting()))

    def waiting(self) -> list[Run]:
        return [r for r in self.runs.all() if r.status == RunStatus.BUFFERED]

    def run_for(self, seconds: int) -> None:
        for _ in range(seconds):
            self.work()
            self.clock.now += 1000
        self.work()

    def statuses(self, job_id: str) -> dict[int, RunStatus]:
        page = self.service.list_runs("t", job_id, 1000, None)
        return {run.scheduled_ms: run.status for run in page.items}

    def overlapping(self) -> list[tuple[int, int]]:
        runs = sorted(self.executions, key=lambda e: e.start_ms)
        return [
            (a.scheduled_ms, b.scheduled_ms)
            for i, a in enumerate(runs)
            for b in runs[i + 1 :]
            if b.start_ms < a.end_ms
        ]


OCCURRENCES = [T0 + i * 1000 for i in range(1, 13)]  # a rate starts one period in


def test_given_allow_then_slow_runs_overlap_as_before() -> None:
    twins = OverlapTwins()
    job = twins.submit("allow")

    twins.run_for(30)

    statuses = twins.statuses(job)
    assert statuses == dict.fromkeys(OCCURRENCES, RunStatus.SUCCEEDED)
    assert twins.overlapping()  # a 3-second run every second: they overlap
    assert twins.jobs.gate("t", job) == Gate()  # allow never touches a gate


def test_given_skip_then_runs_never_overlap_and_skipped_occurrences_are_recorded() -> None:
    twins = OverlapTwins()
    job = twins.submit("skip")

    twins.run_for(30)

    statuses = twins.statuses(job)
    assert set(statuses) == set(OCCURRENCES)  # every occurrence has its record
    assert twins.overlapping() == []
    counted = Counter(statuses.values())
    assert counted[RunStatus.SKIPPED] >= 6
    assert counted[RunStatus.SUCCEEDED] == len(twins.executions) >= 3
    assert set(counted) == {RunStatus.SUCCEEDED, RunStatus.SKIPPED}
    # A skipped occurrence is one that arrived while a run was executing.
    for instant, status in statuses.items():
        busy = any(e.start_ms <= instant <= e.end_ms for e in twins.executions)
        assert (status == RunStatus.SKIPPED) == (busy and instant not in _started(twins))
    assert twins.jobs.gate("t", job).holder_ms is None  # released at the end


def test_given_buffer_one_then_at_most_one_waits_none_is_lost_and_none_overlap() -> None:
    twins = OverlapTwins()
    job = twins.submit("buffer_one")

    twins.run_for(60)

    statuses = twins.statuses(job)
    assert set(statuses) == set(OCCURRENCES)
    assert twins.overlapping() == []
    assert twins.max_buffered == 1  # one occurrence waited at a time, never two
    assert twins.runs.ever_buffered
    # None lost: every occurrence that waited ran, and started as the one before it ended.
    assert twins.runs.ever_buffered <= _started(twins)
    ends = {e.end_ms for e in twins.executions}
    for execution in twins.executions:
        if execution.scheduled_ms in twins.runs.ever_buffered:
            assert execution.start_ms in ends
    assert {statuses[s] for s in twins.runs.ever_buffered} == {RunStatus.SUCCEEDED}
    assert set(statuses.values()) == {RunStatus.SUCCEEDED, RunStatus.SKIPPED}
    assert twins.waiting() == []
    # A run that waited keeps its occurrence's due instant, and its lateness is the wait
    # (found by review: it was recorded due when it started, lateness 0).
    for execution in twins.executions:
        if execution.scheduled_ms in twins.runs.ever_buffered:
            run = twins.runs.get(job, execution.scheduled_ms)
            assert run is not None
            assert run.due_ms == execution.scheduled_ms  # no jitter
            assert run.lateness_ms == execution.start_ms - execution.scheduled_ms > 0
    assert twins.jobs.gate("t", job).holder_ms is None


def test_given_a_holder_that_died_after_its_outcome_then_its_redelivery_starts_the_buffered() -> (
    None
):
    twins = OverlapTwins()
    job = twins.submit("buffer_one", occurrences=2)
    # The worker finishing the first run dies before its release: the release is lost once
    executor_release = twins.executor._overlap.release
    lost: list[int] = []

    def dies_once(job_: Any, scheduled_ms: int) -> None:
        if not lost:
            lost.append(scheduled_ms)
            raise ConnectionError("killed")
        executor_release(job_, scheduled_ms)

    twins.executor._overlap.release = dies_once  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        twins.run_for(5)
    assert twins.statuses(job) == {T0 + 1000: RunStatus.SUCCEEDED, T0 + 2000: RunStatus.BUFFERED}

    # When the message of the first run is delivered again (its visibility ran out)
    twins.run_for(40)

    # Then the buffered occurrence ran, after the first
    assert twins.statuses(job) == dict.fromkeys(OCCURRENCES[:2], RunStatus.SUCCEEDED)
    assert twins.overlapping() == []


def test_given_a_stale_copy_of_a_failed_attempt_then_the_retry_keeps_the_gate() -> None:
    # Found by review: the copy's claim answered "done" (attempt 1 is recorded) and released
    # the gate while the run was retrying. The next occurrence then ran, and the retry, taken
    # for a late copy at the gate, was deleted: the run stayed `retrying` for good.
    twins = OverlapTwins()
    body = {
        "schedule": {"rate_seconds": 1, "end_at": rfc3339_ms(T0 + 12_500)},
        "target": {"type": "handler", "name": "duetime.sleep"},
        "payload": {"seconds": 3},
        "overlap": "skip",
        "retry": {"max_attempts": 3, "backoff_seconds": 2, "max_backoff_seconds": 2},
    }
    job = twins.service.create("t", parse_job_spec(body))
    first = OCCURRENCES[0]
    runner = twins.execute

    def failing_once(target: Target, invocation: Invocation) -> None:
        if invocation.scheduled_ms == first and invocation.attempt == 1:
            copy = RunMessage(
                "t",
                job.id,
                first,
                1,
                first,
                generation=twins.jobs.get("t", job.id).generation,  # type: ignore[union-attr]
            )
            twins.queue.send([(copy, 0)])  # SQS's own duplicate, handled once this attempt failed
            raise TargetError("the target refused it", retryable=True)
        runner(target, invocation)

    twins.execute = failing_once  # type: ignore[method-assign]

    twins.run_for(30)

    statuses = twins.statuses(job.id)
    assert statuses[first] == RunStatus.SUCCEEDED  # its retry ran
    assert twins.overlapping() == []
    assert [e.scheduled_ms for e in twins.executions].count(first) == 1  # attempt 2
    assert RunStatus.RETRYING not in statuses.values()
    assert twins.jobs.gate("t", job.id).holder_ms is None


def test_given_a_one_off_job_then_only_allow_is_accepted() -> None:
    at = {"at": "2026-11-21T10:00:00Z"}
    target = {"type": "handler", "name": "duetime.noop"}
    assert parse_job_spec({"schedule": at, "target": target, "overlap": "allow"})
    for value in ("skip", "buffer_one"):
        with pytest.raises(ValidationError) as error:
            parse_job_spec({"schedule": at, "target": target, "overlap": value})
        assert error.value.field == "overlap"
    with pytest.raises(ValidationError) as error:
        parse_job_spec({"schedule": {"rate_seconds": 5}, "target": target, "overlap": "never"})
    assert error.value.field == "overlap"
    spec = parse_job_spec({"schedule": {"rate_seconds": 5}, "target": target})
    assert spec.overlap == Overlap.ALLOW


def _started(twins: OverlapTwins) -> set[int]:
    return {e.scheduled_ms for e in twins.executions}


def test_given_a_dead_holder_then_a_late_copy_of_a_finished_occurrence_takes_no_place() -> None:
    # Given a buffer_one job whose holder died with an occurrence buffered behind it
    twins = OverlapTwins()
    job_id = twins.submit("buffer_one", occurrences=30)
    job = twins.jobs.get("t", job_id)
    assert job is not None
    done, dead, waiting, real = T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000
    twins.runs.record(_run(job_id, done, RunStatus.SUCCEEDED))
    twins.jobs.put_gate("t", job_id, Gate(dead, T0, waiting, 0), 10**9)
    twins.runs.record(_run(job_id, waiting, RunStatus.BUFFERED))
    twins.clock.now = T0 + 600_000  # long after the dead holder's grace
    guard = twins.executor._overlap
    while twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 10, 0):
        pass  # the occurrences sent at submission: only what the gate sends is looked at below

    # When a late copy of the occurrence that already succeeded comes to the gate
    admission = guard.admit(job, _message(job_id, done), grace_ms=0)

    # Then it takes no place: it goes on to its claim, which finds the run finished (and sends
    # its dependents' runs again); the buffered one is handed the gate and sent
    assert admission == Admission.RUN
    assert twins.runs.get(job_id, done).status == RunStatus.SUCCEEDED  # type: ignore[union-attr]
    gate = twins.jobs.gate("t", job_id)
    assert (gate.holder_ms, gate.buffered_ms) == (waiting, None)
    sent = []
    while deliveries := twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 10, 0):
        sent += [twins.queue.auth.open(d.body) for d in deliveries]
    # (due at its own instant: its record's lateness says how long it waited)
    assert [(m.scheduled_ms, m.attempt, m.due_ms) for m in sent] == [(waiting, 1, waiting)]
    # And the buffered place is free for the next real occurrence
    assert guard.admit(job, _message(job_id, real), grace_ms=0) == Admission.BUFFER
    assert twins.jobs.gate("t", job_id).buffered_ms == real


def _run(job_id: str, scheduled_ms: int, status: RunStatus) -> Run:
    return Run(tenant="t", job_id=job_id, scheduled_ms=scheduled_ms, status=status, attempt=1)


def _message(job_id: str, scheduled_ms: int) -> RunMessage:
    return RunMessage(
        tenant="t",
        job_id=job_id,
        scheduled_ms=scheduled_ms,
        attempt=1,
        due_ms=scheduled_ms,
        runtime=Runtime.LAMBDA,
        priority=Priority.NORMAL,
        generation=0,
    )


def test_given_a_copy_of_the_buffered_occurrence_then_it_is_recorded_again_but_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a buffer_one job whose holder is active
    twins = OverlapTwins()
    job_id = twins.submit("buffer_one", occurrences=30)
    job = twins.jobs.get("t", job_id)
    assert job is not None
    holder, waiting = T0 + 1000, T0 + 2000
    twins.clock.now = T0 + 1500
    twins.jobs.put_gate("t", job_id, Gate(holder, twins.clock.now, None, 0), 10**9)
    counted: Counter[str] = Counter()
    monkeypatch.setattr(overlap_service, "count", lambda name, value=1: counted.update([name]))
    guard = twins.executor._overlap

    # When an occurrence is buffered, and a copy of its message comes to the gate too
    first = guard.admit(job, _message(job_id, waiting), grace_ms=60_000)
    copy = guard.admit(job, _message(job_id, waiting), grace_ms=60_000)

    # Then the copy is dropped; the occurrence is recorded buffered, and counted once
    assert (first, copy) == (Admission.BUFFER, Admission.DUPLICATE)
    assert twins.runs.get(job_id, waiting).status == RunStatus.BUFFERED  # type: ignore[union-attr]
    assert twins.jobs.gate("t", job_id).buffered_ms == waiting
    assert counted[Metric.RUNS_BUFFERED] == 1


@dataclass
class RunNowWhileActive(OverlapTwins):
    """A run-now asked for once the first run has been executing for `after_s` seconds."""

    job_id: str = ""
    after_s: int = 5
    asked_ms: int | None = None

    def slow_buffer_one(self, **extra: Any) -> str:
        """A `buffer_one` job whose 30-second runs come every 10 minutes: its id."""
        body = {
            "schedule": {"rate_seconds": 600},
            "target": {"type": "handler", "name": "duetime.sleep"},
            "payload": {"seconds": 30},
            "overlap": "buffer_one",
            **extra,
        }
        return self.service.create("t", parse_job_spec(body)).id

    def work(self) -> None:
        first = self.executions[0] if self.executions else None
        if (
            first
            and self.asked_ms is None
            and self.clock.now >= first.start_ms + 1000 * self.after_s
        ):
            self.asked_ms = self.service.run_now("t", self.job_id)
        super().work()


def test_given_buffer_one_with_jitter_then_a_buffered_run_now_starts_when_the_active_ends() -> None:
    # The buffered run was sent due at its instant plus the job's jitter for it: it started
    # up to `jitter_seconds` after the active run ended, `due_at` jittered, lateness 0 (an
    # outside audit of the lifecycle). A run-now is not jittered (docs/api.md).
    twins = RunNowWhileActive()
    twins.job_id = twins.slow_buffer_one(jitter_seconds=500)

    twins.run_for(1300)

    first, *rest = sorted(twins.executions, key=lambda e: e.start_ms)
    assert twins.asked_ms is not None
    (run_now,) = [e for e in rest if e.scheduled_ms == twins.asked_ms]
    assert run_now.start_ms == first.end_ms  # as soon as the active run finished
    run = twins.runs.get(twins.job_id, twins.asked_ms)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert run.due_ms == twins.asked_ms  # not jittered
    assert run.lateness_ms == first.end_ms - twins.asked_ms > 0


@dataclass
class DependentAfterTheAsk(RunNowWhileActive):
    """Besides, an `after` job created once the run-now was asked for, while its run waits."""

    dependent_id: str = ""

    def work(self) -> None:
        asked = self.asked_ms
        if asked is not None and not self.dependent_id and self.clock.now > asked:
            body = {
                "schedule": {"after": {"job_id": self.job_id}},
                "target": {"type": "handler", "name": "duetime.sleep"},
                "payload": {"seconds": 1},
            }
            self.dependent_id = self.service.create("t", parse_job_spec(body)).id
        super().work()


def test_given_a_buffered_run_now_then_it_triggers_only_the_after_jobs_there_were_when_asked() -> (
    None
):
    # Its `buffered` record keeps when it was asked (its start message is written again from
    # that record): the run-now was charged for the `after` jobs there were then, not for
    # one created while it waited (a security audit, round six).
    twins = DependentAfterTheAsk()
    twins.job_id = twins.slow_buffer_one()

    twins.run_for(1300)

    assert twins.asked_ms is not None
    assert twins.dependent_id
    run_now = twins.runs.get(twins.job_id, twins.asked_ms)
    assert run_now is not None
    assert (run_now.status, run_now.asked_ms) == (RunStatus.SUCCEEDED, twins.asked_ms)
    assert run_now.attempts[0].lateness_ms > 1000  # it waited, buffered
    assert twins.runs.get(twins.dependent_id, twins.asked_ms) is None
    below = [r.scheduled_ms for r in twins.runs.all() if r.job_id == twins.dependent_id]
    assert T0 + 1_200_000 in below  # the schedule's next run triggers it


def test_given_a_buffered_run_now_then_its_start_message_carries_its_ask() -> None:
    # Handed over late, behind a later occurrence that took the gate, the start message is
    # buffered again: its record took the message's ask, none (an audit of the fix, round one).
    twins = RunNowWhileActive()
    twins.job_id = twins.slow_buffer_one()
    sent: list[RunMessage] = []
    send = twins.queue.send
    twins.queue.send = lambda messages: (sent.extend(m for m, _ in messages), send(messages))[1]  # type: ignore[method-assign]

    twins.run_for(700)

    assert twins.asked_ms is not None
    of_the_run_now = [m for m in sent if m.scheduled_ms == twins.asked_ms]
    assert len(of_the_run_now) == 2  # asked, then started by the gate when the active ended
    assert [m.asked_ms for m in of_the_run_now] == [twins.asked_ms, twins.asked_ms]
