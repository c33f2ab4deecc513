"""A PATCH from `allow` to `skip` made after a pause and resume (or after a re-arming PATCH)
held the gate for a run whose retry that earlier change dropped: every occurrence was
`skipped`, with nothing running, until the dropped retry's message arrived (a target's
Retry-After: up to 15 minutes). `OverlapGuard.hold` saw only a re-arm made by the PATCH itself
(an outside lifecycle audit, round eight). A run claimed before the job's generation began
holds the gate only while it runs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.runs import RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins


@dataclass
class FailingFirst(Twins):
    """+10's first attempt fails after 2 s, answering 503 with Retry-After: 300."""

    def execute(self, target: Target, invocation: Invocation) -> None:
        if (invocation.scheduled_ms - T0, invocation.attempt) == (10_000, 1):
            self.started.append((10_000, 1, self.clock.now - T0))
            for _ in range(2):
                self.clock.now += 1000
                self.work()
            raise TargetError("HTTP 503", retryable=True, retry_after_seconds=300)
        super().execute(target, invocation)


def _run(change: str) -> tuple[Twins, str]:
    twins = FailingFirst()
    job = twins.create(
        schedule={"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 600_000)},
        payload={"seconds": 2},
        overlap="allow",
        retry={"max_attempts": 2, "backoff_seconds": 1},
    )
    if change == "pause and resume":
        twins.at(15, lambda: twins.service.pause("t", job))
        twins.at(16, lambda: twins.service.resume("t", job))
    elif change == "re-arming PATCH":
        twins.at(15, lambda: twins.service.update("t", job, {"jitter_seconds": 1}))
    patch = {"overlap": "skip"} | ({"jitter_seconds": 1} if change == "the PATCH itself" else {})
    twins.at(25, lambda: twins.service.update("t", job, patch))
    twins.run_for(400)
    return twins, job


@pytest.mark.parametrize("change", ["pause and resume", "re-arming PATCH", "the PATCH itself"])
def test_a_retry_dropped_by_a_change_before_a_patch_to_skip_holds_nothing(change: str) -> None:
    twins, job = _run(change)
    statuses = twins.statuses_s(job)

    assert statuses[10] == RunStatus.FAILED  # its retry dropped: "not retried"
    assert twins.start_of(30) in (30, 31)  # nothing of the job is active: on its instant
    assert not [s for s in range(30, 320, 10) if statuses.get(s) == RunStatus.SKIPPED]


def test_a_retry_of_the_current_generation_holds_the_gate_after_a_patch_to_skip() -> None:
    # (Control: with no change before the PATCH, +10's retry, due ~+312, holds the gate.)
    twins, job = _run("none")
    statuses = twins.statuses_s(job)

    assert statuses[30] == RunStatus.SKIPPED
    assert statuses[10] == RunStatus.SUCCEEDED


@dataclass
class FailingSixty(Twins):
    """+60's first attempt, claimed during its staging (+50): the job is paused and resumed
    before the instant; then it fails with 503, Retry-After 300."""

    job: str = ""

    def execute(self, target: Target, invocation: Invocation) -> None:
        if (invocation.scheduled_ms - T0, invocation.attempt) != (60_000, 1):
            super().execute(target, invocation)
            return
        assert self.clock.now < T0 + 60_000
        self.clock.now = T0 + 55_000  # the worker waits for +60; meanwhile:
        self.service.pause("t", self.job)
        self.service.resume("t", self.job)
        self.clock.now = T0 + 60_000
        self.started.append((60_000, 1, self.clock.now - T0))
        self.clock.now += 2_000
        raise TargetError("HTTP 503", retryable=True, retry_after_seconds=300)


def test_a_run_claimed_before_a_resume_during_its_staging_holds_nothing_once_done() -> None:
    # A review: the run claimed during its staging records its instant as its start, after
    # the resume; `hold` took it for current and held the gate for its dropped retry. (A
    # worker clock ahead of the API's still can: AWS keeps them within milliseconds.)
    twins = FailingSixty()
    twins.job = twins.create(
        schedule={"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 900_000)},
        payload={"seconds": 2},
        overlap="allow",
        stage_seconds=10,
        retry={"max_attempts": 2, "backoff_seconds": 1},
    )
    twins.at(70, lambda: twins.service.update("t", twins.job, {"overlap": "skip"}))
    twins.run_for(500)

    statuses = twins.statuses_s(twins.job)
    assert statuses[60] == RunStatus.FAILED  # its retry was dropped by the pause: not retried
    skipped = [s for s in range(120, 420, 60) if statuses.get(s) == RunStatus.SKIPPED]
    assert not skipped, f"skipped with nothing of the job running: {skipped}"
