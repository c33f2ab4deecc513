"""Runs the overlap gate lost track of, and changes that stranded a run. Found by an outside
lifecycle audit (round five); fixed 2026-11-30:

- a retry a target's `Retry-After` held back past the retry's backoff cap: the gate counted its
  run inactive, the next occurrence took it, and the retry was dropped as a late copy (its run
  `retrying` for good). The gate counts a retrying run active for the longest a retry can wait,
  and a run's retry is never taken for a copy;
- a `PATCH` from `allow` to `skip` or `buffer_one` while a run was active: the next occurrence
  ran beside it (the active run holds the gate now), and its retry was dropped as above;
- a change (not only a pause) between a buffered occurrence's hand-over and its start: the
  occurrence showed `buffered` for good (it ends `skipped`);
- a keyed run-now a pause dropped, repeated after the resume: it ran (it sends nothing now)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.messages import run_message
from duetime.domain.overlap import Admission, Gate
from duetime.domain.runs import Attempt, RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import StoreError
from duetime.services.overlap import OverlapGuard, unclaimed
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins, every_ten_seconds

HOLDER_S = 60  # the occurrence whose first attempt gets a 503 with Retry-After


@dataclass
class RetryAfterTwins(Twins):
    retry_after_s: float | None = 900.0

    def execute(self, target: Target, invocation: Invocation) -> None:
        if invocation.scheduled_ms == T0 + HOLDER_S * 1000 and invocation.attempt == 1:
            self.started.append((HOLDER_S * 1000, 1, self.clock.now - T0))
            self.clock.now += 2000
            self.work()
            raise TargetError("HTTP 503", retryable=True, retry_after_seconds=self.retry_after_s)
        super().execute(target, invocation)


def minutely(overlap: str) -> dict[str, Any]:
    """280 s runs every 60 s; the retry's backoff cap is 1 s (the gate counted a retrying run
    active 1 s + its grace after its attempt: ~450 s)."""
    return {
        "schedule": {"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 1_500_000)},
        "payload": {"seconds": 280},
        "timeout_seconds": 300,
        "retry": {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 1},
        "overlap": overlap,
    }


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_a_run_waiting_out_a_retry_after_holds_the_gate_and_its_retry_is_made(
    overlap: str,
) -> None:
    twins = RetryAfterTwins()
    job = twins.create(**minutely(overlap))
    twins.run_for(1_300)
    attempts = [a for o, a, _ in twins.started if o == HOLDER_S * 1000]
    others = sorted(at // 1000 for o, _, at in twins.started if o != HOLDER_S * 1000)
    assert twins.statuses_s(job)[HOLDER_S] == RunStatus.SUCCEEDED
    assert attempts == [1, 2]
    assert [at for at in others if 62 < at < 962] == []  # its retry is due at ~+962


def test_a_retry_after_within_the_backoff_window_is_made_as_before() -> None:
    twins = RetryAfterTwins(retry_after_s=100.0)
    job = twins.create(**minutely("skip"))
    twins.run_for(700)
    assert twins.statuses_s(job)[HOLDER_S] == RunStatus.SUCCEEDED
    assert [a for o, a, _ in twins.started if o == HOLDER_S * 1000] == [1, 2]


def test_a_patch_from_allow_to_skip_lets_the_active_run_hold_the_gate() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds(overlap="allow"))  # 15 s runs every 10 s
    twins.at(12, lambda: twins.service.update("t", job, {"overlap": "skip"}))
    twins.run_for(60)
    assert twins.start_of(10) == 10  # claimed under allow: runs until +25
    assert twins.start_of(20) is None
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED


def test_a_patch_from_allow_to_buffer_one_applies_from_the_next_run_and_strands_none() -> None:
    # The run claimed under `allow` releases no gate (its worker read `allow`): one buffered
    # behind it would wait for a later occurrence to hand it over (a review of this change),
    # so it holds none, and the next occurrence runs beside it (documented).
    twins = Twins()
    job = twins.create(**every_ten_seconds(overlap="allow"))
    twins.at(12, lambda: twins.service.update("t", job, {"overlap": "buffer_one"}))
    twins.run_for(120)
    assert (twins.start_of(10), twins.start_of(20)) == (10, 20)
    assert RunStatus.BUFFERED not in twins.statuses_s(job).values()


def test_a_re_arming_patch_to_skip_lets_no_retry_it_drops_hold_the_gate() -> None:
    # +10's retry is due at +27; one PATCH at +13 re-arms the job and sets `skip`: the retry
    # is dropped by the re-arm, so it holds nothing (the new chain's +20 was skipped until the
    # dropped retry's message came: a review of this change).
    twins = FirstAttemptOfTenFails()
    job = twins.create(
        **every_ten_seconds(
            overlap="allow",
            payload={"seconds": 2},
            retry={"max_attempts": 3, "backoff_seconds": 30},
        )
    )
    new = {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}
    twins.at(13, lambda: twins.service.update("t", job, {"schedule": new, "overlap": "skip"}))
    twins.run_for(60)
    assert [twins.start_of(s) for s in (20, 30, 40)] == [20, 30, 40]


@dataclass
class FirstAttemptOfTenFails(Twins):
    """+10's attempt 1 fails after `first_s` (its retry due at its backoff), its attempt 2
    takes `retry_s`; every other run takes the payload's seconds."""

    first_s: int = 2
    retry_s: int = 3

    def execute(self, target: Target, invocation: Invocation) -> None:
        if invocation.scheduled_ms == T0 + 10_000:
            self.started.append((10_000, invocation.attempt, self.clock.now - T0))
            for _ in range(self.first_s if invocation.attempt == 1 else self.retry_s):
                self.clock.now += 1000
                self.work()
            if invocation.attempt == 1:
                raise TargetError("HTTP 500", retryable=True)
            return
        super().execute(target, invocation)


@pytest.mark.parametrize("policy", ["skip", "buffer_one", None])
def test_the_retry_of_a_run_claimed_under_allow_is_made_after_a_patch_to_a_policy(
    policy: str | None,
) -> None:
    twins = FirstAttemptOfTenFails()
    job = twins.create(
        **every_ten_seconds(
            overlap="allow",
            payload={"seconds": 8},
            retry={"max_attempts": 3, "backoff_seconds": 30},
        )
    )
    if policy is not None:
        twins.at(13, lambda: twins.service.update("t", job, {"overlap": policy}))
    twins.run_for(120)
    assert twins.statuses_s(job)[10] == RunStatus.SUCCEEDED
    assert [a for o, a, _ in twins.started if o == 10_000] == [1, 2]


CHANGES: dict[str, Callable[[Twins, str], Any]] = {
    "pause": lambda twins, job: twins.service.pause("t", job),
    "jitter": lambda twins, job: twins.service.update("t", job, {"jitter_seconds": 1}),
    "schedule": lambda twins, job: twins.service.update(
        "t", job, {"schedule": {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}}
    ),
    "priority": lambda twins, job: twins.service.update("t", job, {"priority": "high"}),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_between_a_hand_over_and_its_start_ends_the_waiting_one_skipped(
    change: str,
) -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds())
    guard = twins.executor._overlap  # type: ignore[attr-defined]
    start = guard._start
    fired: list[int] = []

    def start_then_change(job_: Any, scheduled_ms: int) -> None:
        start(job_, scheduled_ms)  # +20's attempt 1 is queued, the gate names it holder
        if not fired:
            fired.append(scheduled_ms)
            CHANGES[change](twins, job)  # acknowledged before that message is handled

    guard._start = start_then_change
    twins.run_for(90)
    assert fired == [T0 + 20_000]
    assert twins.start_of(20) is None  # dropped by the change
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED


def hourly() -> dict[str, Any]:
    schedule = {"rate_seconds": 3600, "end_at": rfc3339_ms(T0 + 86_400_000)}
    return {"schedule": schedule, "payload": {"seconds": 1}}


@pytest.mark.parametrize("between", ["pause and resume", "nothing"])
def test_a_keyed_run_now_a_pause_dropped_is_not_sent_by_its_repeat_after_the_resume(
    between: str,
) -> None:
    twins = Twins()
    job = twins.create(**hourly())
    asked: list[int] = []

    def ask() -> None:
        asked.append(twins.service.run_now("t", job, idempotency_key="k"))
        if between != "nothing":
            twins.clock.now += 1  # acknowledged before the run is claimed: it drops it
            twins.service.pause("t", job)
            twins.clock.now += 1
            twins.service.resume("t", job)

    twins.at(5, ask)
    twins.at(20, lambda: asked.append(twins.service.run_now("t", job, idempotency_key="k")))
    twins.run_for(40)
    assert asked[1] == asked[0]  # the same run answered
    ran = [a for o, a, _ in twins.started if o == asked[0] - T0]
    assert ran == ([] if between != "nothing" else [1])


def test_a_retry_let_through_beside_the_holder_still_makes_the_gate_s_hand_over() -> None:
    # The holder finished without releasing, one waits behind it, and an older run's retry
    # (claimed before a PATCH) comes: it runs, and the buffered one is handed the gate and
    # started too (the retry returned before the hand-over: a review of this change).
    twins = Twins()
    job_id = twins.create(
        schedule={"rate_seconds": 3600}, payload={"seconds": 1}, overlap="buffer_one"
    )
    job = twins.jobs.get("t", job_id)
    assert job is not None
    twins.clock.now = now = T0 + 4 * 3600_000
    holder, buffered, retrying = T0 + 3 * 3600_000, T0 + 4 * 3600_000, T0 + 2 * 3600_000
    ttl = twins.settings.run_ttl_seconds
    twins.runs._runs[(job.id, holder)] = replace(  # type: ignore[attr-defined]
        unclaimed(job, holder, RunStatus.SUCCEEDED, now, ttl), attempt=1
    )
    twins.runs.record(unclaimed(job, buffered, RunStatus.BUFFERED, now, ttl, due_ms=buffered))
    attempt = Attempt(1, now - 11_000, 0, now - 10_000, "HTTP 500")
    twins.runs._runs[(job.id, retrying)] = replace(  # type: ignore[attr-defined]
        unclaimed(job, retrying, RunStatus.RETRYING, now, ttl), attempt=1, attempts=(attempt,)
    )
    gate = Gate(holder, now - 600_000, buffered, 0, job.generation)
    assert twins.jobs.put_gate("t", job.id, gate, now // 1000 + 3600)
    guard: OverlapGuard = twins.executor._overlap  # type: ignore[attr-defined]

    retry = replace(run_message(job, retrying), attempt=2, due_ms=now)
    assert guard.admit(job, retry, 30_000) == Admission.RUN

    assert twins.jobs.gate("t", job.id).holder_ms == buffered


def test_a_run_running_at_a_re_arming_patch_to_skip_holds_nothing_once_it_fails() -> None:
    # +10 runs when one PATCH at +13 re-arms the job and sets `skip`: it held the gate at the
    # new generation, so once it failed (+18) its retry, which the change drops, still counted
    # active until its message came (~+48) and the new chain's +20..+40 were skipped (a second
    # review of this change).
    twins = FirstAttemptOfTenFails(first_s=8, retry_s=1)
    retry = {"max_attempts": 3, "backoff_seconds": 30}
    job = twins.create(**every_ten_seconds(overlap="allow", payload={"seconds": 2}, retry=retry))
    new = {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}
    twins.at(13, lambda: twins.service.update("t", job, {"schedule": new, "overlap": "skip"}))
    twins.run_for(70)
    assert [twins.start_of(s) for s in (20, 30, 40)] == [20, 30, 40]


def test_buffer_one_set_again_after_allow_buffers_nothing_behind_a_run_that_releases_none() -> None:
    # buffer_one -> allow -> buffer_one while +10 waits for its retry: the trip through `allow`
    # left +10 named holder; its retry, claimed under `allow`, released nothing, and +30 was
    # buffered behind it until +40 came (an outside lifecycle audit, round six). The lift
    # clears the holder: +30 runs (beside the retry, as a PATCH to buffer_one documents).
    twins = FirstAttemptOfTenFails(retry_s=15)
    retry = {"max_attempts": 3, "backoff_seconds": 8, "max_backoff_seconds": 8}
    job = twins.create(**every_ten_seconds(retry=retry))
    twins.at(13, lambda: twins.service.update("t", job, {"overlap": "allow"}))
    twins.at(21, lambda: twins.service.update("t", job, {"overlap": "buffer_one"}))
    twins.run_for(120)
    # (Its retry is made. The twin's nested clock runs that attempt past its lease, so its
    # message, back meanwhile, fails it as abandoned and a third follows, as without a gate.)
    assert [a for o, a, _ in twins.started if o == 10_000][:2] == [1, 2]
    assert twins.start_of(30) == 30
    assert RunStatus.BUFFERED not in twins.statuses_s(job).values()


def starts_between(twins: Twins, first_s: int, last_s: int, besides_s: int) -> list[int]:
    """First attempts started within [first_s, last_s], but of occurrence `besides_s`."""
    return [
        at // 1000
        for o, a, at in twins.started
        if a == 1 and o != besides_s * 1000 and first_s * 1000 <= at <= last_s * 1000
    ]


@pytest.mark.parametrize("before", ["allow", "skip then allow"])
def test_a_patch_to_skip_holds_the_run_active_longest_even_behind_newer_ones(before: str) -> None:
    # +60 waits out a Retry-After of 900 s (to ~+962) behind five newer runs (+120..+360): the
    # PATCH held the newest of the latest five, not +60, and the next occurrences ran while it
    # was active (an outside lifecycle audit, round six).
    twins = RetryAfterTwins()
    job = twins.create(
        **{**minutely("skip" if before != "allow" else "allow"), "payload": {"seconds": 20}}
    )
    if before != "allow":
        twins.at(100, lambda: twins.service.update("t", job, {"overlap": "allow"}))
    twins.at(400, lambda: twins.service.update("t", job, {"overlap": "skip"}))
    twins.run_for(1_100)
    assert [a for o, a, _ in twins.started if o == HOLDER_S * 1000] == [1, 2]
    assert starts_between(twins, 401, 961, besides_s=HOLDER_S) == []


class Crash(BaseException):
    pass


@pytest.mark.parametrize("fault", ["throttled", "crash", None])
def test_a_patch_to_skip_sent_again_after_its_gate_write_failed_holds_the_gate(
    fault: str | None,
) -> None:
    # The job's write went through, the hold's gate write failed (a 5xx), and the client's
    # retry changed nothing: nothing held the gate, and +20 ran beside +10 (an outside fault
    # audit, round eight). A PATCH that changes nothing makes the policy's change again.
    twins = Twins()
    job = twins.create(**every_ten_seconds(overlap="allow"))  # 15 s runs every 10 s
    real = twins.jobs.put_gate
    failing = [bool(fault)]

    def put_gate(*args: Any, **kwargs: Any) -> Any:
        if failing.pop() if failing else False:
            if fault == "crash":
                raise Crash("the API function dies at the hold's gate write")
            raise StoreError("ProvisionedThroughputExceededException", transient=True)
        return real(*args, **kwargs)

    twins.jobs.put_gate = put_gate  # type: ignore[method-assign]

    def patch() -> None:
        with contextlib.suppress(Exception, Crash):
            twins.service.update("t", job, {"overlap": "skip"})
        twins.service.update("t", job, {"overlap": "skip"})  # the client's retry

    twins.at(12, patch)
    twins.run_for(60)
    assert twins.start_of(10) == 10  # claimed under allow: runs until +25
    assert twins.start_of(20) is None
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED


@pytest.mark.parametrize("change", ["pause and resume", "re-arm", "none"])
def test_one_buffered_behind_a_run_whose_retry_a_change_drops_starts_once_it_ends(
    change: str,
) -> None:
    # +10's attempt runs 15 s and fails at +25; a change at +13 drops its retry (due ~+175).
    # +20, of the changed job, was buffered behind it, and buffering stamped the job's new
    # generation on the gate: +10 then counted active while `retrying`, +20 waited for the
    # dropped retry's message and +30..+170 were skipped with nothing running (an outside
    # lifecycle audit, round seven). It holds only while it runs, as the gate before did.
    twins = FirstAttemptOfTenFails(first_s=15)
    retry = {"max_attempts": 2, "backoff_seconds": 300, "max_backoff_seconds": 300}
    job = twins.create(**every_ten_seconds(payload={"seconds": 3}, retry=retry))
    if change == "pause and resume":
        twins.at(13, lambda: twins.service.pause("t", job))
        twins.at(14, lambda: twins.service.resume("t", job))
    elif change == "re-arm":
        new = {"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 301_000)}
        twins.at(13, lambda: twins.service.update("t", job, {"schedule": new}))
    twins.run_for(200)

    started = twins.start_of(20)
    assert started is not None
    if change == "none":  # its retry is made, and +20 waits for it (as documented)
        assert [a for o, a, _ in twins.started if o == 10_000] == [1, 2]
        assert started > 170
    else:
        assert [a for o, a, _ in twins.started if o == 10_000] == [1]
        assert started <= 30
        assert twins.start_of(40) == 40
