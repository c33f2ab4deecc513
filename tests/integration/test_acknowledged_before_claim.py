"""A cancel, pause or reschedule acknowledged before an occurrence is claimed means that
occurrence never starts, even when its message was already handed over and is in a worker's
hands, waiting for its instant (the early wait). The worker reads the job right before the
claim, which it writes at most the claim lead (Settings.claim_lead_ms) before the instant
(duetime.services.execute): a change acknowledged after the claim no longer stops the
occurrence, which starts on its instant, not before.

A run claimed after its instant (late: a backlog, a gate's round-trips) reads its job again
after the claim: a change acknowledged between its first read and its claim was acknowledged
before the claim, and stops the occurrence; the claim is withdrawn."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.runs import ClaimOutcome, Run, RunClaim, RunStatus
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import Delivery, JobStore, RunStore, StoreError
from duetime.services.execute import RunExecutor
from duetime.services.results import Disposition
from duetime.targets import TargetExecutor
from tests.integration.conftest import Engine
from tests.integration.test_dropped_retries import retrying_one_off
from tests.integration.test_overlap import T0, OverlapTwins

TENANT = "tenant-a"

CHANGES: dict[str, Callable[[Engine, str], object]] = {
    "cancel": lambda engine, job_id: engine.parts.service.cancel(TENANT, job_id),
    "pause": lambda engine, job_id: engine.parts.service.pause(TENANT, job_id),
    "reschedule": lambda engine, job_id: engine.parts.service.update(
        TENANT, job_id, {"schedule": {"rate_seconds": 3600}}
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_acknowledged_while_the_message_waits_for_its_instant_stops_the_run(
    engine: Engine, change: str
) -> None:
    # Given a recurring job whose next occurrence was handed over to SQS and received
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine)

    # When the owner's change is acknowledged while the worker waits for the instant
    acknowledged: list[object] = []

    def wait(seconds: float) -> None:
        if not acknowledged:
            acknowledged.append(CHANGES[change](engine, job_id))
        engine.advance(seconds)

    # (claiming 200 ms before its instant: the wait is before the claim)
    result = worker(engine, wait, claim_lead_ms=200).handle(delivery)

    # Then the occurrence never starts: no target call, no run record, the message is done
    assert acknowledged, "the worker did not wait before the claim"
    assert result.disposition == Disposition.DONE
    assert result.detail.startswith("dropped"), result.detail
    assert engine.recorder.calls == []
    assert engine.parts.runs.get(job_id, scheduled_ms) is None


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_acknowledged_after_the_claim_leaves_the_run_to_start_on_its_instant(
    engine: Engine, change: str
) -> None:
    # Given a received occurrence, within the claim lead of its instant
    assert engine.parts.settings.claim_lead_ms > 500
    job_id, due, delivery = received_half_a_second_early(engine)

    # When the change is acknowledged after the worker claimed, while it waits for the instant
    claimed_before: list[bool] = []

    def wait(seconds: float) -> None:
        claimed_before.append(engine.parts.runs.get(job_id, due) is not None)
        CHANGES[change](engine, job_id)
        engine.advance(seconds)

    result = worker(engine, wait).handle(delivery)

    # Then the claimed occurrence runs once, started on its instant (not up to a lead early)
    assert claimed_before == [True]
    assert result.detail == "succeeded"
    assert engine.recorder.runs_of(job_id) == [due]
    run = engine.parts.runs.get(job_id, due)
    assert run is not None
    assert run.attempts[0].started_ms == due
    assert run.lateness_ms == 0
    assert run.early_wait_ms is not None
    assert run.early_wait_ms == 500


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_acknowledged_between_a_late_runs_read_and_its_claim_stops_the_run(
    engine: Engine, change: str
) -> None:
    # Given an occurrence received 300 ms after its instant: the worker reads the job and
    # claims the run at once
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine, late_by_ms=300)

    # When the owner's change is acknowledged after that read, before the claim is written
    runs = ChangedBeforeClaim(engine.parts.runs, lambda: CHANGES[change](engine, job_id))
    result = worker(engine, engine.advance, runs=runs).handle(delivery)

    # Then the occurrence never starts: no target call, no run record, the message is done
    assert runs.changed
    assert result.disposition == Disposition.DONE
    assert result.detail.startswith("dropped"), result.detail
    assert engine.recorder.calls == []
    assert engine.parts.runs.get(job_id, scheduled_ms) is None


def test_a_withdraw_refused_for_a_moment_is_tried_again_and_leaves_no_record(
    engine: Engine,
) -> None:
    # A cancel acknowledged between a late run's read and its claim; the claim's withdraw is
    # throttled once. It raised: the message came back, and after waiting out the lease the
    # run ended `failed`, "the worker stopped …", its target never called (a worker audit).
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine, late_by_ms=300)
    runs = ChangedBeforeClaim(engine.parts.runs, lambda: CHANGES["cancel"](engine, job_id))
    withdraw = engine.parts.runs.withdraw
    refusals: list[int] = []

    def throttled_once(run: Run, reason: str) -> bool:
        if not refusals:
            refusals.append(1)
            raise StoreError("ThrottlingException: rate exceeded", transient=True)
        return withdraw(run, reason)

    runs.withdraw = throttled_once  # type: ignore[attr-defined]
    result = worker(engine, engine.advance, runs=runs).handle(delivery)

    assert refusals == [1]
    assert result.disposition == Disposition.DONE
    assert result.detail.startswith("dropped after the claim"), result.detail
    assert engine.recorder.calls == []
    assert engine.parts.runs.get(job_id, scheduled_ms) is None


def test_a_late_run_whose_job_did_not_change_runs_as_claimed(engine: Engine) -> None:
    # Given an occurrence received after its instant
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine, late_by_ms=300)

    # When nothing changes between the worker's read and its claim
    runs = ChangedBeforeClaim(engine.parts.runs, lambda: None)
    result = worker(engine, engine.advance, runs=runs).handle(delivery)

    # Then it runs once, its lateness recorded
    assert runs.changed
    assert result.detail == "succeeded"
    assert engine.recorder.runs_of(job_id) == [scheduled_ms]
    run = engine.parts.runs.get(job_id, scheduled_ms)
    assert run is not None
    assert run.lateness_ms == 300


def test_a_retry_whose_job_is_cancelled_between_its_read_and_its_late_claim_ends_failed() -> None:
    # Given a one-off whose first attempt failed; its retry is handled a minute late
    twins = OverlapTwins()
    job = retrying_one_off(twins)
    attempts: list[int] = []
    twins.execute = lambda target, invocation: attempts.append(invocation.attempt)  # type: ignore[method-assign]

    # When the job is cancelled after the worker read it, before the retry's claim
    cancel_before_claims(twins, lambda: twins.service.cancel("t", job.id))
    twins.clock.now += 180_000
    twins.work()

    # Then the retry never starts, and the run ends failed with its one attempt
    assert attempts == []
    (run,) = twins.runs.all()
    assert (run.status, run.attempt, run.lease) == (RunStatus.FAILED, 1, None)
    assert [a.number for a in run.attempts] == [1]
    assert run.error == "the target refused it; not retried: the job is cancelled"


def test_a_gated_run_whose_job_is_paused_before_its_late_claim_frees_the_gate() -> None:
    # Given a job with an overlap policy, its first occurrence handled a second late (a gated
    # run is claimed on or after its instant, after the gate's round-trips)
    twins = OverlapTwins()
    spec = {
        "schedule": {"rate_seconds": 30, "end_at": rfc3339_ms(T0 + 600_000)},
        "target": {"type": "handler", "name": "duetime.sleep"},
        "payload": {"seconds": 0},
        "overlap": "skip",
    }
    job = twins.service.create("t", parse_job_spec(spec))
    twins.work()

    # When it is paused after the worker read the job, before the claim
    cancel_before_claims(twins, lambda: twins.service.pause("t", job.id))
    twins.clock.now += 31_000
    twins.work()

    # Then the occurrence never starts, has no record, and the gate is free for the next one
    assert twins.executions == []
    assert twins.runs.get(job.id, T0 + 30_000) is None
    assert twins.jobs.gate("t", job.id).holder_ms is None
    twins.service.resume("t", job.id)
    twins.run_for(40)
    assert twins.executions
    assert twins.statuses(job.id)[twins.executions[0].scheduled_ms] == RunStatus.SUCCEEDED


def cancel_before_claims(twins: OverlapTwins, change: Callable[[], object]) -> None:
    """Make `change` as the next claim is asked for (after the worker read the job)."""
    claim = twins.runs.claim

    def changed_first(run_claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        twins.runs.claim = claim  # type: ignore[method-assign]
        change()
        return claim(run_claim)

    twins.runs.claim = changed_first  # type: ignore[method-assign]


def test_a_late_run_whose_second_read_fails_runs_as_first_read(engine: Engine) -> None:
    # Given an occurrence received after its instant
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine, late_by_ms=300)

    # When the read after its claim fails (an outage), though the first one did not
    jobs = FailingReads(engine.parts.jobs, failing=2)
    result = worker(engine, engine.advance, jobs=jobs).handle(delivery)

    # Then the run goes on as first read: no attempt lost to the outage
    assert jobs.reads == 2
    assert result.detail == "succeeded"
    assert engine.recorder.runs_of(job_id) == [scheduled_ms]


class FailingReads:
    """The engine's job store, whose `failing`-th read of jobs for runs fails."""

    def __init__(self, jobs: JobStore, failing: int) -> None:
        self._jobs = jobs
        self._failing = failing
        self.reads = 0

    def get_with_dependents(self, keys: Sequence[tuple[str, str]]) -> object:
        self.reads += 1
        if self.reads == self._failing:
            raise StoreError("the table did not answer")
        return self._jobs.get_with_dependents(keys)

    def __getattr__(self, name: str) -> object:
        return getattr(self._jobs, name)


class ChangedBeforeClaim:
    """The engine's run store, with `change` made (and acknowledged) as a claim is asked for:
    after the worker read the job, before the claim is written."""

    def __init__(self, runs: RunStore, change: Callable[[], object]) -> None:
        self._runs = runs
        self._change = change
        self.changed = False

    def claim(self, claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        if not self.changed:
            self.changed = True
            self._change()
        return self._runs.claim(claim)

    def __getattr__(self, name: str) -> object:
        return getattr(self._runs, name)


def received_half_a_second_early(
    engine: Engine, late_by_ms: int = -500
) -> tuple[str, int, Delivery]:
    """A rate job's next occurrence, received 500 ms before its instant (or `late_by_ms`
    after it), the clock standing: its job id, its instant and the delivery.

    The clock stands during the submission, on a whole second, and the first instant is
    60.5 s on: the message is sent with a 60 s delay and so becomes visible exactly 500 ms
    before its instant, however long the submission takes on a loaded machine."""
    sent_ms = wall_ms() // 1000 * 1000 + 1000
    engine.stand_at(sent_ms)
    first = rfc3339_ms(sent_ms + 60_500)
    job_id = engine.submit({"schedule": {"rate_seconds": 60, "start_at": first}})
    job = engine.parts.jobs.get(TENANT, job_id)
    assert job is not None
    assert job.next_due_ms == sent_ms + 60_500
    engine.stand_at(job.next_due_ms + late_by_ms)
    (delivery,) = engine.parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0, 60)
    assert engine.parts.auth.open(delivery.body).scheduled_ms == job.next_due_ms
    return job_id, job.next_due_ms, delivery


def worker(
    engine: Engine,
    sleep: Callable[[float], None],
    claim_lead_ms: int | None = None,
    runs: object = None,
    jobs: object = None,
) -> RunExecutor:
    parts = engine.parts
    settings = parts.settings
    if claim_lead_ms is not None:
        settings = replace(settings, claim_lead_ms=claim_lead_ms)
    return RunExecutor(
        jobs or parts.jobs,  # type: ignore[arg-type]
        runs or parts.runs,  # type: ignore[arg-type]
        parts.queue,
        TargetExecutor(allow_private=True),
        settings,
        clock=wall_ms,
        auth=parts.auth,
        sleep=sleep,
    )
