"""A page whose chains' job read fails with a passing store error is split by tenant, its
one-offs first: out of the page's order. The hand-over's `done` must stay a prefix of the page
(the sweep's watermark is its last timer), or a hand-over stopping after the one-offs (its
deadline, or SQS not taking requests) moves the watermark past chain timers never handed over:
their occurrences never sent, their chains broken until the daily reconciler. Found by an
outside fault audit (round seven); fixed 2026-11-30."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms
from duetime.ports import QueueUnavailable, StoreError
from tests.integration.test_partitioned_sweep import T0, Twins

M = (T0 // MINUTE_MS + 5) * MINUTE_MS  # the minute swept


def interleaved() -> tuple[Twins, dict[str, int], dict[str, int]]:
    """One-offs at +2, +6, +10, +16 s; hourly chains of tenants a (+4, +12) and b (+8, +14)."""
    twins = Twins(shards=1)
    one_offs = {
        twins.submit({"at": rfc3339_ms(M + s * 1000)}, tenant="o"): M + s * 1000
        for s in (2, 6, 10, 16)
    }
    chains = {
        twins.submit({"rate_seconds": 3600, "start_at": rfc3339_ms(M + s * 1000)}, tenant=t): M
        + s * 1000
        for s, t in ((4, "a"), (8, "b"), (12, "a"), (14, "b"))
    }
    return twins, one_offs, chains


def throttle_first_chain_read(twins: Twins, then: Callable[[], None]) -> None:
    """The sweep's first jobs read (the chains of two tenants) fails, throttled past the SDK."""
    real = twins.jobs.get_many
    failed: list[bool] = []

    def get_many(keys: Any) -> Any:
        if not failed and len({tenant for tenant, _ in keys}) > 1:
            failed.append(True)
            then()
            raise StoreError("ProvisionedThroughputExceededException", transient=True)
        return real(keys)

    twins.jobs.get_many = get_many  # type: ignore[method-assign]


def sweep_a_while(twins: Twins) -> None:
    for _ in range(6):
        twins.sweeper.sweep_shard(0)
        twins.clock.now += 10_000


@pytest.mark.parametrize("stop", ["deadline", "sqs_unavailable", "none"])
def test_a_tenant_split_stopping_part_way_leaves_no_chain_timer_behind_the_watermark(
    stop: str,
) -> None:
    twins, one_offs, chains = interleaved()
    start = twins.clock.now = M - 50_000  # the sweep before the minute reads it (lookahead)

    def slow() -> None:  # the throttled read's retries took the sweep past its deadline
        if stop == "deadline":
            twins.clock.now = start + 46_000

    if stop != "none":
        throttle_first_chain_read(twins, slow)
    if stop == "sqs_unavailable":
        real_send = twins.queue.send
        sends: list[int] = []

        def send(messages: Any) -> Any:
            sends.append(len(messages))
            # 1: the group's one-offs; 2: the one-offs' part; 3: tenant a's chains
            if len(sends) == 3:
                raise QueueUnavailable("SQS did not take a batch: throttled", [])
            return real_send(messages)

        twins.queue.send = send  # type: ignore[method-assign]

    twins.sweeper.sweep_shard(0)
    twins.clock.now = max(twins.clock.now, start) + 20_000
    sweep_a_while(twins)
    sent = twins.sent()
    assert all(sent[(job, due)] >= 1 for job, due in one_offs.items())
    never = sorted((due - M) // 1000 for job, due in chains.items() if sent[(job, due)] == 0)
    assert never == [], f"chain occurrences never sent (s into the minute): {never}"

    twins.clock.now = M + 3_600_000 - 50_000  # and every chain goes on, an hour later
    sweep_a_while(twins)
    later = twins.sent()
    broken = [job for job, due in chains.items() if later[(job, due + 3_600_000)] == 0]
    assert broken == []
