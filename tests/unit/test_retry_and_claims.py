"""Retry backoff (full jitter) and the run claim rule, as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.domain.jobs import RetryPolicy
from duetime.domain.retry import MAX_RETRY_AFTER_MS, backoff_ms, retry_delay_ms, should_retry
from duetime.domain.runs import (
    CLOCK_SKEW_ALLOWANCE_MS,
    ClaimOutcome,
    Lease,
    Run,
    RunClaim,
    RunStatus,
    claimed_run,
    decide_claim,
)

POLICY = RetryPolicy(max_attempts=4, backoff_seconds=2, max_backoff_seconds=10)


@given(attempt=st.integers(1, 30), jitter=st.floats(0, 0.999999))
def test_backoff_stays_within_the_exponential_ceiling(attempt: int, jitter: float) -> None:
    ceiling_ms = min(10_000, 2_000 * 2 ** (attempt - 1))
    assert 0 <= backoff_ms(POLICY, attempt, jitter) <= ceiling_ms


def test_backoff_grows_exponentially_then_caps() -> None:
    assert [backoff_ms(POLICY, a, 0.5) for a in (1, 2, 3, 4)] == [1000, 2000, 4000, 5000]


def test_jitter_outside_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError):
        backoff_ms(POLICY, 1, 1.0)


def test_a_target_s_retry_after_delays_the_retry_at_least_that_long_up_to_sqs_s_limit() -> None:
    # A receiver's `Retry-After` was ignored: with no backoff, three attempts in one second
    # against a receiver asking for ten (until 2026-11-30; a new user's walk, round two).
    none = RetryPolicy(max_attempts=3, backoff_seconds=0, max_backoff_seconds=0)
    assert retry_delay_ms(none, 1, 0.5, None) == 0
    assert retry_delay_ms(none, 1, 0.5, 10_000) == 10_000
    assert retry_delay_ms(none, 1, 0.5, 3_600_000) == MAX_RETRY_AFTER_MS == 900_000
    slow = RetryPolicy(max_attempts=3, backoff_seconds=60, max_backoff_seconds=60)
    assert retry_delay_ms(slow, 1, 0.5, 10_000) == 30_000  # the backoff, when longer


def test_retry_until_attempts_run_out_unless_not_retryable() -> None:
    assert [should_retry(POLICY, a, True) for a in (1, 2, 3, 4)] == [True, True, True, False]
    assert not should_retry(POLICY, 1, False)


def claim(attempt: int = 1, message: str = "m1", receive: int = 1, now: int = 1000) -> RunClaim:
    return RunClaim("t", "j", 0, attempt, Lease(message, receive, now + 500), now, 0, 99)


def run(status: RunStatus, attempt: int = 1, lease: Lease | None = None) -> Run:
    return Run("t", "j", 0, status, attempt, lease=lease)


LIVE = Lease("m1", 1, 5000)


@pytest.mark.parametrize(
    ("existing", "request_", "expected"),
    [
        (None, claim(), ClaimOutcome.CLAIMED),
        (run(RunStatus.SUCCEEDED), claim(), ClaimOutcome.DONE),
        (run(RunStatus.FAILED, 3), claim(4), ClaimOutcome.DONE),
        (run(RunStatus.RETRYING, 1), claim(2), ClaimOutcome.CLAIMED),
        (run(RunStatus.RETRYING, 2), claim(2), ClaimOutcome.DONE),
        (run(RunStatus.RUNNING, 2, LIVE), claim(1), ClaimOutcome.DONE),
        (run(RunStatus.RUNNING, 1, LIVE), claim(1, "m2"), ClaimOutcome.BUSY),
        # a redelivery of the holder's message (SQS took its visibility back) while the run's
        # lease is live: the holder may well be running it
        (run(RunStatus.RUNNING, 1, LIVE), claim(1, "m1", receive=2), ClaimOutcome.BUSY),
        # a claim finds itself (its write landed but answered 500, and was retried)
        (
            run(RunStatus.RUNNING, 1, LIVE),
            claim(1, "m1", receive=1, now=4500),
            ClaimOutcome.CLAIMED,
        ),
        # the same message and receive count from another delivery (another instant): busy
        (run(RunStatus.RUNNING, 1, LIVE), claim(1, "m1", receive=1), ClaimOutcome.BUSY),
        # the attempt is abandoned (its holder killed or dead) only once the lease's deadline
        # is past by the clock-skew allowance, whichever message comes
        (run(RunStatus.RUNNING, 1, LIVE), claim(1, "m2", now=5000), ClaimOutcome.BUSY),
        (
            run(RunStatus.RUNNING, 1, LIVE),
            claim(1, "m2", now=5000 + CLOCK_SKEW_ALLOWANCE_MS),
            ClaimOutcome.ABANDONED,
        ),
        (
            run(RunStatus.RUNNING, 1, LIVE),
            claim(1, "m1", receive=2, now=5000 + CLOCK_SKEW_ALLOWANCE_MS),
            ClaimOutcome.ABANDONED,
        ),
        (run(RunStatus.RUNNING, 1, None), claim(1, "m2"), ClaimOutcome.ABANDONED),
        (run(RunStatus.RUNNING, 1, LIVE), claim(2, "m3"), ClaimOutcome.BUSY),
    ],
)
def test_claim_rule(existing: Run | None, request_: RunClaim, expected: ClaimOutcome) -> None:
    assert decide_claim(existing, request_) == expected


def test_a_claim_of_an_attempt_already_recorded_replaces_its_entry() -> None:
    first = claimed_run(None, claim())
    again = claimed_run(first, claim(1, "m1", receive=2, now=2000))
    assert [(a.number, a.started_ms) for a in again.attempts] == [(1, 2000)]
    assert again.version == first.version + 1
