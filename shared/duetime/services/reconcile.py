"""The reconciler: find recurring jobs that are `scheduled` but whose chain is broken, and
one-off jobs long overdue that never ran, and re-arm them.

A recurring job's chain lives in one timer at a time (its next occurrence). However a chain
breaks — a timer removed by hand, expired by TTL while its shard was stuck for a week, a bug —
the job would stay `scheduled` and never run again. Once a day the reconciler reads every
scheduled job (a parallel Scan of the jobs table) and, for each recurring one, looks for its
live timer where a healthy chain keeps it: every chain timer is the first occurrence at or
after a minute boundary near now (duetime.services.dispatch plans up to a minute boundary) or
at the 10-minute line a sweeper planned it ahead to (duetime.domain.planning), so the
candidates are the first occurrences at or after each minute from `LOOKBACK_MINUTES` ago to
lookahead + 3 minutes ahead, and at the first line after that: a handful of keys per job, one
BatchGetItem per 100 keys, in the job's shard, then, for a job not found there, in every shard
ever used (written under another shard count, a chain's timer is in that count's shard): its
keys again in each shard, for those jobs only (after a change of the count, most of them, once,
until their chains have moved on). A job with none of them, nor a stuck timer, is re-armed like a
resume: from its next occurrence after now (missed occurrences are not caught up).

A job the reconciler wrongly takes for broken (a chain whose shard lags more than
`LOOKBACK_MINUTES`, or a catch-up continuation stored out of its bucket) is harmless: the
re-armed chain writes the same timer keys as the live one, so the two merge at the next
occurrence (or the next line, for a chain planned ahead), and any occurrence sent twice shares
its run id.

A scheduled one-off job whose instant is more than `SETTLE_MS` past (and less than
`OVERDUE_WINDOW_MS` before that: the daily runs look at each about twice; and less than the
hot window, or its run's record may have left for the archive) and that has no run
record lost its run before it started (a dispatch that failed after the job was written, its
timer or message removed by hand): it is sent now, as a late run (a copy still on its way
shares its run id, and runs once). One BatchGetItem of the runs table per 100 such jobs: a
day's one-offs, one strongly consistent read each.

Cost: the Scan reads the whole jobs table once a day (0.5 read units per 4 KB, eventually
consistent) plus about 15 strongly consistent timer reads per minute-level recurring job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from duetime.domain.jobs import Job, JobStatus
from duetime.domain.planning import CHAIN_GRID_MS
from duetime.domain.schedule import next_occurrence
from duetime.domain.timers import Timer, minute_of
from duetime.domain.timeutil import MINUTE_MS, from_ms, to_ms
from duetime.observability import Metric, count, logger
from duetime.ports import CounterRead, JobStore, KeyCount, RunStore, TimerStore
from duetime.services.dispatch import Dispatcher
from duetime.services.submission import counted
from duetime.settings import Settings

# How far back a live chain timer is looked for: a shard lagging more than this makes its
# chains look broken (harmless, see above).
LOOKBACK_MINUTES = 10
# A chain begun this recently may be between its item's write and its timer's: left alone.
SETTLE_MS = 10 * MINUTE_MS
SCAN_SEGMENTS = 4
CHECK_BATCH = 25  # jobs whose candidate timers are read together
MAX_BATCH_GET = 100  # overdue one-offs whose runs are read together
# A one-off is looked at by the runs of about two days after its instant (the reconciler runs
# daily): the older ones, finished for the most part, were looked at before, and one that a
# run could not check (its reads failed) is checked by the next (until 2026-11-30 26 hours:
# such a one-off was never looked at again; an outside fault audit).
OVERDUE_WINDOW_MS = 50 * 60 * MINUTE_MS


@dataclass
class ReconcileReport:
    scanned: int = 0  # scheduled or paused jobs read
    recurring: int = 0  # scheduled recurring ones old enough to check
    overdue: int = 0  # scheduled one-offs whose instant is long past
    rearmed: int = 0
    failed: int = 0  # re-arming failed (retried by the next run)
    # Per tenant, the active (scheduled or paused) recurring jobs counted by the scan: the
    # quota counters are set to these, repairing any drift.
    active_recurring: Counter[str] = field(default_factory=Counter)
    # Per tenant, its counter as the scan read it (with its changes: the write is conditional).
    counted: dict[str, CounterRead] = field(default_factory=dict)
    # A segment's scan failed part way: its counts are partial, so no counter is set.
    incomplete: bool = False
    # The Idempotency-Keys that carry a count (JobStore.scan_active) and have not expired: one
    # whose job was never written still holds it, for the request that resumes the key.
    keys: int = 0


class Reconciler:
    def __init__(
        self,
        jobs: JobStore,
        timers: TimerStore,
        runs: RunStore,
        dispatcher: Dispatcher,
        settings: Settings,
        *,
        clock: Callable[[], int],
        segments: int = SCAN_SEGMENTS,
    ) -> None:
        self._jobs = jobs
        self._timers = timers
        self._runs = runs
        self._dispatcher = dispatcher
        self._settings = settings
        self._clock = clock
        self._segments = segments

    def reconcile(self) -> ReconcileReport:
        stuck = {
            (s.timer.job_id, s.timer.generation)
            for shard in range(self._timers.shard_count())
            for s in self._timers.stuck(shard)
        }
        with ThreadPoolExecutor(max_workers=self._segments) as pool:
            reports = list(pool.map(lambda n: self._segment(n, stuck), range(self._segments)))
        total = ReconcileReport()
        for r in reports:
            total.scanned += r.scanned
            total.recurring += r.recurring
            total.overdue += r.overdue
            total.rearmed += r.rearmed
            total.failed += r.failed
            total.incomplete |= r.incomplete
            total.active_recurring.update(r.active_recurring)
            total.counted.update(r.counted)
            total.keys += r.keys
        # Each counter is set to the jobs found, if it has not changed since the scan read it
        # (a job counted or released meanwhile, even one of each, leaves it to the next run);
        # a counter above zero for a tenant with no active recurring job (a reservation leaked
        # by a crash) goes to 0. Not from a scan that failed part way: its counts are short.
        tenants = total.counted.keys() | total.active_recurring.keys()
        for tenant in () if total.incomplete else tenants:
            found = total.active_recurring.get(tenant, 0)
            read = total.counted.get(tenant, (0, 0))
            if found != read[0]:
                self._jobs.set_recurring_count(tenant, found, expected=read)
        count(Metric.JOBS_REARMED, total.rearmed)
        logger.info(
            "reconciled",
            extra={
                "reconcile": total.__dict__
                | {"active_recurring": len(total.active_recurring), "counted": len(total.counted)}
                | {"keys": total.keys}
            },
        )
        return total

    def _segment(self, segment: int, stuck: set[tuple[str, int]]) -> ReconcileReport:
        """One segment of the scan. A batch whose reads fail is counted `failed` and left to
        the next run; a scan that fails part way marks the report incomplete, after the jobs
        read so far are checked (until 2026-11-30 either aborted the whole run, the counters'
        repair included; an outside fault audit)."""
        report = ReconcileReport()
        batch: list[Job] = []
        overdue: list[Job] = []
        keys = _KeyCheck(self._jobs, self._clock() // 1000, report)
        try:
            self._each(segment, stuck, report, batch, overdue, keys)
        except Exception:
            logger.exception("the reconciler's scan failed", extra={"segment": segment})
            report.incomplete = True
            report.failed += 1
        keys.flush()
        if batch:
            self._guarded(self._check, batch, report)
        if overdue:
            self._guarded(self._check_overdue, overdue, report)
        return report

    def _each(
        self,
        segment: int,
        stuck: set[tuple[str, int]],
        report: ReconcileReport,
        batch: list[Job],
        overdue: list[Job],
        keys: _KeyCheck,
    ) -> None:
        for job in self._jobs.scan_active(segment, self._segments, report.counted, keys):
            report.scanned += 1
            if counted(job.spec):
                report.active_recurring[job.tenant] += 1
            if job.status != JobStatus.SCHEDULED:
                continue  # paused: nothing to arm
            settled = self._clock() - SETTLE_MS
            if not job.spec.recurring:
                last = max(job.next_due_ms or 0, job.updated_ms)
                # Only while its run's record, had it run, would still be there: its job's
                # item outlives it by the run's attempts (planning.hot_until), and a short hot
                # window would send a run that happened again (found by a review, 2026-11-30).
                kept = self._clock() - self._settings.run_ttl_seconds * 1000
                due = job.next_due_ms
                if due is not None and due > kept and settled - OVERDUE_WINDOW_MS < last < settled:
                    overdue.append(job)
                    if len(overdue) == MAX_BATCH_GET:
                        self._guarded(self._check_overdue, overdue, report)
                        overdue.clear()
                continue
            # Its chain may be between its item's write and its timer's: a creation, a resume
            # or a re-arming change (`generation_ms`; a job stored before it, any change). Not
            # `updated_ms`, which any PATCH moves: a job whose payload was changed daily just
            # before the reconcile kept a broken chain for good (an outside lifecycle audit).
            began = job.generation_ms if job.generation_ms is not None else job.updated_ms
            if began > settled:
                continue
            if (job.id, job.generation) in stuck:
                continue  # its chain waits in the stuck list (`duetime timers stuck`)
            report.recurring += 1
            batch.append(job)
            if len(batch) == CHECK_BATCH:
                self._guarded(self._check, batch, report)
                batch.clear()

    def _guarded(
        self,
        check: Callable[[list[Job], ReconcileReport], None],
        jobs: list[Job],
        report: ReconcileReport,
    ) -> None:
        """Check a batch; one whose reads fail (a throttle) is counted `failed`, and logged."""
        try:
            check(list(jobs), report)
        except Exception:
            logger.exception("checking a batch of jobs failed", extra={"jobs": len(jobs)})
            report.failed += len(jobs)

    def _check_overdue(self, jobs: list[Job], report: ReconcileReport) -> None:
        """One-offs long overdue: sent now unless their run has a record (it started, or
        waits for a retry, or its job's finished state was not written)."""
        report.overdue += len(jobs)
        keys = [(job.id, job.next_due_ms or 0) for job in jobs]
        recorded = self._runs.get_many(keys)
        for job, key in zip(jobs, keys, strict=True):
            if key not in recorded:
                send = partial(self._dispatcher.dispatch, [(job, key[1])])
                self._rearm(job, send, "re-sent a one-off that never ran", report)

    def _rearm(
        self, job: Job, rearm: Callable[[], object], done: str, report: ReconcileReport
    ) -> None:
        """Re-arm one job; a failure is logged and counted (the next run retries it)."""
        try:
            rearm()
        except Exception:
            logger.exception(
                "re-arming a job failed", extra={"tenant": job.tenant, "job_id": job.id}
            )
            report.failed += 1
            return
        report.rearmed += 1
        logger.warning(done, extra={"tenant": job.tenant, "job_id": job.id})

    def _check(self, jobs: list[Job], report: ReconcileReport) -> None:
        now = self._clock()
        candidates = {job.id: self.candidates(job, now) for job in jobs}
        found = self._timers.find([t for timers in candidates.values() for t in timers])
        armed = {t.job_id for t in found}  # the candidates carry the job's generation
        # Not where the setting puts it: a chain written under another shard count keeps its
        # timer in that count's shard (until 2026-11-30 such healthy chains were re-armed
        # after every change of the setting, their runs sent twice; found by an outside audit).
        missing = [
            t for job_id, timers in candidates.items() if job_id not in armed for t in timers
        ]
        if missing:
            armed |= {t.job_id for t in self._timers.find(missing, anywhere=True)}
        for job in jobs:
            if job.id in armed:
                continue
            found_next = next_occurrence(
                job.spec.schedule, created_at=from_ms(job.created_ms), after=from_ms(now - 1)
            )
            rearm = (
                partial(self._dispatcher.complete, job, now)  # its schedule is over
                if found_next is None
                else partial(self._dispatcher.dispatch, [(job, to_ms(found_next))])
            )
            self._rearm(job, rearm, "re-armed a recurring job without a timer", report)

    def candidates(self, job: Job, now: int) -> list[Timer]:
        """Where a healthy chain of `job` keeps its timer now (see the module docstring)."""
        first = minute_of(now) - LOOKBACK_MINUTES
        last = minute_of(now) + self._settings.lookahead_minutes + 3
        created = from_ms(job.created_ms)
        grid_line = ((last + 1) * MINUTE_MS + CHAIN_GRID_MS - 1) // CHAIN_GRID_MS * CHAIN_GRID_MS
        starts = [m * MINUTE_MS for m in range(first, last + 1)] + [grid_line]
        dues: set[int] = set()
        for start in starts:
            found = next_occurrence(job.spec.schedule, created_at=created, after=from_ms(start - 1))
            if found is not None:
                dues.add(to_ms(found))
        return [Timer(job.tenant, job.id, due, job.generation) for due in sorted(dues)]


class _KeyCheck:
    """A segment's Idempotency-Keys that carry a count, as its scan finds them: each unexpired
    one whose job was never written counts for its tenant, as a retry that resumes the key
    carries the count on (until 2026-12-01 the recount dropped it, and that retry's job lived
    uncounted; an outside security audit, round twelve). Their jobs are read MAX_BATCH_GET to a
    BatchGetItem (until later that day one GetItem a key, one after another after the scan and
    before any counter's repair: one tenant's keyed creates, cancelled at once, could fill the
    reconciler's 15 minutes; round thirteen). A read that fails sets no counter this run; the
    scan goes on (its chains are repaired all the same: a review of this change)."""

    def __init__(self, jobs: JobStore, now_s: int, report: ReconcileReport) -> None:
        self._jobs = jobs
        self._now_s = now_s
        self._report = report
        self._pending: list[KeyCount] = []

    def __call__(self, key: KeyCount) -> None:
        if key[2] > self._now_s:
            self._pending.append(key)
            if len(self._pending) == MAX_BATCH_GET:
                self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        try:
            written = self._jobs.get_many([(tenant, job_id) for tenant, job_id, _ in pending])
        except Exception:
            logger.exception("reading the counted keys' jobs failed")
            self._report.incomplete = True
            return
        for tenant, job_id, _ in pending:
            self._report.keys += 1
            if job_id not in written:
                self._report.active_recurring[tenant] += 1
