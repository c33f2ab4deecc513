"""The sweeper: hand the timers that fall due soon to SQS, with DelaySeconds = due − now.

Each shard is swept on its own (`Sweeper.sweep_shard`: one invocation per shard, started once a
minute by the coordinator, duetime.services.coordinator), with its own progress: a cursor (the
oldest bucket minute of the shard that may still hold unswept timers) and a horizon (the newest
bucket minute any sweep of the shard has started reading). A sweep at time `now` reads the
shard's buckets from its cursor through minute(now) + lookahead, so a missed tick is caught up
by the next one. Each (bucket, shard) partition is swept under a lease with a watermark: the
sort key of the last timer dealt with. Progress is written once per page, never per timer. A
slow or failing shard delays only its own timers.

Why a timer cannot slip between sweeps: the sweep first raises its shard's horizon, then
queries with strongly consistent reads. Whoever writes a timer (the API, or a sweep continuing
a recurring chain) reads the horizon of the timer's shard *after* the write; if it has reached
the timer's bucket, the writer sends the occurrence to SQS itself. Either the sweep's query
sees the timer, or the writer sees the sweep's horizon. Duplicates that this can produce share
a run id and are absorbed by the worker's claim.

Why one bad timer cannot hold a shard back:
- A page whose hand-over (duetime.services.handover) raises is split in halves until the
  timers that fail on their own are found; those are *parked* (moved to the shard's stuck
  list, with the reason) and the watermark moves past them in the same sweep. Each later
  sweep of the shard retries the parked timers that are due for it, with backoff, and
  quarantines those out of attempts (duetime.services.stuck).
- Work per step is bounded: pages by count and by the bytes of their jobs, catch-up planning
  per job (duetime.domain.planning), and the deadline is checked between groups of a page.
- A sweep that *dies* in a partition (its lease runs out unreleased) leaves a stall count:
  the next sweeps of that partition use pages 8 times smaller per stall, and at
  `MAX_STALLS` the timer right after the watermark is parked without being tried.
- A progress write that fails on a passing condition (a throttle on the partition's item) is
  not a death: the sweep goes on under its lease, and its release is tried again
  (`Sweeper._record`), so the next holder does not count a stall for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields

from duetime.domain.timers import StuckTimer, Timer, minute_of
from duetime.domain.timeutil import MINUTE_MS
from duetime.observability import Metric, count, logger, milliseconds
from duetime.ports import JobQueue, JobStore, QueueUnavailable, StoreError, TimerStore
from duetime.services.handover import HandOver
from duetime.services.stuck import StuckTimers
from duetime.settings import Settings

PAGE_SIZE = 500
# A page is also cut when its jobs add up to this many bytes (as stored): whatever the jobs'
# sizes, one page never holds more than this much job data in memory.
PAGE_BUDGET_BYTES = 16 * 1024 * 1024
# A timer that does not carry its job's size (written by an older version) counts as the
# largest item DynamoDB can hold.
UNKNOWN_JOB_BYTES = 400 * 1024
# A sweep reads at most this many minutes of its shard's backlog (buckets before the current
# minute that are not complete: after an outage); a longer one is worked off by the next sweeps.
MAX_MINUTES_PER_SWEEP = 1440
# Sweeps that died in one partition before the timer after its watermark is parked untried.
MAX_STALLS = 4
# What a shard's sweep may spend in all holding sends to their release moment: past it, the
# rest goes at once (a run visible up to 0.9 s early), so a busy minute is not held back.
SWEEP_HOLD_MS = 3_000
# A partition's release that failed on a passing condition is tried again after these pauses
# (seconds), while the sweep is less than RELEASE_GRACE_MS past its deadline: unreleased, its
# lease would run out and the next holder would count a stall.
RELEASE_PAUSES_S = (0.5, 1.0, 2.0)
RELEASE_GRACE_MS = 10_000


class _PartitionFailed(Exception):
    """Sweeping a leased partition failed; `watermark` is the progress recorded before, and
    `stalls` the count its release writes (0 after an untried park; None: as stored)."""

    def __init__(self, watermark: str | None, stalls: int | None) -> None:
        super().__init__(watermark)
        self.watermark = watermark
        self.stalls = stalls


@dataclass
class SweepReport:
    started_ms: int
    shards: int = 0
    horizon_minute: int = 0
    partitions: int = 0  # partitions with timers that this sweep leased
    partitions_busy: int = 0  # leased by another sweep
    timers_read: int = 0
    messages_sent: int = 0
    skipped: int = 0  # cancelled, paused, stale chain, or missed and not caught up
    jobs_completed: int = 0
    pages: int = 0
    duration_ms: int = 0
    backlog_minutes: int = 0
    parked: int = 0  # timers whose hand-over failed on its own this sweep
    unparked: int = 0  # stuck timers handed over on a later attempt
    quarantined: int = 0  # stuck timers out of attempts
    errors: list[str] = field(default_factory=list)

    def add(self, other: SweepReport) -> None:
        """Fold another shard's report into this one (a sweep of several shards)."""
        for f in fields(self):
            if f.name in ("started_ms", "horizon_minute"):
                continue
            value = getattr(other, f.name)
            if f.name in ("duration_ms", "backlog_minutes"):
                setattr(self, f.name, max(getattr(self, f.name), value))
            else:
                setattr(self, f.name, getattr(self, f.name) + value)
        self.horizon_minute = max(self.horizon_minute, other.horizon_minute)


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
        page_budget_bytes: int = PAGE_BUDGET_BYTES,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._timers = timers
        self._settings = settings
        self._clock = clock
        self._parallelism = parallelism
        self._lease_ms = lease_ms
        self._deadline_ms = deadline_ms
        self._page_size = page_size
        self._page_budget = page_budget_bytes
        # `sleep`: sends are held to their release moment (duetime.services.release), and a
        # release tried again waits (None: at once).
        self._sleep = sleep
        self._handover = HandOver(jobs, timers, queue, settings, clock=clock, sleep=sleep)
        self._stuck = StuckTimers(timers, self._handover, clock=clock, page_size=page_size)

    # --- sweeping -------------------------------------------------------------------------------

    def sweep(self, owner: str | None = None) -> SweepReport:
        """Sweep every shard in this process, several at once: what the coordinator's fan-out
        does with one invocation per shard (tests and tools use it)."""
        report = SweepReport(started_ms=self._clock())
        shards = range(self._timers.shard_count())
        with ThreadPoolExecutor(max_workers=max(1, self._parallelism)) as pool:
            for shard_report in pool.map(lambda s: self.sweep_shard(s, owner), shards):
                report.add(shard_report)
        return report

    def sweep_shard(self, shard: int, owner: str | None = None) -> SweepReport:
        """One sweep of one shard: its due buckets, then its stuck timers due for a retry. Its
        sends hold to their release moment for SWEEP_HOLD_MS in all (services.release)."""
        self._handover.hold_at_most(SWEEP_HOLD_MS)
        try:
            return self._sweep_shard(shard, owner)
        finally:
            self._handover.hold_at_most(None)

    def _sweep_shard(self, shard: int, owner: str | None) -> SweepReport:
        owner = owner or uuid.uuid4().hex
        now = self._clock()
        deadline = now + self._deadline_ms
        report = SweepReport(started_ms=now, shards=1)
        wanted = minute_of(now) + self._settings.lookahead_minutes
        state = self._timers.raise_horizon(shard, wanted)
        horizon = state.horizon_minute if state.horizon_minute is not None else wanted
        cursor = state.cursor_minute if state.cursor_minute is not None else wanted
        # Sweep our own horizon; a sweep whose clock runs ahead may have raised the shard's
        # further, and its buckets are its own to sweep.
        last = min(wanted, horizon)
        report.horizon_minute = last
        report.backlog_minutes = max(0, last - cursor)
        # The minutes falling due now first (a backlog must not make on-time runs late), then
        # the backlog, oldest first; a backlog longer than one sweep's share is continued by
        # the next sweeps.
        current = range(max(cursor, minute_of(now) - 1), last + 1)
        backlog = range(cursor, min(current.start, cursor + MAX_MINUTES_PER_SWEEP))
        states = self._timers.partition_states([(m, shard) for m in [*backlog, *current]])
        horizon_ms = (last + 1) * MINUTE_MS  # every minute swept is whole
        complete: set[int] = set()
        unavailable = False
        for minute in [*current, *backlog]:
            known = states.get((minute, shard))
            if known is not None and known.complete:
                complete.add(minute)
                continue
            if self._clock() > deadline:
                break  # the next sweep continues from the watermarks
            try:
                if self._sweep_partition(
                    minute,
                    shard,
                    known.watermark if known else None,
                    owner,
                    horizon_ms,
                    deadline,
                    report,
                ):
                    complete.add(minute)
            except QueueUnavailable:
                # SQS will not take requests: the other partitions would fail the same way
                # (a lease, a read and a send each, for nothing). The next sweep goes on.
                unavailable = True
                break
        self._advance_cursor(shard, cursor, [*backlog, *current], complete)
        if not unavailable:
            self._stuck.retry_due(shard, deadline, report)
        self._stuck.count_quarantined(shard)
        report.duration_ms = self._clock() - now
        milliseconds(Metric.SWEEP_DURATION, report.duration_ms)
        count(Metric.TIMERS_ENQUEUED, report.messages_sent)
        count(Metric.SWEEP_BACKLOG_MINUTES, report.backlog_minutes)
        logger.info("sweep finished", extra={"shard": shard, "sweep": report.__dict__})
        return report

    def _advance_cursor(
        self, shard: int, cursor: int, minutes: Iterable[int], complete: set[int]
    ) -> None:
        new_cursor = cursor
        for minute in minutes:
            if minute != new_cursor or minute not in complete:
                break
            new_cursor = minute + 1
        if new_cursor != cursor:
            self._timers.advance_cursor(shard, cursor, new_cursor)

    def _sweep_partition(
        self,
        minute: int,
        shard: int,
        watermark: str | None,
        owner: str,
        horizon_ms: int,
        deadline: int,
        report: SweepReport,
    ) -> bool:
        """Sweep one (minute, shard) partition page by page. Returns whether it is complete.
        Raises QueueUnavailable, its progress recorded and its lease released, when SQS will
        not take requests."""
        try:
            first, _ = self._timers.read_due(minute, shard, watermark, horizon_ms, 1)
            if not first:
                # Nothing after the watermark: the partition is done. A timer written into it
                # from now on finds the horizon raised (before this read): its writer sends it.
                return True
            lease = self._timers.acquire(minute, shard, owner, self._clock(), self._lease_ms)
            if lease is None:
                report.partitions_busy += 1
                return False
            report.partitions += 1
            return self._sweep_leased(
                minute, shard, owner, lease.watermark, lease.stalls, horizon_ms, deadline, report
            )
        except _PartitionFailed as failed:  # recorded progress stands; the next sweep resumes
            logger.exception(
                "sweeping a partition failed", extra={"minute": minute, "shard": shard}
            )
            report.errors.append(f"{minute}#{shard}: {failed.__cause__}")
            try:  # let the next tick resume without waiting for the lease
                self._record(
                    minute,
                    shard,
                    owner,
                    failed.watermark,
                    deadline,
                    release=True,
                    stalls=failed.stalls,
                )
            except Exception:
                logger.exception("releasing a partition failed", extra={"minute": minute})
            if isinstance(failed.__cause__, QueueUnavailable):
                raise failed.__cause__ from None
            return False
        except Exception as exc:  # before we held the lease: nothing to release
            logger.exception(
                "sweeping a partition failed", extra={"minute": minute, "shard": shard}
            )
            report.errors.append(f"{minute}#{shard}: {exc}")
            return False

    def _sweep_leased(
        self,
        minute: int,
        shard: int,
        owner: str,
        watermark: str | None,
        stalls: int,
        horizon_ms: int,
        deadline: int,
        report: SweepReport,
    ) -> bool:
        reset = False  # the stall count goes back to 0 with each write after a park
        try:
            while True:
                if stalls >= MAX_STALLS:
                    watermark = self._park_untried(minute, shard, watermark, horizon_ms, report)
                    stalls, reset = 0, True
                    if not self._record(minute, shard, owner, watermark, deadline, stalls=0):
                        return False
                # After a sweep died here, pages shrink 8-fold per death until the cause is
                # alone in its page (and parked at MAX_STALLS).
                limit = max(1, self._page_size >> (3 * stalls))
                read, more = self._timers.read_due(minute, shard, watermark, horizon_ms, limit)
                page = self._within_budget(read)
                more = more or len(page) < len(read)
                handed = self._handover.hand_over(page, deadline, report)
                for timer, reason in handed.failed:
                    self._stuck.park(shard, timer, reason, report)
                for timer, reason in handed.passing:
                    self._stuck.park(shard, timer, reason, report, passing=True)
                if handed.done:
                    watermark = page[handed.done - 1].sort_key
                if handed.unavailable is not None:  # kept what went out; the next sweep goes on
                    raise handed.unavailable
                report.pages += 1
                finished = not more and handed.done == len(page)
                out_of_time = self._clock() > deadline
                held = self._record(
                    minute,
                    shard,
                    owner,
                    watermark,
                    deadline,
                    complete=finished,
                    release=finished or out_of_time,
                    stalls=0 if finished or reset else None,
                )
                if finished:
                    return held
                if out_of_time or not held:
                    return False  # the next sweep (or the lease's new holder) continues
                if self._clock() > deadline:  # the failed write itself took the time left
                    if self._clock() <= deadline + RELEASE_GRACE_MS:
                        self._record(
                            minute,
                            shard,
                            owner,
                            watermark,
                            deadline,
                            release=True,
                            stalls=0 if reset else None,
                        )
                    return False
        except Exception as exc:
            raise _PartitionFailed(watermark, 0 if reset else None) from exc

    def _record(
        self,
        minute: int,
        shard: int,
        owner: str,
        watermark: str | None,
        deadline: int,
        *,
        complete: bool = False,
        release: bool = False,
        stalls: int | None = None,
    ) -> bool:
        """Write a partition's progress under our lease (TimerStore.advance); False: the lease
        is lost. A write that fails on a passing condition is not a lost lease: a page's
        progress goes with the next page's write (the lease outlasts the sweep), and a
        release is tried again after RELEASE_PAUSES_S. Not released, the lease runs out and
        the next holder resumes from the last progress written, counting a stall."""
        pauses = list(RELEASE_PAUSES_S) if release else []
        while True:
            try:
                return self._timers.advance(
                    minute,
                    shard,
                    owner,
                    watermark,
                    complete=complete,
                    release=release,
                    stalls=stalls,
                )
            except StoreError as exc:
                if not exc.transient:
                    raise
                # Tried again only if that begins within the grace (the function's time).
                pause = pauses.pop(0) if pauses else None
                if pause is None or self._clock() + pause * 1000 > deadline + RELEASE_GRACE_MS:
                    logger.warning(
                        "writing a partition's progress failed",
                        extra={"minute": minute, "shard": shard, "release": release},
                        exc_info=True,
                    )
                    return True
                if self._sleep is not None:
                    self._sleep(pause)

    def _within_budget(self, timers: list[Timer]) -> list[Timer]:
        """The longest prefix of `timers` whose jobs to read fit the page budget (at least
        one); a one-off's timer needs no job read."""
        total = 0
        for n, timer in enumerate(timers):
            if timer.message() is None:
                total += timer.job_bytes or UNKNOWN_JOB_BYTES
            if total > self._page_budget and n > 0:
                return timers[:n]
        return timers

    def _park_untried(
        self, minute: int, shard: int, watermark: str | None, horizon_ms: int, report: SweepReport
    ) -> str | None:
        """Sweeps kept dying right after `watermark`: park the next timer without trying it.
        Returns the watermark past it."""
        found, _ = self._timers.read_due(minute, shard, watermark, horizon_ms, 1)
        if not found:
            return watermark
        reason = f"the sweep stopped (timeout or crash) {MAX_STALLS} times while handing it over"
        self._stuck.park(shard, found[0], reason, report)
        return found[0].sort_key

    # --- stuck timers (duetime.services.stuck) ------------------------------------------------

    def retry(
        self, stuck: Sequence[StuckTimer], *, deadline: int | None = None
    ) -> list[tuple[StuckTimer, str | None]]:
        """Hand stuck timers over again, on request (`duetime timers stuck --retry`)."""
        limit = deadline if deadline is not None else self._clock() + self._deadline_ms
        return self._stuck.retry(stuck, limit, SweepReport(started_ms=self._clock()))

    def stuck(self) -> list[StuckTimer]:
        """Every stuck timer of every shard: quarantined first, then by next attempt."""
        return [s for shard in range(self._timers.shard_count()) for s in self._timers.stuck(shard)]
