"""In-memory twins of the stores and the queue: the readable reference implementation.

They honour the same contracts as the AWS adapters (tests/integration/test_contracts.py runs
one suite against both) and let the core be exercised without an emulator.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from duetime.config import queue_key
from duetime.domain.jobs import Job, JobStatus, Priority, Runtime
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.domain.runs import (
    ClaimOutcome,
    Run,
    RunClaim,
    RunOutcome,
    claimed_run,
    decide_claim,
    finished_run,
)
from duetime.domain.timers import PartitionState, StuckTimer, SweepState, Timer, shard_of
from duetime.ports import ConditionFailed, Delivery, Page


class MemoryJobStore:
    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], Job] = {}
        self._keys: dict[tuple[str, str], tuple[str, str]] = {}
        self._recurring: dict[str, int] = {}  # active recurring jobs per tenant
        self._lock = threading.Lock()

    def claim_key(
        self, tenant: str, key: str, job_id: str, fingerprint: str, expires_at: int
    ) -> tuple[str, str] | None:
        with self._lock:
            existing = self._keys.get((tenant, key))
            if existing is None:
                self._keys[(tenant, key)] = (job_id, fingerprint)
            return existing

    def create(self, job: Job) -> None:
        with self._lock:
            if (job.tenant, job.id) in self._jobs:
                raise ConditionFailed(f"job {job.id} exists")
            self._jobs[(job.tenant, job.id)] = job

    def get(self, tenant: str, job_id: str) -> Job | None:
        return self._jobs.get((tenant, job_id))

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        return {job_id: self._jobs[(t, job_id)] for t, job_id in keys if (t, job_id) in self._jobs}

    def list(self, tenant: str, limit: int, cursor: str | None) -> Page[Job]:
        with self._lock:  # iterating while another thread inserts would raise
            ids = sorted((i for t, i in self._jobs if t == tenant), reverse=True)
        if cursor is not None:
            ids = [i for i in ids if i < cursor]
        page = ids[:limit]
        more = len(ids) > limit
        return Page([self._jobs[(tenant, i)] for i in page], page[-1] if more and page else None)

    def replace(self, job: Job, *, expected: Job) -> None:
        with self._lock:
            current = self._jobs.get((job.tenant, job.id))
            if (
                current is None
                or current.status != expected.status
                or current.generation != expected.generation
            ):
                raise ConditionFailed(f"job {job.id} changed")
            self._jobs[(job.tenant, job.id)] = job

    def scan_active(self, segment: int, segments: int) -> Iterator[Job]:
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            active = job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED)
            if active and zlib.crc32(job.id.encode()) % segments == segment:
                yield job

    def reserve_recurring(self, tenant: str, limit: int) -> bool:
        with self._lock:
            if self._recurring.get(tenant, 0) >= limit:
                return False
            self._recurring[tenant] = self._recurring.get(tenant, 0) + 1
            return True

    def release_recurring(self, tenant: str) -> None:
        with self._lock:
            self._recurring[tenant] = max(0, self._recurring.get(tenant, 0) - 1)

    def set_recurring_count(self, tenant: str, count: int) -> None:
        with self._lock:
            self._recurring[tenant] = count

    def recurring_count(self, tenant: str) -> int:
        return self._recurring.get(tenant, 0)


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

    def find(self, timers: Sequence[Timer]) -> builtins.list[Timer]:
        with self._lock:
            found = (
                self._timers.get((t.bucket, self.shard_of(t.job_id)), {}).get(t.sort_key)
                for t in timers
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
            self._stuck[(stuck.shard, stuck.timer.sort_key)] = stuck

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

    def unpark(self, stuck: StuckTimer) -> None:
        with self._lock:
            current = self._stuck.get((stuck.shard, stuck.timer.sort_key))
            if current == stuck:
                del self._stuck[(stuck.shard, stuck.timer.sort_key)]

    def count(self) -> int:
        return sum(len(p) for p in self._timers.values())


class MemoryRunStore:
    def __init__(self) -> None:
        self._runs: dict[tuple[str, int], Run] = {}
        self._lock = threading.Lock()

    def claim(self, claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        with self._lock:
            existing = self._runs.get((claim.job_id, claim.scheduled_ms))
            outcome = decide_claim(existing, claim)
            if outcome != ClaimOutcome.CLAIMED:
                return outcome, existing
            run = claimed_run(existing, claim)
            self._runs[(claim.job_id, claim.scheduled_ms)] = run
            return outcome, run

    def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
        with self._lock:
            current = self._runs.get((run.job_id, run.scheduled_ms))
            if current is None or current.version != run.version:
                return None
            done = finished_run(run, outcome)
            self._runs[(run.job_id, run.scheduled_ms)] = done
            return done

    def get(self, job_id: str, scheduled_ms: int) -> Run | None:
        return self._runs.get((job_id, scheduled_ms))

    def get_many(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Run]:
        return {k: self._runs[k] for k in keys if k in self._runs}

    def list(self, job_id: str, limit: int, cursor: str | None) -> Page[Run]:
        with self._lock:  # iterating while another thread claims would raise
            times = sorted((s for j, s in self._runs if j == job_id), reverse=True)
        if cursor is not None:
            times = [s for s in times if s < int(cursor)]
        page = times[:limit]
        more = len(times) > limit
        next_cursor = str(page[-1]) if more and page else None
        return Page([self._runs[(job_id, s)] for s in page], next_cursor)

    def all(self) -> builtins.list[Run]:  # `list` is the method above in this scope
        return list(self._runs.values())


@dataclass
class _Stored:
    message_id: str
    body: str
    visible_at_ms: int
    receive_count: int = 0
    receipt: str = ""


class MemoryQueue:
    """Queues per runtime × priority with delays, visibility timeouts and dead letters."""

    def __init__(
        self,
        clock: Callable[[], int],
        visibility_timeout_seconds: int = 30,
        auth: MessageAuth | None = None,
    ) -> None:
        self._clock = clock
        # Messages are signed as the SQS adapter signs them; by default with a key of this
        # twin's own (give the executor `queue.auth`).
        self.auth = auth or MessageAuth.ephemeral()
        self._visibility_ms = visibility_timeout_seconds * 1000
        self._queues: dict[str, list[_Stored]] = {
            queue_key(r, p): [] for r in Runtime for p in Priority
        }
        self.dead: dict[str, list[tuple[RunMessage, str]]] = {k: [] for k in self._queues}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        now = self._clock()
        with self._lock:
            for message, delay in messages:
                if not 0 <= delay <= 900:
                    raise ValueError(f"delay {delay} outside 0..900")
                body = self.auth.seal(message)
                stored = _Stored(f"m{next(self._ids)}", body, now + delay * 1000)
                self._queues[queue_key(message.runtime, message.priority)].append(stored)

    def send_dead(self, message: RunMessage, reason: str, *, signed: bool = True) -> None:
        with self._lock:
            self.dead[queue_key(message.runtime, message.priority)].append((message, reason))

    def receive(
        self,
        runtime: Runtime,
        priority: Priority,
        max_messages: int,
        wait_seconds: int,
        visibility_seconds: int | None = None,
    ) -> list[Delivery]:
        now = self._clock()
        visibility_ms = (
            self._visibility_ms if visibility_seconds is None else visibility_seconds * 1000
        )
        key = queue_key(runtime, priority)
        out: list[Delivery] = []
        with self._lock:
            for stored in self._queues[key]:
                if len(out) == max_messages:
                    break
                if stored.visible_at_ms <= now:
                    stored.receive_count += 1
                    stored.receipt = f"{stored.message_id}:{stored.receive_count}"
                    stored.visible_at_ms = now + visibility_ms
                    out.append(
                        Delivery(
                            stored.message_id,
                            stored.receipt,
                            stored.body,
                            stored.receive_count,
                            key,
                        )
                    )
        return out

    def delete(self, deliveries: Sequence[Delivery]) -> None:
        receipts = {d.receipt_handle for d in deliveries}
        with self._lock:
            for key, stored in self._queues.items():
                self._queues[key] = [s for s in stored if s.receipt not in receipts]

    def change_visibility(self, delivery: Delivery, seconds: int) -> None:
        with self._lock:
            for stored in self._queues[delivery.queue]:
                if stored.receipt == delivery.receipt_handle:
                    stored.visible_at_ms = self._clock() + seconds * 1000

    def visibility_times(self) -> list[tuple[int, int]]:
        """(visible at, due) of every stored message: when SQS would release it."""
        with self._lock:
            return [
                (s.visible_at_ms, RunMessage.from_json(s.body).due_ms)
                for queue in self._queues.values()
                for s in queue
            ]

    def depth(self) -> int:
        return sum(len(q) for q in self._queues.values())
