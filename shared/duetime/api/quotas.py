"""Per-tenant quotas of the HTTP API: minimum rate interval, submissions per second, active
recurring jobs.

The submission rate is a token bucket per tenant kept in the Lambda container, so it is
approximate: N warm containers admit up to N times the rate. The global cap is API Gateway's
stage throttling (infra); this bucket stops one tenant from taking a container's whole share.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from duetime.config import Env
from duetime.domain.errors import COUNT_QUOTA_RETRY_AFTER_SECONDS, QuotaExceeded
from duetime.domain.jobs import JobSpec
from duetime.domain.schedule import Rate


class QuotaEnv:
    """Environment variable names of the quotas (defined in duetime.config.Env)."""

    MIN_RATE_SECONDS = Env.MIN_RATE_SECONDS
    SUBMISSIONS_PER_SECOND = Env.SUBMISSIONS_PER_SECOND
    SUBMISSION_BURST = Env.SUBMISSION_BURST
    MAX_ACTIVE_RECURRING_JOBS = Env.MAX_ACTIVE_RECURRING_JOBS


@dataclass(frozen=True)
class Quotas:
    min_rate_seconds: int = 1
    submissions_per_second: float = 50.0
    submission_burst: int = 100
    max_active_recurring_jobs: int = 1000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Quotas:
        """Read once at cold start; a malformed value fails loudly here."""
        env = os.environ if environ is None else environ

        def number(name: str, default: float, low: float, high: float, whole: bool) -> float:
            raw = env.get(name, "").strip() or str(default)
            try:
                value = int(raw) if whole else float(raw)
            except ValueError:
                value = math.nan
            if not low <= value <= high:  # NaN fails too
                kind = "whole number" if whole else "number"
                raise RuntimeError(f"{name} must be a {kind} from {low} to {high}: {raw!r}")
            return value

        return cls(
            min_rate_seconds=int(number(QuotaEnv.MIN_RATE_SECONDS, 1, 1, 86_400, True)),
            submissions_per_second=number(
                QuotaEnv.SUBMISSIONS_PER_SECOND, 50.0, 0.001, 100_000, False
            ),
            submission_burst=int(number(QuotaEnv.SUBMISSION_BURST, 100, 1, 1_000_000, True)),
            max_active_recurring_jobs=int(
                number(QuotaEnv.MAX_ACTIVE_RECURRING_JOBS, 1000, 1, 10_000_000, True)
            ),
        )


def check_min_rate(spec: JobSpec, quotas: Quotas) -> None:
    schedule = spec.schedule
    if isinstance(schedule, Rate) and schedule.seconds < quotas.min_rate_seconds:
        raise QuotaExceeded(
            f"rate_seconds must be at least {quotas.min_rate_seconds} for this deployment",
            COUNT_QUOTA_RETRY_AFTER_SECONDS,
            field="schedule.rate_seconds",
        )


@dataclass
class _Bucket:
    tokens: float
    at: float  # clock reading of the last refill


class SubmissionLimiter:
    """A token bucket per tenant: `rate` tokens a second, at most `burst` saved up.

    Kept in memory for the container's life; the least recently used buckets are forgotten
    beyond `max_tenants` (a forgotten tenant starts again with a full bucket)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_tenants: int = 10_000,
    ) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._max_tenants = max_tenants
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, tenant: str) -> None:
        """Spend one token or raise QuotaExceeded with the seconds until one is available."""
        with self._lock:
            now = self._clock()
            bucket = self._buckets.pop(tenant, None) or _Bucket(self._burst, now)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
            bucket.at = now
            self._buckets[tenant] = bucket
            if len(self._buckets) > self._max_tenants:
                self._buckets.popitem(last=False)
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return
            wait = (1 - bucket.tokens) / self._rate
        raise QuotaExceeded(
            f"more than {self._rate:g} submissions a second (burst {self._burst:g})",
            max(1, math.ceil(wait)),
        )
