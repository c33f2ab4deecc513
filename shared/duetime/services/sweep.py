"""The sweeper: hand the timers that fall due soon to SQS, with DelaySeconds = due − now.

Invoked once a minute. A sweep at time `now` reads every timer bucket from the global cursor
(the oldest minute that may still hold unswept timers) through minute(now) + lookahead, so a
missed tick is caught up by the next one. Each (bucket, shard) partition is swept under a
lease with a watermark: the sort key of the last timer handed to SQS. Progress is written
once per page of timers, never per timer.

Why a timer cannot slip between sweeps: the sweep first raises the global *horizon* (the
newest bucket any sweep has started reading), then queries with strongly consistent reads.
Whoever writes a timer (the API, or the sweeper continuing a recurring chain) reads the
horizon *after* the write; if it has reached the timer's bucket, the writer sends the
occurrence to SQS itself. Either the sweep's query sees the timer, or the writer sees the
sweep's horizon. Duplicates that this can produce share a run id and are absorbed by the
worker's claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from duetime.config import Settings
from duetime.domain.ids import minute_of
from duetime.domain.jobs import Job, JobStatus
from duetime.domain.timeutil import MINUTE_MS
from duetime.observability import Metric, count, logger, milliseconds
from duetime.ports import JobQueue, JobStore, Timer, TimerStore
from duetime.services.dispatch import Dispatcher

PAGE_SIZE = 500
# A sweep never looks back more than this many minutes in one invocation; a longer backlog
# (after an outage) is worked off by successive sweeps, oldest first.
MAX_MINUTES_PER_SWEEP = 180


@dataclass
class SweepReport:
    started_ms: int
    horizon_minute: int = 0
    partitions: int = 0
    partitions_busy: int = 0
    timers_read: int = 0
    messages_sent: int = 0
    skipped: int = 0  # cancelled, paused, stale chain, or missed and not caught up
    jobs_completed: int = 0
    pages: int = 0
    duration_ms: int = 0
    backlog_minutes: int = 0
    errors: list[str] = field(default_factory=list)


class Sweeper:
    def __init__(
        self,
        jobs: JobStore,
        timers: TimerStore,
        queue: JobQueue,
        settings: Settings,
        *,
        clock: Callable[[], int],
        parallelism: int = 8,
        lease_ms: int = 120_000,
        deadline_ms: int = 45_000,
    ) -> None:
        self._jobs = jobs
        self._timers = timers
        self._queue = queue
        self._settings = settings
        self._clock = clock
        self._parallelism = parallelism
        self._lease_ms = lease_ms
        self._deadline_ms = deadline_ms
        self._dispatcher = Dispatcher(jobs, timers, queue, settings, clock=clock)

    def sweep(self, owner: str | None = None) -> SweepReport:
        owner = owner or uuid.uuid4().hex
        now = self._clock()
        report = SweepReport(started_ms=now)
        wanted = minute_of(now) + self._settings.lookahead_minutes
        state = self._timers.raise_horizon(wanted)
        horizon = state.horizon_minute if state.horizon_minute is not None else wanted
        cursor = state.cursor_minute if state.cursor_minute is not None else wanted
        # Sweep our own horizon; a sweep whose clock runs ahead may have raised the global one
        # further, and its buckets are its own to sweep.
        last = min(wanted, horizon)
        first = max(cursor, last - MAX_MINUTES_PER_SWEEP + 1) if cursor <= last else last + 1
        report.horizon_minute = last
        report.backlog_minutes = max(0, last - cursor)
        minutes = list(range(first, last + 1))
        keys = [(m, s) for m in minutes for s in range(self._timers.shards)]
        states = self._timers.partition_states(keys)
        todo = [k for k in keys if not (k in states and states[k].complete)]
        report.partitions = len(todo)
        deadline = now + self._deadline_ms
        with ThreadPoolExecutor(max_workers=max(1, self._parallelism)) as pool:
            results = list(
                pool.map(lambda key: self._sweep_partition(key, owner, last, deadline), todo)
            )
        complete = {k for k in keys if k in states and states[k].complete}
        for key, partition in zip(todo, results, strict=True):
            report.timers_read += partition.timers_read
            report.messages_sent += partition.messages_sent
            report.skipped += partition.skipped
            report.jobs_completed += partition.jobs_completed
            report.pages += partition.pages
            report.errors += partition.errors
            if partition.busy:
                report.partitions_busy += 1
            if partition.complete:
                complete.add(key)
        self._advance_cursor(cursor, minutes, complete)
        report.duration_ms = self._clock() - now
        milliseconds(Metric.SWEEP_DURATION, report.duration_ms)
        count(Metric.TIMERS_ENQUEUED, report.messages_sent)
        count(Metric.SWEEP_BACKLOG_MINUTES, report.backlog_minutes)
        logger.info("sweep finished", extra={"sweep": report.__dict__})
        return report

    def _advance_cursor(
        self, cursor: int, minutes: Sequence[int], complete: set[tuple[int, int]]
    ) -> None:
        new_cursor = cursor
        for minute in minutes:
            if minute != new_cursor:
                break
            if all((minute, s) in complete for s in range(self._timers.shards)):
                new_cursor = minute + 1
            else:
                break
        if new_cursor != cursor:
            self._timers.advance_cursor(cursor, new_cursor)

    def _sweep_partition(
        self, key: tuple[int, int], owner: str, last_minute: int, deadline: int
    ) -> _PartitionResult:
        minute, shard = key
        result = _PartitionResult()
        try:
            lease = self._timers.acquire(minute, shard, owner, self._clock(), self._lease_ms)
            if lease is None:
                result.busy = True
                return result
            watermark = lease.watermark
            horizon_ms = (last_minute + 1) * MINUTE_MS
            while True:
                timers, more = self._timers.read_due(
                    minute, shard, watermark, horizon_ms, PAGE_SIZE
                )
                if timers:
                    self._hand_over(timers, result)
                    watermark = timers[-1].sort_key
                    result.pages += 1
                if not more:
                    result.complete = (minute + 1) * MINUTE_MS <= horizon_ms
                    self._timers.advance(
                        minute, shard, owner, watermark, complete=result.complete, release=True
                    )
                    return result
                if self._clock() > deadline:
                    # Out of time: record progress and let the next sweep continue from here.
                    self._timers.advance(minute, shard, owner, watermark, release=True)
                    return result
                if not self._timers.advance(minute, shard, owner, watermark):
                    return result  # lease lost: the new holder continues from our watermark
        except Exception as exc:  # one partition's failure must not stop the others
            logger.exception("sweeping partition failed", extra={"minute": minute, "shard": shard})
            result.errors.append(f"{minute}#{shard}: {exc}")
            return result

    def _hand_over(self, timers: Sequence[Timer], result: _PartitionResult) -> None:
        """Send a page of due timers to SQS and continue the chains of recurring jobs."""
        result.timers_read += len(timers)
        jobs = self._jobs.get_many([(t.tenant, t.job_id) for t in timers])
        due: list[tuple[Job, int]] = []
        for timer in timers:
            job = jobs.get(timer.job_id)
            if job is None or job.status != JobStatus.SCHEDULED:
                result.skipped += 1  # cancelled, paused, finished, or never acknowledged
            elif job.generation != timer.generation:
                result.skipped += 1  # a chain from before a pause/resume
            else:
                due.append((job, timer.due_ms))
        if due:
            dispatched = self._dispatcher.dispatch(due)
            result.messages_sent += dispatched.messages
            result.skipped += dispatched.skipped
            result.jobs_completed += dispatched.completed


@dataclass
class _PartitionResult:
    timers_read: int = 0
    messages_sent: int = 0
    skipped: int = 0
    jobs_completed: int = 0
    pages: int = 0
    busy: bool = False
    complete: bool = False
    errors: list[str] = field(default_factory=list)
