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
