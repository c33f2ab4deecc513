"""A retry dropped with its job (cancelled, paused) ends its run `failed`, its last attempt's
error kept: found by review, such a run stayed `retrying` for good (shown in progress, and,
for a gated job, holding its overlap gate)."""

from __future__ import annotations

import pytest

from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.jobs import Job, JobSpec, Priority, Runtime, parse_job_spec
from duetime.domain.runs import MAX_ERROR_CHARS, RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError
from duetime.services.dispatch import Dispatcher
from duetime.services.reconcile import SETTLE_MS, Reconciler
from tests.integration.test_overlap import T0, OverlapTwins


def failing_first_attempts(twins: OverlapTwins) -> None:
    def execute(target: Target, invocation: Invocation) -> None:
        if invocation.attempt == 1:
            raise TargetError("the target refused it", retryable=True)

    twins.execute = execute  # type: ignore[method-assign]


# A one-off due at T0 + 5 s that retries after a minute.
RETRIED_ONE_OFF = {
    "schedule": {"at": rfc3339_ms(T0 + 5_000)},
    "target": {"type": "handler", "name": "duetime.noop"},
    "retry": {"max_attempts": 3, "backoff_seconds": 60, "max_backoff_seconds": 60},
}


def quick_one_off(at_ms: int) -> JobSpec:
    """A one-off whose run succeeds at once."""
    body = {
        "schedule": {"at": rfc3339_ms(at_ms)},
        "target": {"type": "handler", "name": "duetime.sleep"},
        "payload": {"seconds": 0},
    }
    return parse_job_spec(body)


def retrying_one_off(twins: OverlapTwins) -> Job:
    """RETRIED_ONE_OFF, its first attempt failed: its run waits for a retry."""
    failing_first_attempts(twins)
    job = twins.service.create("t", parse_job_spec(RETRIED_ONE_OFF))
    twins.run_for(10)
    return job


def test_given_a_one_off_cancelled_while_retrying_then_its_run_ends_failed() -> None:
    twins = OverlapTwins()
    job = retrying_one_off(twins)
    (retrying,) = twins.runs.all()
    assert (retrying.status, retrying.attempt) == (RunStatus.RETRYING, 1)

    twins.service.cancel("t", job.id)
    twins.run_for(120)  # the retry comes due, and is dropped with its job

    (run,) = twins.runs.all()
    assert (run.status, run.attempt) == (RunStatus.FAILED, 1)
    assert run.attempts[-1].error == ("the target refused it; not retried: the job is cancelled")
    assert run.attempts[-1].finished_ms == retrying.attempts[-1].finished_ms


def test_given_a_long_error_when_its_retry_is_dropped_then_the_reason_is_kept() -> None:
    # Given a one-off whose first attempt failed with an error as long as a record keeps
    twins = OverlapTwins()
    long_error = "refused " * 40

    def execute(target: Target, invocation: Invocation) -> None:
        if invocation.attempt == 1:
            raise TargetError(long_error, retryable=True)

    twins.execute = execute  # type: ignore[method-assign]
    job = twins.service.create("t", parse_job_spec(RETRIED_ONE_OFF))
    twins.run_for(10)

    # When it is cancelled and its retry comes due
    twins.service.cancel("t", job.id)
    twins.run_for(120)

    # Then the run's error is the attempt's, cut to leave room for why it was not retried
    (run,) = twins.runs.all()
    error = run.attempts[-1].error
    assert run.status == RunStatus.FAILED
    assert error is not None
    assert len(error) == MAX_ERROR_CHARS
    assert error.startswith("refused refused")
    assert error.endswith("; not retried: the job is cancelled")


def test_given_a_gated_job_paused_while_a_run_retries_then_the_gate_is_free_on_resume() -> None:
    twins = OverlapTwins()
    failing_first_attempts(twins)
    spec = {
        "schedule": {"rate_seconds": 30, "end_at": rfc3339_ms(T0 + 600_000)},
        "target": {"type": "handler", "name": "duetime.noop"},
        "retry": {"max_attempts": 3, "backoff_seconds": 60, "max_backoff_seconds": 60},
        "overlap": "skip",
    }
    job = twins.service.create("t", parse_job_spec(spec))
    twins.run_for(35)  # the first occurrence (T0 + 30 s) failed its attempt 1
    first = twins.runs.get(job.id, T0 + 30_000)
    assert first is not None
    assert first.status == RunStatus.RETRYING
    twins.service.pause("t", job.id)
    twins.run_for(90)  # its retry comes due, and is dropped with the pause

    assert twins.runs.get(job.id, T0 + 30_000).status == RunStatus.FAILED  # type: ignore[union-attr]
    resumed = twins.clock.now
    twins.service.resume("t", job.id)
    twins.run_for(60)
    # The first occurrence after the resume runs (its first attempt fails and is retried, as
    # this job's do): it is not skipped behind a run that was never going to finish.
    after = sorted(
        (r for r in twins.runs.all() if r.scheduled_ms > resumed), key=lambda r: r.scheduled_ms
    )
    assert after
    assert after[0].status in (RunStatus.RETRYING, RunStatus.SUCCEEDED)


def test_given_a_one_off_updated_while_its_run_retries_then_the_run_goes_on() -> None:
    # Found by review: the update re-armed the occurrence with attempt 1, which the claim took
    # for a copy of the attempt that failed, while the pending retry (of the old generation)
    # was dropped: the run never finished and the job stayed scheduled, due in the past.
    twins = OverlapTwins()
    job = retrying_one_off(twins)
    twins.service.update("t", job.id, {"jitter_seconds": 2})  # a change that re-arms

    twins.run_for(5)  # its next attempt goes now (its instant is past)

    (run,) = twins.runs.all()
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert twins.service.get("t", job.id).status.value == "succeeded"
    twins.run_for(120)  # the old generation's retry comes due: a copy, the run left as it is
    assert twins.runs.get(job.id, run.scheduled_ms) == run


def updated_while_running(twins: OverlapTwins, changes: dict[str, object]) -> Job:
    """RETRIED_ONE_OFF, updated with `changes` while its first attempt runs, which then
    fails: its run waits for a retry."""

    def execute(target: Target, invocation: Invocation) -> None:
        if invocation.attempt == 1:
            twins.service.update("t", invocation.job_id, changes)
            raise TargetError("the target refused it", retryable=True)

    twins.execute = execute  # type: ignore[method-assign]
    job = twins.service.create("t", parse_job_spec(RETRIED_ONE_OFF))
    twins.run_for(10)
    (run,) = twins.runs.all()
    assert (run.status, run.attempt) == (RunStatus.RETRYING, 1)
    assert twins.service.get("t", job.id).job.generation > job.generation
    return job


def test_given_a_one_off_updated_while_its_attempt_runs_then_its_retry_runs() -> None:
    # Found by review: the failed attempt's retry carried the generation before the update
    # and was dropped as stale, while the update's re-arm (attempt 1) was a copy of the
    # attempt in flight: the run stayed `retrying` for good and the job never finished.
    twins = OverlapTwins()
    job = updated_while_running(twins, {"jitter_seconds": 2})

    twins.run_for(120)  # the retry comes due after its backoff

    (run,) = twins.runs.all()
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert twins.service.get("t", job.id).status.value == "succeeded"


def test_given_a_queued_one_off_rearmed_on_its_instant_then_the_new_first_attempt_runs() -> None:
    # The old generation's first attempt gives way to the re-arm's: the update's jitter
    # applies, though the old message was queued first and due earlier.
    twins = OverlapTwins()
    job = twins.service.create("t", quick_one_off(T0 + 60_000))
    twins.run_for(1)
    twins.service.update("t", job.id, {"jitter_seconds": 30})
    jittered = twins.service.get("t", job.id).job.due_ms(T0 + 60_000)
    assert jittered > T0 + 60_000

    twins.run_for(120)

    (run,) = twins.runs.all()
    assert (run.status, run.attempt, run.due_ms) == (RunStatus.SUCCEEDED, 1, jittered)


def test_given_a_one_off_moved_to_another_queue_while_its_attempt_runs_then_its_retry_follows() -> (
    None
):
    # Found by review: the kept retry stayed in the old queue (a lambda queue, for a job moved
    # to fargate with a timeout no Lambda invocation can hold, went round until the DLQ).
    twins = OverlapTwins()
    job = updated_while_running(twins, {"priority": "high"})
    twins.run_for(120)  # the old generation's retry comes due in the normal queue: re-sent
    # (the update's own first attempt, a copy of the one that ran, and the retry)
    deliveries = twins.queue.receive(Runtime.LAMBDA, Priority.HIGH, 10, 0)
    assert len(deliveries) == 2

    results = [twins.executor.handle(delivery) for delivery in deliveries]

    (run,) = twins.runs.all()
    assert [r.disposition for r in results] == ["done", "done"]
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert twins.service.get("t", job.id).status.value == "succeeded"


def test_given_a_one_off_whose_rescheduling_failed_to_dispatch_then_the_reconciler_sends_it() -> (
    None
):
    # Found by review: the new instant and generation were stored, the dispatch failed (500),
    # the old instant's message was dropped as stale, and the reconciler skipped one-offs: the
    # job stayed scheduled, due in the past, for good.
    twins = OverlapTwins()
    job = twins.service.create("t", quick_one_off(T0 + 30_000))
    send = twins.queue.send
    twins.queue.send = failing_send  # type: ignore[method-assign]
    with pytest.raises(QueueError):
        twins.service.update("t", job.id, {"schedule": {"at": rfc3339_ms(T0 + 60_000)}})
    twins.queue.send = send  # type: ignore[method-assign]
    twins.run_for(120)
    assert twins.executions == []  # the old instant's run was dropped, the new one never sent

    twins.clock.now += SETTLE_MS
    reconciler = Reconciler(
        twins.jobs,
        twins.timers,
        twins.runs,
        Dispatcher(twins.jobs, twins.timers, twins.queue, twins.settings, clock=twins.clock),
        twins.settings,
        clock=twins.clock,
    )
    first = reconciler.reconcile()
    twins.run_for(5)
    again = reconciler.reconcile()  # its run has a record now: nothing to send

    assert [e.scheduled_ms for e in twins.executions] == [T0 + 60_000]
    assert (first.overdue, first.rearmed, again.rearmed) == (1, 1, 0)
    assert twins.service.get("t", job.id).status.value == "succeeded"


def failing_send(messages: object) -> None:
    raise QueueError("SQS is unavailable")
