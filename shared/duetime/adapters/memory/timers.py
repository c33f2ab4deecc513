"""The in-memory TimerStore (duetime.ports): timers, the sweep's progress and stuck timers."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Sequence
from dataclasses import replace

from duetime.domain.timers import PartitionState, StuckTimer, SweepState, Timer, shard_of
from duetime.ports import ConditionFailed


class MemoryTimerStore:
    def __init__(self, shards: int = 8) -> None:
        self.shards = shards
        self._timers: dict[tuple[int, int], dict[str, Timer]] = {}
        self._partitions: dict[tuple[int, int], PartitionState] = {}
        self._states: dict[int, SweepState] = {}
        self._shard_count = 0
        self._stuck: dict[tuple[int, str], StuckTimer] = {}  # (shard, timer sort key)
        self._lock = threading.Lock()

    def shard_of(self, job_id: str) -> int:
        return shard_of(job_id, self.shards)

    def put(self, timers: Sequence[Timer]) -> None:
        with self._lock:
            for timer in timers:
                key = (timer.bucket, self.shard_of(timer.job_id))
                self._timers.setdefault(key, {})[timer.sort_key] = timer

    def find(self, timers: Sequence[Timer], *, anywhere: bool = False) -> builtins.list[Timer]:
        everywhere = range(self.shard_count()) if anywhere else None
        with self._lock:
            found = (
                self._timers.get((t.bucket, shard), {}).get(t.sort_key)
                for t in timers
                for shard in everywhere or [self.shard_of(t.job_id)]
            )
            return [t for t in found if t is not None]

    def read_due(
        self, minute: int, shard: int, after_key: str | None, before_ms: int, limit: int
    ) -> tuple[list[Timer], bool]:
        upper = f"{before_ms:013d}"
        with self._lock:  # iterating while another thread puts would raise
            partition = dict(self._timers.get((minute, shard), {}))
        keys = sorted(k for k in partition if (after_key is None or k > after_key) and k < upper)
        return [partition[k] for k in keys[:limit]], len(keys) > limit

    def shard_count(self) -> int:
        return max(self.shards, self._shard_count)

    def raise_shard_count(self, count: int) -> int:
        with self._lock:
            self._shard_count = max(self._shard_count, count)
        return self.shard_count()

    def sweep_states(self, shards: Sequence[int]) -> dict[int, SweepState]:
        return {s: self._states[s] for s in shards if s in self._states}

    def raise_horizon(self, shard: int, minute: int) -> SweepState:
        with self._lock:
            old = self._states.get(shard, SweepState(None, None))
            horizon = minute if old.horizon_minute is None else max(old.horizon_minute, minute)
            cursor = minute if old.cursor_minute is None else old.cursor_minute
            self._states[shard] = SweepState(cursor, horizon)
            return self._states[shard]

    def advance_cursor(self, shard: int, expected: int | None, minute: int) -> bool:
        with self._lock:
            state = self._states.get(shard, SweepState(None, None))
            if state.cursor_minute != expected:
                return False
            self._states[shard] = replace(state, cursor_minute=minute)
            return True

    def partition_states(
        self, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], PartitionState]:
        return {k: self._partitions[k] for k in keys if k in self._partitions}

    def acquire(
        self, minute: int, shard: int, owner: str, now_ms: int, lease_ms: int
    ) -> PartitionState | None:
        with self._lock:
            state = self._partitions.get((minute, shard), PartitionState(minute, shard))
            if state.complete:
                return None
            stalls = state.stalls
            if state.owner not in (None, owner):
                if state.lease_until_ms > now_ms:
                    return None
                stalls += 1  # its holder died without releasing it
            state = replace(state, owner=owner, lease_until_ms=now_ms + lease_ms, stalls=stalls)
            self._partitions[(minute, shard)] = state
            return state

    def advance(
        self,
        minute: int,
        shard: int,
        owner: str,
        watermark: str | None,
        *,
        complete: bool = False,
        release: bool = False,
        stalls: int | None = None,
    ) -> bool:
        with self._lock:
            state = self._partitions.get((minute, shard))
            if state is None or state.owner != owner:
                return False
            self._partitions[(minute, shard)] = replace(
                state,
                # None means no new progress: keep the watermark (as the DynamoDB adapter does).
                watermark=state.watermark if watermark is None else watermark,
                complete=complete,
                owner=None if release else owner,
                lease_until_ms=0 if release else state.lease_until_ms,
                stalls=state.stalls if stalls is None else stalls,
            )
            return True

    def park(self, stuck: StuckTimer, *, replacing: StuckTimer | None = None) -> None:
        with self._lock:
            key = (stuck.shard, stuck.timer.sort_key)
            if replacing is not None and self._stuck.get(key) != replacing:
                raise ConditionFailed(f"stuck timer {stuck.timer.job_id} changed or left")
            self._stuck[key] = stuck

    def parked_due(self, shard: int, now_ms: int, limit: int) -> list[StuckTimer]:
        with self._lock:
            due = [
                s
                for (owner, _), s in self._stuck.items()
                if owner == shard and s.next_attempt_ms is not None and s.next_attempt_ms <= now_ms
            ]
        due.sort(key=lambda s: (s.next_attempt_ms or 0, s.timer.sort_key))
        return due[:limit]

    def stuck(self, shard: int) -> builtins.list[StuckTimer]:
        with self._lock:
            return sorted(
                (s for (owner, _), s in self._stuck.items() if owner == shard),
                # As the DynamoDB adapter's keys sort: quarantined, then by next attempt.
                key=lambda s: (not s.quarantined, s.next_attempt_ms or 0, s.timer.sort_key),
            )

    def quarantined(self, shard: int, limit: int) -> int:
        return min(limit, sum(1 for s in self.stuck(shard) if s.quarantined))

    def unpark(self, stuck: StuckTimer) -> None:
        with self._lock:
            current = self._stuck.get((stuck.shard, stuck.timer.sort_key))
            if current == stuck:
                del self._stuck[(stuck.shard, stuck.timer.sort_key)]

    def count(self) -> int:
        return sum(len(p) for p in self._timers.values())
