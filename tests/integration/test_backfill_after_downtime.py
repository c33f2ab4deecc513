"""A backfill after the sweep was down (an outside lifecycle audit, round seven): the catch-up
dropped the missed occurrences, those whose jittered start was still ahead included, and the
backfill took those for "on their way" and sent nothing: they never ran. Every occurrence
before the backfill now runs, once (a copy of one on its way makes one run with it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from duetime.domain.timeutil import rfc3339_ms
from duetime.services.backfill import Backfill
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins


@dataclass
class SweepDownTwins(Twins):
    """Twins whose sweep is down from `down_s` to `up_s` (seconds after T0)."""

    down_s: int = 100
    up_s: int = 700

    def work(self) -> None:
        if T0 + self.down_s * 1000 <= self.clock.now < T0 + self.up_s * 1000:
            real, self.coordinator.tick = self.coordinator.tick, lambda: None  # type: ignore[method-assign]
            try:
                super().work()
            finally:
                self.coordinator.tick = real  # type: ignore[method-assign]
        else:
            super().work()


@pytest.mark.parametrize(("catchup", "down"), [("latest", True), ("none", True), ("all", False)])
def test_every_occurrence_before_a_backfill_runs_once(catchup: str, down: bool) -> None:
    twins = SweepDownTwins() if down else SweepDownTwins(down_s=0, up_s=0)
    job = twins.create(
        schedule={"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 3600_000)},
        payload={"seconds": 1},
        jitter_seconds=600,
        catchup=catchup,
    )
    backfill = Backfill(twins.service, twins.runs, twins.queue, twins.settings, clock=twins.clock)
    body = {"from": rfc3339_ms(T0), "to": rfc3339_ms(T0 + 710_000)}
    twins.at(710, lambda: backfill.backfill("t", job, lambda: body))
    twins.run_for(2_000)  # past every jittered start

    first_attempts = Counter(o // 1000 for o, attempt, _ in twins.started if attempt == 1)
    assert [first_attempts[s] for s in range(60, 710, 60)] == [1] * 11
