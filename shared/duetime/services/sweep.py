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
from functools import partial

from duetime.config import Settings
from duetime.domain.ids import minute_of
from duetime.domain.jobs import Job, JobStatus
from duetime.domain.timeutil import MINUTE_MS
from duetime.observability import Metric, count, logger, milliseconds
from duetime.ports import JobQueue, JobStore, Timer, TimerStore
from duetime.services.dispatch import Dispatcher

PAGE_SIZE = 500
# A sweep reads at most this many bucket minutes; a longer backlog (after an outage) is
# worked off by successive sweeps, oldest first.
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
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._jobs = jobs
        self._timers = timers
        self._queue = queue
        self._settings = settings
        self._clock = clock
        self._parallelism = parallelism
        self._lease_ms = lease_ms
        self._deadline_ms = deadline_ms
        self._page_size = page_size
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
        report.horizon_minute = last
        report.backlog_minutes = max(0, last - cursor)
        # Oldest first; a backlog longer than one sweep's share is continued by the next.
        minutes = list(range(cursor, min(last, cursor + MAX_MINUTES_PER_SWEEP - 1) + 1))
        states = self._timers.partition_states(
            [(m, s) for m in minutes for s in range(self._timers.shards)]
        )
        complete = {key for key, state in states.items() if state.complete}
        deadline = now + self._deadline_ms
        with ThreadPoolExecutor(max_workers=max(1, self._parallelism)) as pool:
            for minute in minutes:
                if self._clock() > deadline:
                    break  # the next sweep continues from the watermarks
                complete |= self._sweep_minute(
                    minute, complete, owner, last, deadline, pool, report
                )
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

    def _sweep_minute(
        self,
        minute: int,
        complete: set[tuple[int, int]],
        owner: str,
        last_minute: int,
        deadline: int,
        pool: ThreadPoolExecutor,
        report: SweepReport,
    ) -> set[tuple[int, int]]:
        """Sweep one bucket minute: its shards are leased and read in parallel, and each round
        of pages is dispatched together, so SQS batches fill across shards. Returns the
        (minute, shard) partitions completed."""
        shards = [s for s in range(self._timers.shards) if (minute, s) not in complete]
        report.partitions += len(shards)
        now = self._clock()
        leases = list(
            pool.map(lambda s: self._timers.acquire(minute, s, owner, now, self._lease_ms), shards)
        )
        watermarks = {s: lease.watermark for s, lease in zip(shards, leases, strict=True) if lease}
        report.partitions_busy += len(shards) - len(watermarks)
        horizon_ms = (last_minute + 1) * MINUTE_MS
        whole_minute = (minute + 1) * MINUTE_MS <= horizon_ms
        done: set[tuple[int, int]] = set()
        active = list(watermarks)
        try:
            while active:
                pages = list(
                    pool.map(
                        lambda s: self._timers.read_due(
                            minute, s, watermarks[s], horizon_ms, self._page_size
                        ),
                        active,
                    )
                )
                self._hand_over([t for timers, _ in pages for t in timers], report)
                report.pages += 1
                for shard, (timers, _) in zip(active, pages, strict=True):
                    if timers:
                        watermarks[shard] = timers[-1].sort_key
                finished = [s for s, (_, more) in zip(active, pages, strict=True) if not more]
                active = [s for s, (_, more) in zip(active, pages, strict=True) if more]
                out_of_time = self._clock() > deadline
                shards_now = finished + active
                recorded = list(
                    pool.map(
                        partial(self._record, minute, owner, watermarks, whole_minute),
                        shards_now,
                        [s in finished for s in shards_now],
                        [out_of_time] * len(shards_now),
                    )
                )
                held = {s for s, ok in zip(shards_now, recorded, strict=True) if ok}
                done |= {(minute, s) for s in finished if whole_minute and s in held}
                # Out of time: progress is recorded and the next sweep continues from it. A
                # shard whose lease was lost is continued by its new holder.
                active = [] if out_of_time else [s for s in active if s in held]
        except Exception as exc:  # recorded progress stands; the next sweep resumes from it
            logger.exception("sweeping minute failed", extra={"minute": minute})
            report.errors.append(f"{minute}: {exc}")
            for shard in active:  # best effort: let the next tick resume without waiting
                try:
                    self._timers.advance(minute, shard, owner, watermarks[shard], release=True)
                except Exception:
                    logger.exception("releasing a partition failed", extra={"shard": shard})
        return done

    def _record(
        self,
        minute: int,
        owner: str,
        watermarks: dict[int, str | None],
        whole_minute: bool,
        shard: int,
        finished: bool,
        out_of_time: bool,
    ) -> bool:
        """Record a shard's watermark; a finished shard of a whole minute is complete."""
        return self._timers.advance(
            minute,
            shard,
            owner,
            watermarks[shard],
            complete=whole_minute and finished,
            release=finished or out_of_time,
        )

    def _hand_over(self, timers: Sequence[Timer], result: SweepReport) -> None:
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
