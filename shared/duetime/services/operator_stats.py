"""The operators' view of the system (GET /admin/stats): the queues and the runs of the last
hour from a FiguresSource, and each shard's sweep lag from the timers store.

A shard's lag is how long ago its oldest unswept bucket minute began (`SweepState.cursor_minute`):
a healthy shard sweeps the current minute, so its lag stays under a minute and a few seconds;
a shard whose sweeps fail grows by a minute a minute. A shard never swept has no lag (None).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from duetime.clock import wall_ms
from duetime.domain.timeutil import MINUTE_MS
from duetime.ports import FiguresSource, SystemFigures, TimerStore


@dataclass(frozen=True)
class SystemStats:
    generated_ms: int
    figures: SystemFigures
    shard_lags: dict[int, int | None]  # seconds, by shard


def lag_seconds(cursor_minute: int | None, now_ms: int) -> int | None:
    if cursor_minute is None:
        return None
    return max(0, now_ms - cursor_minute * MINUTE_MS) // 1000


class OperatorStats:
    def __init__(
        self,
        figures: FiguresSource,
        timers: TimerStore,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._figures = figures
        self._timers = timers
        self._clock = clock

    def stats(self) -> SystemStats:
        now_ms = self._clock()
        shards = list(range(self._timers.shard_count()))
        states = self._timers.sweep_states(shards)
        lags = {
            shard: lag_seconds(states[shard].cursor_minute if shard in states else None, now_ms)
            for shard in shards
        }
        return SystemStats(now_ms, self._figures.read(now_ms), lags)
