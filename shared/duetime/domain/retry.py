"""Retry policy: exponential backoff with full jitter (AWS Architecture Blog, 2015)."""

from __future__ import annotations

from duetime.domain.jobs import RetryPolicy


def should_retry(policy: RetryPolicy, attempt: int, retryable: bool) -> bool:
    return retryable and attempt < policy.max_attempts


def backoff_ms(policy: RetryPolicy, attempt: int, jitter: float) -> int:
    """Delay before attempt `attempt + 1`: uniform over [0, min(cap, base * 2**(attempt-1))].

    `jitter` is a number in [0, 1) supplied by the caller so the policy stays pure.
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError("jitter must be in [0, 1)")
    ceiling = min(policy.max_backoff_seconds, policy.backoff_seconds * 2 ** (attempt - 1))
    return int(ceiling * jitter * 1000)


# The longest a target's Retry-After holds a retry back: SQS's longest message delay.
MAX_RETRY_AFTER_MS = 900_000


def retry_delay_ms(
    policy: RetryPolicy, attempt: int, jitter: float, retry_after_ms: int | None
) -> int:
    """Delay before attempt `attempt + 1`: the backoff, or the target's Retry-After (429, 503)
    when longer, up to MAX_RETRY_AFTER_MS (it was ignored until 2026-11-30)."""
    wait = backoff_ms(policy, attempt, jitter)
    return max(wait, min(retry_after_ms or 0, MAX_RETRY_AFTER_MS))


def longest_retry_wait_ms(policy: RetryPolicy) -> int:
    """The longest a retry of `policy` can be held back: its backoff's cap, or a target's
    Retry-After (the overlap gate counts a retrying run active that long)."""
    return max(int(policy.max_backoff_seconds * 1000), MAX_RETRY_AFTER_MS)
