"""allow -> skip -> buffer_one while a run claimed under `allow` is still running stranded the
occurrence buffered behind it: `hold` (the PATCH to skip) named that run the gate's holder, the
PATCH to buffer_one kept it, and the run's release read its worker's copy of the job (`allow`)
and did nothing; with no later occurrence to hand it over, it stayed `buffered` for good (an
outside lifecycle audit, round eight). The PATCH to buffer_one now unpins such a holder: the
next occurrence runs beside it, as after a PATCH from `allow` straight to `buffer_one`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from duetime.domain.invocation import Invocation
from duetime.domain.runs import RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_overlap import T0, OverlapTwins
from tests.integration.test_overlap_changes import Twins

LAMBDA_VISIBILITY_S = 6 * 900  # the Lambda queues' visibility: hidden while it runs


@dataclass
class LongFirst(Twins):
    """+10 runs 300 s (to +310, past the schedule's end); the others 1 s."""

    def execute(self, target: Target, invocation: Invocation) -> None:
        if invocation.scheduled_ms == T0 + 10_000:
            self.started.append((10_000, invocation.attempt, self.clock.now - T0))
            for _ in range(300):
                self.clock.now += 1000
                self.work()
            return
        super().execute(target, invocation)


def _long_first() -> tuple[LongFirst, str]:
    """An `allow` job every 10 s to +200 whose +10 runs 300 s, its message hidden meanwhile."""
    twins = LongFirst()
    twins.queue._visibility_ms = LAMBDA_VISIBILITY_S * 1000
    job = twins.create(
        schedule={"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 200_000)},
        payload={"seconds": 1},
        timeout_seconds=400,
        overlap="allow",
    )
    return twins, job


def _run(patches: list[tuple[int, str]]) -> tuple[Twins, str]:
    twins, job = _long_first()
    for at, overlap in patches:
        twins.at(at, lambda o=overlap: twins.service.update("t", job, {"overlap": o}))
    twins.run_for(1000)
    return twins, job


def test_allow_then_skip_then_buffer_one_leaves_no_occurrence_waiting_for_good() -> None:
    twins, job = _run([(12, "skip"), (13, "buffer_one")])
    statuses = twins.statuses_s(job)

    assert twins.start_of(10) == 10
    assert twins.start_of(20) is not None
    assert statuses[20] == RunStatus.SUCCEEDED
    assert RunStatus.BUFFERED not in statuses.values()
    assert twins.jobs.gate("t", job).buffered_ms is None


@pytest.mark.parametrize("patches", [[(13, "buffer_one")], [(12, "skip")]])
def test_one_patch_from_allow_strands_nothing(patches: list[tuple[int, str]]) -> None:
    twins, job = _run(patches)
    assert RunStatus.BUFFERED not in twins.statuses_s(job).values()


def test_an_occurrence_buffered_between_the_patch_write_and_its_unpin_is_not_stranded() -> None:
    # A review: a worker reading the job as buffer_one between the PATCH's write and its unpin
    # buffered the occurrence behind the pinned run, and the unpin then left it (its release
    # does nothing). Under buffer_one a pinned holder counts as holding nothing.
    twins, job = _long_first()  # +10 runs to +310, past the schedule's end at +200
    guard = twins.service._overlap
    changed = guard.changed

    def racing(updated: Any, before: Any = None) -> None:
        if before is not None and (before.overlap, updated.spec.overlap) == ("skip", "buffer_one"):
            # A worker handles the occurrence due now between the job's write and the unpin.
            OverlapTwins.work(twins)
        changed(updated, before)

    guard.changed = racing  # type: ignore[method-assign]
    twins.at(12, lambda: twins.service.update("t", job, {"overlap": "skip"}))  # pins +10
    twins.at(20, lambda: twins.service.update("t", job, {"overlap": "buffer_one"}))
    twins.run_for(1000)

    statuses = twins.statuses_s(job)
    assert statuses[10] == RunStatus.SUCCEEDED  # ended at +310
    assert statuses[20] != RunStatus.BUFFERED, "+20 waits for good behind a run that ended"
    assert twins.jobs.gate("t", job).buffered_ms is None


# A lifecycle audit (round nine): a PATCH that changes nothing made a `skip` job's hold again
# and pinned the run that had taken the gate through it; a PATCH to buffer_one then unpinned
# it, and the next occurrence ran beside it. A hold leaves a holder that took the gate alone.
PAYLOAD = {"seconds": 25, "v": 1}


def _repeated(repeat: bool) -> tuple[Twins, str]:
    twins = Twins()
    job = twins.create(
        schedule={"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 200_000)},
        payload={"seconds": 25},
        overlap="skip",
        timeout_seconds=60,
    )
    # +10 takes the gate at +10 and runs to +35.
    twins.at(12, lambda: twins.service.update("t", job, {"payload": PAYLOAD}))
    if repeat:  # the same PATCH sent again: nothing changes
        twins.at(13, lambda: twins.service.update("t", job, {"payload": PAYLOAD}))
    twins.at(15, lambda: twins.service.update("t", job, {"overlap": "buffer_one"}))
    twins.run_for(400)
    return twins, job


@pytest.mark.parametrize("repeat", [True, False], ids=["payload PATCH repeated", "control"])
def test_a_repeated_patch_does_not_let_the_next_occurrence_run_beside_the_gate_holder(
    repeat: bool,
) -> None:
    twins, _ = _repeated(repeat)
    # +20 falls due while +10 (claimed through the gate under skip) runs: under buffer_one it
    # waits and starts when +10 ends, at +35.
    assert twins.start_of(20) == 35
