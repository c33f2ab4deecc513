"""`buffer_one` and `skip` jobs changed while an occurrence waits: a pause, a resume, a cancel
or a re-arming PATCH drops the waiting occurrence with the rest (docs/api.md, "Overlapping
runs"), and the job's next occurrences start on their instants once no run of it is active.

Found by an outside audit (2026-11-30): the gate outlived those changes. The holder's release
handed it to the dropped occurrence, whose message the worker then dropped: nothing ran for
three minutes. An occurrence buffered before a pause ran after the resume. A dropped one stayed
`buffered` for good. The gate now carries the job's generation."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.jobs import parse_job_spec
from duetime.domain.runs import RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_overlap import T0, OverlapTwins


@dataclass
class Twins(OverlapTwins):
    """OverlapTwins whose handler target sleeps `payload.seconds` (failing when
    `payload.fail`), and where `at` acts on the service at an instant."""

    started: list[tuple[int, int, int]] = field(default_factory=list)  # occurrence, attempt, at
    hooks: dict[int, list[Callable[[], Any]]] = field(default_factory=dict)

    def create(self, **body: Any) -> str:
        spec = {"target": {"type": "handler", "name": "duetime.sleep"}, **body}
        return self.service.create("t", parse_job_spec(spec)).id

    def at(self, seconds: int, action: Callable[[], Any]) -> None:
        self.hooks.setdefault(T0 + seconds * 1000, []).append(action)

    def execute(self, target: Target, invocation: Invocation) -> None:
        self.started.append((invocation.scheduled_ms - T0, invocation.attempt, self.clock.now - T0))
        payload = invocation.payload if isinstance(invocation.payload, dict) else {}
        end = self.clock.now + int(payload.get("seconds", 0) * 1000)
        while self.clock.now < end:
            self.clock.now += 1000
            self.work()
        if payload.get("fail"):
            raise TargetError("it failed", retryable=True)

    def work(self) -> None:
        for instant in sorted(i for i in self.hooks if i <= self.clock.now):
            for action in self.hooks.pop(instant):
                action()
        super().work()

    def statuses_s(self, job_id: str) -> dict[int, RunStatus]:
        """The runs' statuses by their occurrence, in seconds after T0."""
        return {(ms - T0) // 1000: status for ms, status in self.statuses(job_id).items()}

    def start_of(self, occurrence_s: int) -> int | None:
        found = [at for o, attempt, at in self.started if o == occurrence_s * 1000 and attempt == 1]
        return found[0] // 1000 if found else None


def every_ten_seconds(**body: Any) -> dict[str, Any]:
    """15-second runs every 10 s: +10 runs until +25, +20 waits behind it."""
    schedule = {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 300_000)}
    return {"schedule": schedule, "payload": {"seconds": 15}, "overlap": "buffer_one", **body}


def test_a_pause_and_resume_drops_the_waiting_occurrence_and_the_next_starts_on_time() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds())
    twins.at(22, lambda: twins.service.pause("t", job))
    twins.at(23, lambda: twins.service.resume("t", job))

    twins.run_for(120)

    assert twins.start_of(20) is None  # dropped by the pause
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED  # not `buffered` for good
    assert twins.start_of(30) == 30  # nothing of the job runs from +25 (it waited 180 s)
    assert twins.statuses_s(job)[40] == RunStatus.SUCCEEDED


def test_a_re_arming_patch_drops_the_waiting_occurrence_and_the_next_starts_on_time() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds())
    new = {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}
    twins.at(22, lambda: twins.service.update("t", job, {"schedule": new, "payload": {}}))

    twins.run_for(120)

    assert twins.start_of(20) is None
    assert [twins.start_of(s) for s in (30, 40, 50)] == [30, 40, 50]


def test_an_occurrence_buffered_before_a_pause_never_runs_after_the_resume() -> None:
    twins = Twins()
    job = twins.create(
        **every_ten_seconds(
            payload={"seconds": 15, "fail": True},
            retry={"max_attempts": 2, "backoff_seconds": 20},
        )
    )
    twins.at(26, lambda: twins.service.update("t", job, {"payload": {"seconds": 2}}))
    twins.at(27, lambda: twins.service.pause("t", job))
    twins.at(28, lambda: twins.service.resume("t", job))

    twins.run_for(120)

    assert twins.start_of(20) is None  # buffered before the pause
    assert [twins.start_of(s) for s in (30, 40)] == [30, 40]  # the dead holder holds nothing


def test_a_cancel_ends_the_waiting_occurrence_and_frees_the_gate() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds())
    twins.at(22, lambda: twins.service.cancel("t", job))

    twins.run_for(60)

    assert twins.statuses_s(job) == {10: RunStatus.SUCCEEDED, 20: RunStatus.SKIPPED}
    gate = twins.jobs.gate("t", job)
    assert (gate.holder_ms, gate.buffered_ms) == (None, None)


def test_a_job_left_alone_still_buffers_one_and_runs_it() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds())

    twins.run_for(60)

    assert twins.start_of(20) == 25  # buffered behind +10, started when it ended
    assert RunStatus.BUFFERED not in twins.statuses_s(job).values()


@pytest.mark.parametrize("change", ["cancel", "pause"])
def test_a_change_while_the_holder_waits_for_its_retry_ends_the_waiting_occurrence(
    change: str,
) -> None:
    # The holder's retry, dropped by the cancel, ended it `failed` without freeing the gate:
    # the waiting occurrence showed `buffered` until its record's TTL (an outside lifecycle
    # audit, 2026-11-30).
    twins = Twins()
    job = twins.create(
        **every_ten_seconds(
            payload={"seconds": 2, "fail": True},
            retry={"max_attempts": 3, "backoff_seconds": 30},
        )
    )
    twins.at(22, lambda: getattr(twins.service, change)("t", job))

    twins.run_for(120)

    statuses = twins.statuses_s(job)
    assert statuses[10] == RunStatus.FAILED  # its retry dropped by the change
    assert statuses[20] == RunStatus.SKIPPED  # not `buffered` for good
    gate = twins.jobs.gate("t", job)
    assert (gate.holder_ms, gate.buffered_ms) == (None, None)


class _Died(BaseException):
    """The worker process dies (an out-of-memory kill): no outcome, no delete."""


@pytest.mark.parametrize("change", ["cancel", "pause"])
def test_an_occurrence_buffered_behind_a_holder_that_died_before_its_claim_ends_skipped(
    change: str,
) -> None:
    """The holder's worker died between its gate write and its claim, and the job was then
    cancelled or paused: its message, back after the visibility timeout, finds no record, and
    frees the gate, so the occurrence buffered behind it ends `skipped` (until 2026-12-01 it
    stayed `buffered` for good; an outside fault audit, round twelve)."""
    twins = Twins()
    job = twins.create(
        schedule={"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 200_000)},
        overlap="buffer_one",
        payload={"seconds": 15},
    )
    claim = twins.runs.claim

    def dies_at_the_first_claim(wanted: Any) -> Any:
        twins.runs.claim = claim  # type: ignore[method-assign]
        raise _Died()

    twins.runs.claim = dies_at_the_first_claim  # type: ignore[method-assign]
    with contextlib.suppress(_Died):
        twins.run_for(15)  # +10's gate written, its claim never made
    twins.run_for(10)  # +20 is buffered behind it
    assert twins.statuses_s(job).get(20) == RunStatus.BUFFERED
    getattr(twins.service, change)("t", job)
    twins.run_for(900)  # +10's message comes back after the visibility timeout

    statuses = twins.statuses_s(job)
    assert statuses.get(20) == RunStatus.SKIPPED, statuses
    assert RunStatus.BUFFERED not in statuses.values()
