"""Job dependencies (`after` schedules) through the services on the in-memory twins: the real
JobService and RunExecutor, a hand-driven clock and a target runner that records what it ran."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.errors import IllegalTransition, NotFound, ValidationError
from duetime.domain.ids import run_id
from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.jobs import JobStatus, Priority, Runtime, parse_job_spec
from duetime.domain.planning import attempts_seconds
from duetime.domain.runs import RunStatus
from duetime.domain.schedule import After
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.services.execute import RunExecutor
from duetime.services.jobs import JobService
from duetime.settings import QueueUrls, Settings, queue_key

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC))
TENANT = "t"


class Engine:
    def __init__(self, **settings: Any) -> None:
        self.now = T0
        queues = {
            queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}")
            for r in Runtime
            for p in Priority
        }
        self.settings = Settings("jobs", "timers", "runs", queues, timer_shards=1, **settings)
        self.jobs, self.runs = MemoryJobStore(), MemoryRunStore()
        self.timers = MemoryTimerStore(shards=1)
        self.queue = MemoryQueue(self.clock)
        self.service = JobService(
            self.jobs,
            self.timers,
            self.runs,
            self.queue,
            self.settings,
            clock=self.clock,
        )
        self.executor = RunExecutor(
            self.jobs,
            self.runs,
            self.queue,
            self,
            self.settings,
            clock=self.clock,
            auth=self.queue.auth,
            sleep=lambda seconds: None,
            jitter=lambda: 0.5,
        )
        self.ran: list[Invocation] = []

    def clock(self) -> int:
        return self.now

    def execute(self, target: Target, invocation: Invocation) -> None:
        self.ran.append(invocation)
        if invocation.payload == "fail":
            raise TargetError("told to fail", retryable=False)
        if invocation.payload == "flaky":
            raise TargetError("HTTP 503", retryable=True)

    def create(self, schedule: dict[str, Any], payload: Any = None) -> str:
        body = {
            "schedule": schedule,
            "target": {"type": "http", "url": "https://example.com/hook"},
            "payload": payload,
            "retry": {"max_attempts": 1},
        }
        return self.service.create(TENANT, parse_job_spec(body)).id

    def after(self, job_id: str, on: str = "succeeded") -> str:
        return self.create({"after": {"job_id": job_id, "on": on}})

    def work(self, keep: bool = False) -> None:
        """Every visible message is handled (and deleted when done, unless `keep`)."""
        while deliveries := self.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0):
            result = self.executor.handle(deliveries[0])
            if result.disposition == "done" and not keep:
                self.queue.delete(deliveries)
            if keep:
                return

    def runs_of(self, job_id: str) -> list[Invocation]:
        return [i for i in self.ran if i.job_id == job_id]


@pytest.fixture
def engine() -> Engine:
    return Engine()


def test_given_an_after_job_when_its_upstream_succeeds_then_it_runs_once_with_its_id(
    engine: Engine,
) -> None:
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependent = engine.after(upstream)
    assert engine.jobs.dependents(TENANT, upstream) == (dependent,)
    assert engine.service.get(TENANT, dependent).status == JobStatus.SCHEDULED

    engine.work()

    [ran] = engine.runs_of(dependent)
    assert ran.run_id == f"{dependent}-{T0}" == run_id(dependent, T0)
    assert ran.upstream_run_id == run_id(upstream, T0)
    stored = engine.runs.get(dependent, T0)
    assert stored is not None
    assert stored.status == RunStatus.SUCCEEDED
    # A dependent is not finished by its run: it waits for the next one
    assert engine.service.get(TENANT, dependent).status == JobStatus.SCHEDULED


@pytest.mark.parametrize(
    ("payload", "on", "triggered"),
    [
        (None, "succeeded", True),
        (None, "failed", False),
        (None, "finished", True),
        ("fail", "succeeded", False),
        ("fail", "failed", True),
        ("fail", "finished", True),
    ],
)
def test_the_outcome_triggers_only_the_dependents_that_ask_for_it(
    engine: Engine, payload: Any, on: str, triggered: bool
) -> None:
    upstream = engine.create({"at": rfc3339_ms(T0)}, payload)
    dependent = engine.after(upstream, on)

    engine.work()

    assert len(engine.runs_of(dependent)) == (1 if triggered else 0)


def test_a_chain_runs_through_and_every_run_shares_the_upstream_instant(engine: Engine) -> None:
    a = engine.create({"at": rfc3339_ms(T0)})
    b = engine.after(a)
    c = engine.after(b, "finished")

    engine.work()

    assert [i.job_id for i in engine.ran] == [a, b, c]
    assert [i.run_id for i in engine.ran] == [f"{a}-{T0}", f"{b}-{T0}", f"{c}-{T0}"]
    assert engine.runs_of(c)[0].upstream_run_id == f"{b}-{T0}"


def test_a_duplicate_completion_does_not_trigger_twice(engine: Engine) -> None:
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependent = engine.after(upstream)
    # The upstream's message is handled but not deleted (a crash before the delete), so it
    # is delivered again: its claim finds the run finished and triggers again.
    engine.work(keep=True)
    engine.now += 60_000
    engine.work()

    assert len(engine.runs_of(upstream)) == 1
    assert len(engine.runs_of(dependent)) == 1


def failing_sends_to(engine: Engine, job_id: str) -> list[bool]:
    """The engine's sends of `job_id`'s runs fail while the returned flag holds True."""
    sent = engine.queue.send
    failing = [True]

    def send(messages: Any) -> None:
        if failing[0] and any(m.job_id == job_id for m, _ in messages):
            raise RuntimeError("SQS down")
        sent(messages)

    engine.queue.send = send  # type: ignore[method-assign]
    return failing


def test_a_crash_before_triggering_is_repaired_by_the_redelivery(engine: Engine) -> None:
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependent = engine.after(upstream)
    failing = failing_sends_to(engine, dependent)
    engine.work()  # the upstream ran; triggering failed, so its message stays
    assert engine.runs_of(dependent) == []

    failing[0] = False
    engine.now += 60_000
    engine.work()

    assert len(engine.runs_of(upstream)) == 1
    assert len(engine.runs_of(dependent)) == 1


@pytest.mark.parametrize("change", ["pause", "cancel", "reschedule"])
def test_a_repair_owed_by_a_finished_run_is_made_though_its_job_changed_since(
    engine: Engine, change: str
) -> None:
    # The upstream's run succeeded, its dependents' send failed; the owner then paused,
    # cancelled or rescheduled the upstream. The redelivery was dropped with the job before
    # its claim, where it would have triggered them: they never ran (a fault audit).
    upstream = engine.create({"rate_seconds": 3600})
    dependent = engine.after(upstream)
    instant = engine.service.run_now(TENANT, upstream)
    failing = failing_sends_to(engine, dependent)
    engine.work()  # the upstream's run succeeded; its dependents' send failed: it stays
    assert [i.scheduled_ms for i in engine.runs_of(upstream)] == [instant]
    if change == "pause":
        engine.service.pause(TENANT, upstream)
    elif change == "cancel":
        engine.service.cancel(TENANT, upstream)
    else:
        engine.service.update(TENANT, upstream, {"schedule": {"rate_seconds": 7200}})
    failing[0] = False

    for _ in range(5):
        engine.now += 60_000
        engine.work()

    assert [i.scheduled_ms for i in engine.runs_of(dependent)] == [instant]
    assert [i.scheduled_ms for i in engine.runs_of(upstream)] == [instant]


def test_a_retry_its_job_stopped_triggers_nothing_however_often_its_message_comes(
    engine: Engine,
) -> None:
    # A retry dropped by its job's cancel ends the run `failed`, "not retried: …", and
    # triggers nothing; a second delivery of that message found the run finished and sent
    # its `on: failed` dependents (a review of the session's change).
    body = {
        "schedule": {"at": rfc3339_ms(T0)},
        "target": {"type": "http", "url": "https://example.com/hook"},
        "payload": "flaky",
        "retry": {"max_attempts": 3, "backoff_seconds": 10},
    }
    upstream = engine.service.create(TENANT, parse_job_spec(body)).id
    dependent = engine.after(upstream, on="failed")
    engine.work()  # attempt 1 fails: retrying
    engine.service.cancel(TENANT, upstream)
    engine.now += 60_000
    (delivery,) = engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)

    first = engine.executor.handle(delivery)
    again = engine.executor.handle(replace(delivery, receive_count=2))
    engine.work()

    assert (first.detail, again.detail) == ("dropped: the job is cancelled",) * 2
    run = engine.runs.get(upstream, T0)
    assert run is not None
    assert run.status == RunStatus.FAILED
    assert engine.runs_of(dependent) == []


def test_a_run_reads_its_many_dependents_a_few_at_a_time_and_sends_them_all(
    engine: Engine,
) -> None:
    # 1,000 dependents with 64 KiB payloads were read at once: ~1.6 GB in the shared worker,
    # killing other tenants' runs with it (a security audit, round five).
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependents = [engine.after(upstream) for _ in range(60)]
    reads: list[int] = []
    get_many = engine.jobs.get_many

    def counted(keys: Any) -> Any:
        reads.append(len(keys))
        return get_many(keys)

    engine.jobs.get_many = counted  # type: ignore[method-assign]
    engine.work()

    assert reads
    assert max(reads) <= 25
    assert sorted(i.job_id for i in engine.ran if i.job_id != upstream) == sorted(dependents)


def test_a_cancelled_or_paused_dependent_is_not_triggered_and_breaks_the_chain(
    engine: Engine,
) -> None:
    a = engine.create({"rate_seconds": 60})
    b = engine.after(a)
    c = engine.after(b)
    paused = engine.after(a)
    engine.service.cancel(TENANT, b)
    engine.service.pause(TENANT, paused)
    assert engine.jobs.dependents(TENANT, a) == tuple(sorted((paused,)))

    engine.service.run_now(TENANT, a)
    engine.work()

    assert [i.job_id for i in engine.ran] == [a]
    # Resumed, it runs after the next run of its upstream
    engine.service.resume(TENANT, paused)
    engine.now += 1_000
    engine.service.run_now(TENANT, a)
    engine.work()
    assert [i.job_id for i in engine.ran] == [a, a, paused]
    assert engine.service.get(TENANT, c).status == JobStatus.SCHEDULED


def test_the_upstream_must_be_the_tenants_and_a_cycle_is_refused(engine: Engine) -> None:
    a = engine.create({"rate_seconds": 60})
    with pytest.raises(NotFound):
        engine.after("01NOSUCHJOB0000000000000000")
    with pytest.raises(NotFound):
        engine.service.create(
            "other",
            parse_job_spec(
                {
                    "schedule": {"after": {"job_id": a}},
                    "target": {"type": "http", "url": "https://example.com/hook"},
                }
            ),
        )
    b = engine.after(a)
    c = engine.after(b)

    for target in (c, b, a):  # a -> ... -> a
        with pytest.raises(ValidationError) as caught:
            engine.service.update(TENANT, a, {"schedule": {"after": {"job_id": target}}})
        assert caught.value.field == "schedule.after.job_id"
    with pytest.raises(NotFound):
        engine.service.update(TENANT, b, {"schedule": {"after": {"job_id": "01NOSUCH"}}})


def test_an_upstream_that_runs_no_more_is_refused_unless_the_job_already_has_it(
    engine: Engine,
) -> None:
    # schedules.md: a cancelled upstream, or a completed one past its last runs, is a 409
    # naming schedule.after.job_id at create and when a PATCH moves a job to it.
    cancelled = engine.create({"rate_seconds": 60})
    kept = engine.after(cancelled)
    other = engine.after(engine.create({"rate_seconds": 60}))
    engine.service.cancel(TENANT, cancelled)
    ends = rfc3339_ms(T0 + 120_000)
    completed = engine.create({"rate_seconds": 60, "end_at": ends}, payload="done")
    job = engine.jobs.get(TENANT, completed)
    assert job is not None
    engine.jobs.replace(replace(job, status=JobStatus.COMPLETED), expected=job)
    # completed early, its last occurrences (jittered up to end_at) are still to come
    engine.now = T0 + 60_000
    early = engine.after(completed)
    assert engine.service.get(TENANT, early).status == JobStatus.SCHEDULED
    engine.now = T0 + 120_000 + attempts_seconds(job.spec) * 1000  # its last run's attempts
    jobs_before = {j.id for j in engine.jobs.list(TENANT, 100, None).items}

    for upstream in (cancelled, completed):
        with pytest.raises(IllegalTransition) as caught:
            engine.after(upstream)
        assert caught.value.field == "schedule.after.job_id"
        with pytest.raises(IllegalTransition):
            engine.service.update(TENANT, other, {"schedule": {"after": {"job_id": upstream}}})
    assert {j.id for j in engine.jobs.list(TENANT, 100, None).items} == jobs_before
    assert engine.jobs.dependents(TENANT, cancelled) == (kept,)
    assert engine.jobs.dependents(TENANT, completed) == (early,)

    # a job that already depends on it may still be changed
    for job_id in (kept, early):
        changed = engine.service.update(TENANT, job_id, {"priority": "high"})
        assert changed.job.spec.priority == Priority.HIGH


def test_a_job_may_have_at_most_32_jobs_above_it(engine: Engine) -> None:
    # schedules.md: a chain holds at most 33 jobs, the job and 32 above it.
    last = engine.create({"rate_seconds": 60})
    for _ in range(32):
        last = engine.after(last)
    with pytest.raises(ValidationError) as caught:
        engine.after(last)
    assert caught.value.field == "schedule.after.job_id"
    assert "at most 32 jobs above it" in str(caught.value)


def test_a_patch_higher_up_cannot_make_a_chain_longer_than_33_jobs(engine: Engine) -> None:
    # Found by an outside audit (lifecycle, round ten): only the chain above the PATCHed job
    # was walked, so one moved under a long chain lengthened its dependents' chains past 33;
    # the bottom jobs could then not be moved at all.
    top = engine.create({"rate_seconds": 60})
    above = top
    for _ in range(20):
        above = engine.after(above)
    head = engine.create({"rate_seconds": 60})
    below = head
    for _ in range(12):
        below = engine.after(below)
    # 21 jobs, then head and its 12 below: 34.
    with pytest.raises(ValidationError) as caught:
        engine.service.update(TENANT, head, {"schedule": {"after": {"job_id": above}}})
    assert caught.value.field == "schedule.after.job_id"
    assert "21 above it and at least 12 levels below it" in str(caught.value)
    assert not isinstance(engine.service.get(TENANT, head).job.spec.schedule, After)
    # One level less fits: 33 jobs; the bottom one may still be changed
    second = engine.jobs.dependents(TENANT, head)[0]
    engine.service.update(TENANT, second, {"schedule": {"after": {"job_id": above}}})
    engine.service.update(TENANT, below, {"priority": "high"})


def test_a_dependent_whose_item_does_not_decode_does_not_hold_back_its_siblings(
    engine: Engine,
) -> None:
    # Its siblings' runs are sent; the upstream's message fails after (the redelivery tries
    # again, its copies sharing their run ids) and ends in the DLQ if the item stays broken.
    a = engine.create({"rate_seconds": 60})
    b, c, d = engine.after(a), engine.after(a), engine.after(a)
    engine.jobs.get_many = not_decoding(engine.jobs.get_many, c)  # type: ignore[method-assign]
    engine.service.run_now(TENANT, a)
    engine.work()

    assert sorted(i.job_id for i in engine.ran) == sorted([a, b, d])


def test_a_read_of_the_dependents_failed_by_the_store_is_not_made_again_for_each(
    engine: Engine,
) -> None:
    # (Found by review: a throttle was taken for an item that does not decode.)
    a = engine.create({"rate_seconds": 60})
    for _ in range(3):
        engine.after(a)
    calls: list[int] = []

    def throttled(keys: Any) -> Any:
        calls.append(len(keys))
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "BatchGetItem")

    engine.jobs.get_many = throttled  # type: ignore[method-assign]
    engine.service.run_now(TENANT, a)
    engine.work()

    assert calls == [3]  # one read, failed: the message comes back for the whole trigger


def test_a_patch_moves_the_dependent_to_its_new_upstream(engine: Engine) -> None:
    a = engine.create({"rate_seconds": 60})
    x = engine.create({"rate_seconds": 60})
    b = engine.after(a)

    engine.service.update(TENANT, b, {"schedule": {"after": {"job_id": x, "on": "finished"}}})
    assert engine.jobs.dependents(TENANT, a) == ()
    assert engine.jobs.dependents(TENANT, x) == (b,)
    engine.service.update(TENANT, b, {"schedule": {"after": {"job_id": x}}})  # only `on`
    assert engine.jobs.dependents(TENANT, x) == (b,)

    engine.service.run_now(TENANT, a)
    engine.work()
    engine.now += 1_000
    engine.service.run_now(TENANT, x)
    engine.work()
    assert [i.job_id for i in engine.ran] == [a, x, b]

    engine.service.update(TENANT, b, {"schedule": {"rate_seconds": 60}})
    assert engine.jobs.dependents(TENANT, x) == ()


def test_a_run_now_of_a_chain_s_jobs_in_one_millisecond_are_runs_of_their_own(
    engine: Engine,
) -> None:
    """A dependent's triggered run has its upstream's instant, and a run-now of the dependent
    in the same millisecond had it too: one of the two runs was taken for a copy and dropped.
    A run-now reserves its instant for the whole chain (and skips the root's occurrences)."""
    a = engine.create({"rate_seconds": 60})  # its first occurrence sent at once
    b = engine.after(a)
    c = engine.after(b, "finished")
    first = engine.service.get(TENANT, a).job.next_due_ms
    engine.now = first

    instants = [engine.service.run_now(TENANT, job) for job in (a, b, c)]
    engine.work()

    assert len(set(instants)) == 3 and first not in instants, instants  # noqa: PT018
    # b: its own run-now and one triggered by each of a's two runs (its occurrence, its
    # run-now); c: its run-now and one triggered by each of b's three.
    assert len(engine.runs_of(a)) == 2
    assert len(engine.runs_of(b)) == 3
    assert len(engine.runs_of(c)) == 4


def test_a_run_now_replay_after_a_pause_answers_its_run_when_its_instant_was_moved_on(
    engine: Engine,
) -> None:
    """A keyed run-now whose instant was moved on a millisecond (another run-now had the
    moment) answered 202; the job was paused in that millisecond. The replay compared the
    pause with the moved instant and answered 409: it compares with the moment asked."""
    job = engine.create({"rate_seconds": 3600})
    plain = engine.service.run_now(TENANT, job)
    keyed = engine.service.run_now(TENANT, job, "k")
    engine.service.pause(TENANT, job)  # in the same millisecond, after both answered
    engine.now += 5_000

    assert keyed == plain + 1
    assert engine.service.run_now(TENANT, job, "k") == keyed  # it used to be a 409


def test_a_dependent_that_does_not_decode_is_charged_and_its_siblings_counted(
    engine: Engine,
) -> None:
    # Counted before the run is sent, one such item made every run-now and backfill of its
    # upstream a 500 with nothing sent (a review of this session's change).
    a = engine.create({"rate_seconds": 60})
    b = engine.after(a)
    engine.after(b)
    c = engine.after(a)
    read = not_decoding(engine.jobs.get_with_dependents, c)
    engine.jobs.get_with_dependents = read  # type: ignore[method-assign]

    assert engine.service.fan_out(TENANT, a) == 2  # b and c (b's own below it not seen)


def not_decoding(read: Any, broken: str) -> Any:
    """`read` (of jobs by keys), failing as an item that does not decode when it reads `broken`."""

    def reading(keys: Any) -> Any:
        if any(job_id == broken for _, job_id in keys):
            raise ValueError("Expecting value: line 1 column 1 (char 0)")
        return read(keys)

    return reading


def test_a_dependent_whose_upstream_expired_can_still_be_changed_but_not_moved_onto_it() -> None:
    """A PATCH that leaves an `after` schedule as it is does not walk the chain again: once
    the upstream's item had expired (a one-off 30 days after its run), every change of the
    dependent (its name, tags, payload) was a 404 on `schedule.after.job_id` (until
    2026-12-01; an outside lifecycle audit, round ten)."""
    from tests.integration.test_overlap_changes import Twins

    twins = Twins()
    upstream = twins.create(schedule={"delay_seconds": 10})
    dependent = twins.create(schedule={"after": {"job_id": upstream}})
    twins.run_for(30)
    twins.clock.now += 31 * 86_400_000  # the upstream's item is past its TTL

    renamed = twins.service.update("t", dependent, {"name": "renamed", "tags": {"team": "x"}})
    assert (renamed.job.spec.name, renamed.job.version) == ("renamed", 2)
    other = twins.create(schedule={"rate_seconds": 60})
    twins.service.update("t", dependent, {"schedule": {"after": {"job_id": other}}})
    with pytest.raises(NotFound):  # moved back onto it: checked, and gone
        twins.service.update("t", dependent, {"schedule": {"after": {"job_id": upstream}}})


def test_a_completed_upstream_whose_last_run_waits_out_a_retry_after_takes_a_dependent() -> None:
    """Its last run, held back by a target's Retry-After (up to 900 s), may still end: a new
    `after` job is refused only past the longest wait (until 2026-12-01 the backoff's cap, and
    a dependent was refused while that run was `retrying`; a lifecycle audit, round ten)."""
    spec = parse_job_spec(
        {
            "schedule": {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 20_000)},
            "target": {"type": "handler", "name": "duetime.noop"},
            "timeout_seconds": 30,
            "retry": {"max_attempts": 2, "backoff_seconds": 1, "max_backoff_seconds": 1},
        }
    )
    # The run at +20 may end as late as +20 + 30 s + Retry-After's 900 s + 30 s.
    assert attempts_seconds(spec) >= 2 * 30 + 900


def test_a_dependent_paused_when_its_upstreams_run_ended_misses_it_though_a_copy_comes_later(
    engine: Engine,
) -> None:
    # Found by an outside audit (faults, round twelve): the upstream's message came again after
    # the dependent's resume (a lost delete, an SQS duplicate) and triggered it for that run.
    upstream = engine.create({"rate_seconds": 3600})
    paused = engine.after(upstream)
    engine.service.pause(TENANT, paused)
    engine.service.run_now(TENANT, upstream)
    engine.work(keep=True)  # the run ends; its message is not deleted
    assert engine.runs_of(upstream)
    assert not engine.runs_of(paused)

    engine.now += 1_000
    engine.service.resume(TENANT, paused)
    engine.now += 30_000  # the copy, visible again: its claim finds the run finished
    engine.work()

    assert not engine.runs_of(paused)
    # Resumed, it runs after its upstream's next run
    engine.now += 1_000
    engine.service.run_now(TENANT, upstream)
    engine.work()
    assert len(engine.runs_of(paused)) == 1


def test_a_dependent_resumed_before_its_upstreams_run_ended_is_triggered_by_a_copy(
    engine: Engine,
) -> None:
    upstream = engine.create({"rate_seconds": 3600})
    dependent = engine.after(upstream)
    engine.service.pause(TENANT, dependent)
    engine.now += 1_000
    engine.service.resume(TENANT, dependent)
    engine.now += 1_000
    failing = failing_sends_to(engine, dependent)
    engine.service.run_now(TENANT, upstream)
    engine.work()  # the trigger's send fails: the message stays, and comes again
    failing[0] = False
    engine.now += 60_000
    engine.work()

    assert len(engine.runs_of(dependent)) == 1


def test_a_dependent_created_after_a_one_off_upstream_ran_is_not_triggered_by_a_copy(
    engine: Engine,
) -> None:
    # Found by an outside audit (faults, round thirteen): a copy of the upstream's message (a
    # lost delete, a redrive) read its dependents again and ran one created after its run.
    upstream = engine.create({"at": rfc3339_ms(T0)})
    engine.work(keep=True)  # the run ends; its message is not deleted
    engine.now += 10_000
    late = engine.after(upstream)
    engine.now += 30_000  # the copy
    engine.work()

    assert len(engine.runs_of(upstream)) == 1
    assert engine.runs.get(late, T0) is None
    assert not engine.runs_of(late)


def test_a_copy_after_a_failed_trigger_sends_the_owed_runs_only(engine: Engine) -> None:
    upstream = engine.create({"at": rfc3339_ms(T0)})
    owed = engine.after(upstream)
    failing = failing_sends_to(engine, owed)
    engine.work()  # the trigger's send fails: the message stays
    engine.now += 1_000
    late = engine.after(upstream)
    failing[0] = False
    engine.now += 60_000
    engine.work()

    assert [i.upstream_run_id for i in engine.runs_of(owed)] == [run_id(upstream, T0)]
    assert not engine.runs_of(late)
