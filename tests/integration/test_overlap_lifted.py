"""An overlap policy changed (PATCH) while the holder waits for its retry, and a handed-over
buffered occurrence dropped on its first delivery: the waiting occurrence runs if it is owed,
else ends `skipped`; it never shows `buffered` for good (a lifecycle audit, round four)."""

from __future__ import annotations

import contextlib
from typing import Any, cast

import pytest

from duetime.adapters.memory.runs import MemoryRunStore
from duetime.domain.jobs import Job, JobStatus, parse_job_spec
from duetime.domain.messages import RunMessage
from duetime.domain.runs import RunStatus
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import Delivery
from duetime.services.dropped import DroppedRuns
from duetime.services.overlap import OverlapGuard, unclaimed
from duetime.settings import Settings
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins, every_ten_seconds


def failing_holder() -> dict[str, Any]:
    # +10 runs 2 s and fails, retry after ~30 s; +20 buffered behind it.
    return every_ten_seconds(
        payload={"seconds": 2, "fail": True},
        retry={"max_attempts": 3, "backoff_seconds": 30},
    )


def test_given_overlap_patched_to_allow_while_the_holder_retries_then_the_waiting_one_runs() -> (
    None
):
    # +20 was owed (an overlap change does not re-arm). The holder's retry read the job as
    # `allow`, and its release did nothing: +20 never ran and showed `buffered` for good.
    twins = Twins()
    job = twins.create(**failing_holder())
    lifted = {"overlap": "allow", "payload": {"seconds": 2}}  # and the retry succeeds
    twins.at(22, lambda: twins.service.update("t", job, lifted))

    twins.run_for(120)

    statuses = twins.statuses_s(job)
    assert statuses[10] == RunStatus.SUCCEEDED  # its retry ran under the new policy
    assert twins.start_of(20) is not None
    assert statuses[20] == RunStatus.SUCCEEDED


def test_given_overlap_patched_to_allow_then_a_pause_then_the_waiting_one_is_skipped() -> None:
    # Lifted, the waiting one is sent at once; the pause right after drops it: `skipped`.
    twins = Twins()
    job = twins.create(**failing_holder())
    twins.at(22, lambda: twins.service.update("t", job, {"overlap": "allow"}))
    twins.at(22, lambda: twins.service.pause("t", job))

    twins.run_for(120)

    statuses = twins.statuses_s(job)
    assert statuses[10] == RunStatus.FAILED  # its retry dropped by the pause
    assert statuses[20] == RunStatus.SKIPPED


def test_given_a_patch_to_a_one_off_while_the_holder_retries_then_the_waiting_one_is_skipped() -> (
    None
):
    twins = Twins()
    job = twins.create(**failing_holder())
    at = {"at": rfc3339_ms(T0 + 200_000)}
    twins.at(22, lambda: twins.service.update("t", job, {"schedule": at}))

    twins.run_for(120)

    statuses = twins.statuses_s(job)
    assert statuses[10] == RunStatus.FAILED
    assert statuses[20] == RunStatus.SKIPPED


def test_given_a_new_schedule_and_allow_while_the_holder_retries_then_the_waiting_one_skips() -> (
    None
):
    twins = Twins()
    job = twins.create(**failing_holder())
    new = {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}
    twins.at(22, lambda: twins.service.update("t", job, {"schedule": new, "overlap": "allow"}))

    twins.run_for(120)

    statuses = twins.statuses_s(job)
    assert statuses[10] == RunStatus.FAILED
    assert statuses[20] == RunStatus.SKIPPED


def test_given_a_pause_between_the_hand_over_and_its_first_delivery_then_it_is_skipped() -> None:
    # The holder's release sends the buffered occurrence's first attempt and names it holder;
    # a pause before that message is handled drops it, and a first delivery was taken to
    # have no record: it stayed `buffered` for good.
    twins = Twins()
    job = twins.create(**every_ten_seconds())
    guard = twins.executor._overlap
    start = guard._start
    fired = []

    def start_then_pause(job_: Any, scheduled_ms: int) -> None:
        start(job_, scheduled_ms)
        if not fired:
            fired.append(scheduled_ms)
            twins.service.pause("t", job)

    guard._start = start_then_pause  # type: ignore[method-assign]
    twins.run_for(60)

    assert fired == [T0 + 20_000]
    assert twins.start_of(20) is None  # dropped by the pause
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED


def test_given_a_lift_that_failed_then_the_patch_sent_again_lifts_it() -> None:
    # The job's write went through and the lift failed (a 5xx): the PATCH sent again changed
    # nothing, so nothing lifted the policy, and +20 stayed `buffered`, owed (a review).
    twins = Twins()
    job = twins.create(**failing_holder())
    lift = twins.service._overlap.lift
    lifted = {"overlap": "allow", "payload": {"seconds": 2}}

    def failing(job_: Any) -> None:
        raise ConnectionError("the gate's read went unanswered")

    def patch_then_again() -> None:
        twins.service._overlap.lift = failing  # type: ignore[method-assign]
        with contextlib.suppress(ConnectionError):
            twins.service.update("t", job, lifted)
        twins.service._overlap.lift = lift  # type: ignore[method-assign]
        twins.service.update("t", job, lifted)  # the client's retry

    twins.at(22, patch_then_again)
    twins.run_for(120)

    assert twins.statuses_s(job)[20] == RunStatus.SUCCEEDED


@pytest.mark.parametrize("change", ["jitter", "schedule"])
def test_given_a_re_arming_change_before_the_start_a_lift_sent_then_it_is_skipped(
    change: str,
) -> None:
    # The lift sends +20's start and clears the gate; a re-arming change before that message
    # is handled drops it, and the gate named it nowhere: it showed `buffered` for good (an
    # outside lifecycle audit, round six, left; fixed 2026-12-01).
    twins = Twins()
    job = twins.create(**failing_holder())
    guard = twins.service._overlap
    start = guard._start
    fired: list[int] = []
    changes = {
        "jitter": {"jitter_seconds": 1},
        "schedule": {"schedule": {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}},
    }

    def start_then_change(job_: Any, scheduled_ms: int) -> None:
        start(job_, scheduled_ms)
        fired.append(scheduled_ms)
        twins.service.update("t", job, changes[change])

    guard._start = start_then_change  # type: ignore[method-assign]
    twins.at(22, lambda: twins.service.update("t", job, {"overlap": "allow"}))
    twins.run_for(120)

    assert fired == [T0 + 20_000]
    assert twins.start_of(20) is None  # dropped by the change
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED


class FakeGate:
    """The overlap guard as DroppedRuns uses it: whether the gate names the message's
    occurrence holder at its generation (its release sent it), and the releases asked."""

    def __init__(self, handed: bool) -> None:
        self._handed = handed
        self.released: list[int] = []

    def handed(self, job: Job, message: RunMessage) -> bool:
        return self._handed

    def release(self, job: Job, scheduled_ms: int) -> None:
        self.released.append(scheduled_ms)


@pytest.mark.parametrize(
    ("status", "handed", "left"),
    [
        ("scheduled", False, "buffered"),
        ("paused", False, "skipped"),
        ("scheduled", True, "skipped"),
    ],
)
def test_given_an_earlier_generation_s_copy_dropped_then_the_new_one_waiting_there_stays(
    status: str, handed: bool, left: str
) -> None:
    # A re-armed schedule with the same instant: the old chain's message for it, dropped as
    # changed, must not end the new generation's occurrence buffered there (a pause does, and
    # so does a change if the message is the start its release sent: the gate names it).
    runs = MemoryRunStore()
    settings = Settings("jobs", "timers", "runs", {}, timer_shards=1)
    spec = parse_job_spec(
        {"schedule": {"rate_seconds": 10}, "target": {"type": "handler", "name": "x"}}
    )
    job = Job("t", "01JOB", spec, JobStatus(status), 1, 0, generation=2)
    at = T0 + 20_000
    runs.record(unclaimed(job, at, RunStatus.BUFFERED, T0, 3600))
    gate = FakeGate(handed)
    dropped = DroppedRuns(
        runs,
        settings,
        clock=lambda: T0,
        after_the_lease=lambda *_: pytest.fail("no lease"),
        finished=lambda *_: pytest.fail("not finished"),
        overlap=cast(OverlapGuard, gate),
    )
    copy = RunMessage("t", job.id, at, 1, at, generation=1)

    dropped.end(Delivery("m", "r", copy.to_json(), 1, "q"), copy, "changed since", (job, ()))

    record = runs.get(job.id, at)
    assert record is not None
    assert record.status == RunStatus(left)
    assert gate.released == ([at] if left == "skipped" else [])
