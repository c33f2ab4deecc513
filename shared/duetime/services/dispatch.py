"""Turning due occurrences into SQS messages or timers: shared by submission and the sweeper.

For each (job, occurrence):
- one-off: a message if it falls before the horizon, else a timer;
- recurring: every occurrence before the horizon becomes a message (each is its own run) and
  one timer holds the chain's next occurrence; a schedule that has ended completes the job.

The horizon is the newest bucket minute a sweep may already have read: minute(now) +
lookahead + 1 (a sweep starting in the next minute reaches that far), or the horizon of the
timer's shard when a sweep has gone further. A timer is stored in the bucket of its due minute,
or, for a catch-up continuation already due, in the first bucket the next sweep of its shard
reads and none has read yet.

Jitter (`jitter_seconds`): every message is due at its occurrence's jittered instant
(`Job.due_ms`). A one-off goes by that instant: a message if it falls before the horizon, else
a timer in the bucket of the jittered minute (the timer keeps the nominal instant, its run's
identity, and carries the offset). A recurring chain stays on its nominal instants (its next
occurrences must not wait behind one drawn late): its occurrences are sent as they come before
the horizon, each with a delay up to its jittered instant, at most SQS's 900 s; one delayed
further arrives early and the worker puts it back until its instant (duetime.services.execute).

The sweeper's dispatcher (`plan_ahead`) lets a chain plan ahead to the next 10-minute line
(duetime.domain.planning, "Planning ahead"): one timer write per ten occurrences of a
per-minute cron. Submission does not: a new job's first sweep does it.

After writing timers we read the horizon of each shard written to (never a global item: the
reads spread over the shards): a timer whose bucket it has reached may have been missed by
that sweep, so it is dispatched again (as a message), and a duplicate is absorbed by the
worker's claim (see duetime.services.sweep).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from duetime.domain.jobs import Job, JobStatus
from duetime.domain.messages import RunMessage, delay_seconds, run_message
from duetime.domain.planning import chain_ahead_ms, completed_expires_at, plan_recurring
from duetime.domain.schedule import next_occurrence
from duetime.domain.timers import Timer, minute_of
from duetime.domain.timeutil import MINUTE_MS, from_ms, to_ms
from duetime.observability import logger
from duetime.ports import ConditionFailed, JobStore, QueueError, RunSender, TimerStore
from duetime.settings import Settings


def _timer(job: Job, due_ms: int, unread: int) -> Timer:
    """The timer of `job` for `due_ms`: in the bucket of its minute (a one-off's: of its
    jittered instant), or, for a catch-up continuation already due, in `unread`, the first
    bucket the next sweep reads."""
    one_off = not job.spec.recurring
    jitter = job.due_ms(due_ms) - due_ms if one_off else 0
    bucket = max(minute_of(due_ms + jitter), unread)
    return Timer(
        job.tenant,
        job.id,
        due_ms,
        job.generation,
        bucket_minute=None if bucket == minute_of(due_ms) else bucket,
        job_bytes=job.size_bytes,
        runtime=job.spec.runtime if one_off else None,
        priority=job.spec.priority if one_off else None,
        jitter_ms=jitter,
        stage_ms=job.spec.stage_seconds * 1000 if one_off else 0,
    )


def _carrying(message: RunMessage, job: Job, bucket: int) -> Timer:
    """A timer that carries `message`, a run of `job` (as a one-off's does), in bucket
    `bucket`: the sweep sends the message as it is."""
    return Timer(
        message.tenant,
        message.job_id,
        message.scheduled_ms,
        job.generation,
        bucket_minute=None if bucket == minute_of(message.scheduled_ms) else bucket,
        job_bytes=job.size_bytes,
        runtime=message.runtime,
        priority=message.priority,
        jitter_ms=message.due_ms - message.scheduled_ms,
        stage_ms=message.stage_ms,
    )


@dataclass
class Dispatched:
    messages: int = 0
    timers: int = 0
    skipped: int = 0  # missed occurrences the catch-up policy did not run
    completed: int = 0  # recurring jobs whose schedule ended


class Dispatcher:
    def __init__(
        self,
        jobs: JobStore,
        timers: TimerStore,
        queue: RunSender,
        settings: Settings,
        *,
        clock: Callable[[], int],
        plan_ahead: bool = False,
    ) -> None:
        self._jobs = jobs
        self._timers = timers
        self._queue = queue
        self._settings = settings
        self._clock = clock
        self._plan_ahead = plan_ahead

    def dispatch(self, due: Sequence[tuple[Job, int]]) -> Dispatched:
        """A send that fails (QueueError) still completes the jobs whose schedule ended and
        whose runs all went out (their chains have nothing left to send)."""
        result = Dispatched()
        now = self._clock()
        horizon = minute_of(now) + self._settings.lookahead_minutes + 1
        shard_horizons: dict[int, int] = {}  # read after our writes, per shard
        messages: list[RunMessage] = []
        finished: list[Job] = []  # completed once their last runs are sent, not before
        pending = list(due)
        while pending:
            timers: list[tuple[Job, Timer]] = []
            for job, due_ms in pending:
                swept = shard_horizons.get(self._timers.shard_of(job.id), 0)
                horizon_ms = (max(horizon, swept) + 1) * MINUTE_MS
                # The first bucket the next sweep reads that no sweep has read yet.
                unread = max(horizon, swept + 1)
                if not job.spec.recurring:
                    if job.due_ms(due_ms) < horizon_ms:
                        messages.append(run_message(job, due_ms))
                    else:
                        timers.append((job, _timer(job, due_ms, unread)))
                    continue
                plan = plan_recurring(
                    job.spec.schedule,
                    created_at=from_ms(job.created_ms),
                    catchup=job.spec.catchup,
                    due_ms=due_ms,
                    now_ms=now,
                    horizon_ms=horizon_ms,
                    grace_ms=self._settings.misfire_grace_seconds * 1000,
                    ahead_ms=chain_ahead_ms(horizon_ms, now, job.spec.jitter_seconds)
                    if self._plan_ahead
                    else None,
                )
                result.skipped += plan.skipped
                messages += [run_message(job, s) for s in plan.enqueue]
                if plan.next_due_ms is None:
                    finished.append(job)
                else:
                    timers.append((job, _timer(job, plan.next_due_ms, unread)))
            if not timers:
                break
            self._timers.put([t for _, t in timers])
            result.timers += len(timers)
            shard_horizons = self._read_horizons(
                {self._timers.shard_of(t.job_id) for _, t in timers}, now
            )
            pending = [
                (job, t.due_ms)
                for job, t in timers
                if t.bucket <= shard_horizons[self._timers.shard_of(t.job_id)]
            ]
        if messages:
            # Delays from the moment of sending: the timer writes above take their time.
            sent_at = self._clock()
            try:
                self._queue.send([(m, delay_seconds(m.visible_ms, sent_at)) for m in messages])
            except QueueError as exc:
                unsent = {m.job_id for m in exc.failed}
                for job in finished:
                    if exc.failed and job.id not in unsent:
                        with contextlib.suppress(Exception):  # (the reconciler's, else)
                            self.complete(job, now)
                raise
            result.messages += len(messages)
        for job in finished:
            self.complete(job, now)
            result.completed += 1
        return result

    def rescue(self, jobs: Sequence[Job], unsent: Sequence[RunMessage]) -> None:
        """Runs of `jobs` whose send SQS did not take (QueueError.failed), each written as a
        timer that carries its message, in the first bucket the next sweep of its shard reads:
        that sweep sends it as it is (late, not lost; a recurring job's chain goes on from its
        own timer: no second chain, no catch-up). Raises if they cannot be written."""
        by_id = {job.id: job for job in jobs}
        pending = [(by_id[m.job_id], m) for m in unsent if m.job_id in by_id]
        now = self._clock()
        horizon = minute_of(now) + self._settings.lookahead_minutes + 1
        swept: dict[int, int] = {}
        while pending:  # (the horizon handshake of `dispatch`: a bucket a sweep read, again)
            timers = [
                _carrying(m, job, max(horizon, swept.get(self._timers.shard_of(job.id), 0) + 1))
                for job, m in pending
            ]
            self._timers.put(timers)
            swept = self._read_horizons({self._timers.shard_of(t.job_id) for t in timers}, now)
            pending = [
                sent
                for sent, t in zip(pending, timers, strict=True)
                if t.bucket <= swept[self._timers.shard_of(t.job_id)]
            ]
        # A chain whose schedule ends within them is handed over in full: completed, as one
        # whose runs all went out is (it held its tenant's recurring count until the daily
        # reconciler: an outside security audit, round nine).
        after = from_ms((horizon + 1) * MINUTE_MS - 1)
        for job in {m.job_id: by_id[m.job_id] for m in unsent if m.job_id in by_id}.values():
            created = from_ms(job.created_ms)
            if job.spec.recurring and not next_occurrence(
                job.spec.schedule, created_at=created, after=after
            ):
                self.complete(job, now)

    def _read_horizons(self, shards: set[int], now: int) -> dict[int, int]:
        """The horizon of each shard (0: never swept). A shard never swept yet gets its cursor
        (its first sweep starts from now, not from its own minute) and is counted in."""
        states = self._timers.sweep_states(sorted(shards))
        for shard in shards - states.keys():
            self._timers.advance_cursor(shard, None, minute_of(now))
            self._timers.raise_shard_count(shard + 1)
        return {s: (states[s].horizon_minute or 0) if s in states else 0 for s in shards}

    def arm(self, job: Job, now: int) -> bool:
        """Dispatch a scheduled job again, from where it goes on (a replayed submission, a
        resume, an update that changed nothing). Idempotent: a chain already armed writes the
        same timer keys, and an occurrence sent twice shares its run id. True when the job was
        completed instead: its schedule is over (a timer of its chain still pending is handed
        over all the same: the sweep's _CHAINED)."""
        due = self.next_due(job, now)
        if due is not None:
            self.dispatch([(job, due)])
            return False
        if not job.spec.recurring:
            return False
        self.complete(job, now)
        return True

    def next_due(self, job: Job, now: int) -> int | None:
        """Where an armed job goes on from: a one-off's instant; a recurring job's first
        occurrence from now on (None when its schedule is over, or for an `after` job)."""
        if not job.spec.recurring:
            return job.next_due_ms
        found = next_occurrence(
            job.spec.schedule, created_at=from_ms(job.created_ms), after=from_ms(now - 1)
        )
        return to_ms(found) if found is not None else None

    def complete(self, job: Job, now: int) -> None:
        """Mark a recurring job whose schedule has ended completed (unless it changed)."""
        if job.status == JobStatus.COMPLETED:
            return  # its last timer, handed over after an early completion (`arm`)
        for _ in range(3):
            # Its item outlives its last run by the hot window, as a one-off's does.
            done = replace(
                job,
                status=JobStatus.COMPLETED,
                updated_ms=now,
                next_due_ms=None,
                expires_at=completed_expires_at(job, now, self._settings.run_ttl_seconds),
                version=job.version + 1,
            )
            try:
                # No longer an active recurring job: its count goes with the same write (until
                # 2026-11-30 a write of its own after it, which a crash between the two left
                # undone, and the retried hand-over found the job completed; a fault audit).
                self._jobs.replace(done, expected=job, release=True)
                return
            except ConditionFailed:
                # An update of a field the chain does not depend on (a name, tags) only
                # moved the version on: complete the job as it is now.
                current = self._jobs.get(job.tenant, job.id)
                if (
                    current is None
                    or current.status != job.status
                    or current.generation != job.generation
                ):
                    logger.warning("job changed while completing it", extra={"job_id": job.id})
                    return
                job = current
