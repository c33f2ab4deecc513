"""The HTTP API's per-tenant rates (their values: duetime.settings.Quotas): of submissions, and
of every request with a token, reads included. The other quotas, the minimum rate interval and
the active recurring jobs, are rules of the job service (duetime.services.jobs); these are
throttling, like API Gateway's, so they stay at the door.

Each rate is a token bucket per tenant kept in the Lambda container, so it is approximate: N
warm containers admit up to N times the rate. The global cap is API Gateway's stage
throttling (infra), shared by every tenant; these buckets stop one tenant from taking a
container's whole share.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from duetime.domain.errors import QuotaExceeded


@dataclass
class _Bucket:
    tokens: float
    at: float  # clock reading of the last refill


class TenantLimiter:
    """A token bucket per tenant: `rate` tokens a second, at most `burst` saved up.

    Kept in memory for the container's life; beyond `max_tenants` a bucket is forgotten (a
    forgotten tenant starts again with a full bucket): the least recently used one that is
    full by now, so nothing is lost, else the one nearest full. Until 2026-11-30 the least
    recently used went, and a tenant's debt (a backfill's runs, up to hours of the rate)
    was wiped by 10,000 other tenants' requests (an outside security audit)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_tenants: int = 10_000,
        what: str = "submissions",
    ) -> None:
        self._what = what
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._max_tenants = max_tenants
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, tenant: str) -> None:
        """Spend one token or raise QuotaExceeded with the seconds until one is available."""
        with self._lock:
            bucket = self._refilled(tenant)
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return
            wait = (1 - bucket.tokens) / self._rate
        raise QuotaExceeded(
            f"more than {self._rate:g} {self._what} a second (burst {self._burst:g})",
            max(1, math.ceil(wait)),
        )

    def charge(self, tenant: str, tokens: int) -> None:
        """Spend `tokens` more after a `take` let a request in (a backfill's other runs): the
        bucket may go below zero, and the tenant's next submissions wait until it refills."""
        with self._lock:
            self._refilled(tenant).tokens -= tokens

    def _refilled(self, tenant: str) -> _Bucket:
        """The tenant's bucket as of now (the lock held)."""
        now = self._clock()
        bucket = self._buckets.pop(tenant, None) or _Bucket(self._burst, now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
        bucket.at = now
        self._buckets[tenant] = bucket
        if len(self._buckets) > self._max_tenants:
            del self._buckets[self._forgettable(now)]
        return bucket

    def _forgettable(self, now: float) -> str:
        """The bucket to forget (the lock held): not the one just used (the last). The oldest
        is full but for a tenant in debt or in a burst: the search ends there, mostly."""
        others = itertools.islice(self._buckets.items(), len(self._buckets) - 1)
        nearest, most = "", -math.inf
        for name, bucket in others:
            level = bucket.tokens + (now - bucket.at) * self._rate
            if level >= self._burst:
                return name
            if level > most:
                nearest, most = name, level
        return nearest
