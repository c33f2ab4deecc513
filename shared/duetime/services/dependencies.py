"""Job dependencies: `after` jobs, run once per run of their upstream job that ends as they ask.

- At create and PATCH, `check` finds the upstream (404 when it is not the tenant's) and refuses
  a cycle (walking up the chain of `after` schedules, at most MAX_CHAIN jobs). A PATCH writes
  on condition that the chain it walked was not re-armed meanwhile (a new generation: a new
  schedule among others), so two concurrent PATCHes cannot close a loop neither of them saw.
- The jobs table keeps, beside each upstream, the ids of its dependents (`JobStore.dependents`),
  so a run finds them whatever the tenant holds. An id is added before the dependent's job
  item is written and removed after it stops depending (cancel, PATCH): an entry left behind
  is harmless, since `trigger` reads each dependent and checks its schedule and status.
- The first dependent also marks the upstream's job item (`Job.has_dependents`): a run reads
  those ids with its job, before its claim, only when its job is marked
  (duetime.services.job_reads), so a job without dependents costs one item read a run, not
  two. A dependent created after that read (while the run is staged or running) is triggered
  by the upstream's next runs, not by this one.
- When a run finishes for good (succeeded, or failed after its last attempt), the executor calls
  `trigger`: one run message per matching dependent that is `scheduled` (a paused or cancelled
  one is not triggered, nor, once resumed, by a copy of that run's message that comes later:
  `Job.resumed_ms`), of its generation, carrying the upstream run's id. The dependent's run
  is at the upstream run's scheduled instant, so its run id is `<dependent id>-<upstream ms>`:
  a duplicate completion (a redelivered message) sends the same run, which runs once.
- A run asked for by a run-now or a backfill (`Run.asked_ms`), and every run below it, triggers
  only the dependents linked to their upstream by then (created, or PATCHed onto it:
  `Job.linked_ms`): the ask was charged for those (`fan_out`). Until 2026-11-30 a dependent
  created while its runs waited was triggered by each, uncharged (14 backfilled runs × 15 late
  dependents: 210 runs for 30 tokens; a security audit, round six). Later dependents run after
  the upstream's later runs. Where a run's record and a delivery differ (two upstreams' runs
  share a dependent's run id), the earlier ask holds (`duetime.domain.runs.earliest`).

A crash between recording the outcome and sending: the upstream's message was not deleted, so
SQS delivers it again; its claim finds the run finished and the executor triggers again
(duetime.services.execute). Triggering is at least once; the dependent's run id makes it once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from duetime.domain.errors import (
    COUNT_QUOTA_RETRY_AFTER_SECONDS,
    IllegalTransition,
    NotFound,
    QuotaExceeded,
    ValidationError,
)
from duetime.domain.jobs import Job, JobStatus
from duetime.domain.messages import delay_seconds, run_message
from duetime.domain.planning import attempts_seconds, runs_end_ms
from duetime.domain.runs import Run, RunStatus
from duetime.domain.schedule import After, Schedule
from duetime.ports import ConditionFailed, JobQueue, JobStore
from duetime.services.job_reads import undecodable

# A chain of `after` jobs longer than this is refused (and the cycle check stops there).
MAX_CHAIN = 32
# The most jobs that may run after one job: every run of it reads their ids (one item, far
# under DynamoDB's 400 KB) and each of those jobs, and sends their runs.
MAX_DEPENDENTS = 1_000
FIELD = "schedule.after.job_id"


# How many dependents a finished run reads at a time to send their runs (trigger).
TRIGGER_READS = 25
# A dependent whose upstream's run may still make it run (fan_out).
_MAY_RUN = (JobStatus.SCHEDULED, JobStatus.PAUSED)


class Dependencies:
    def __init__(self, jobs: JobStore, queue: JobQueue, *, clock: Callable[[], int]) -> None:
        self._jobs = jobs
        self._queue = queue
        self._clock = clock

    def check(self, tenant: str, schedule: Schedule, old: Job | None = None) -> tuple[Job, ...]:
        """For an `after` schedule of job `old` (None: a new job): its upstream must be a live
        job of the tenant (NotFound), one that may run again unless `old` already has it
        (IllegalTransition), and the chain above must not come back to the job, nor be longer,
        with the job and those below it (moved with it by a PATCH), than MAX_CHAIN + 1 jobs
        (until 2026-12-01 only the chain above was counted: an outside audit). Returns the
        jobs of that chain as read: a PATCH writes only if none of them has been re-armed
        since (`JobStore.replace`), or two at once could close a loop that neither saw (A
        after B and B after A)."""
        if not isinstance(schedule, After):
            return ()
        job_id = old.id if old is not None else None
        was = old.spec.schedule if old is not None else None
        kept = was.job_id if isinstance(was, After) else None
        chain = self._above(tenant, schedule.job_id, job_id, kept)
        if old is not None and schedule.job_id != kept:  # moved: its jobs below move with it
            room = MAX_CHAIN - len(chain)
            for depth, _ in enumerate(self._levels(old), start=1):
                if depth > room:
                    raise ValidationError(
                        FIELD,
                        f"a chain of dependencies holds at most {MAX_CHAIN + 1} jobs: this job "
                        f"would have {len(chain)} above it and at least {depth} levels below it",
                    )
        return chain

    def _above(
        self, tenant: str, upstream: str, job_id: str | None, kept: str | None
    ) -> tuple[Job, ...]:
        """The chain of jobs above a job (None: a new one) that runs after `upstream`."""
        first = upstream
        chain: list[Job] = []
        for depth in range(MAX_CHAIN):
            if upstream == job_id:
                raise ValidationError(FIELD, "would make a cycle of job dependencies")
            job = self._jobs.get(tenant, upstream)
            gone = job is not None and (job.expires_at or 1 << 62) <= self._clock() // 1000
            if job is None or gone:
                if depth == 0:
                    raise NotFound(f"job {first} not found", field=FIELD)
                return tuple(chain)  # a broken chain above cannot lead back
            if depth == 0 and upstream != kept and self._ended(job):
                raise IllegalTransition(
                    upstream, job.status, "an upstream (it runs no more)", field=FIELD
                )
            chain.append(job)
            above = job.spec.schedule
            if not isinstance(above, After):
                return tuple(chain)
            upstream = above.job_id
        raise ValidationError(
            FIELD, f"a job may have at most {MAX_CHAIN} jobs above it in its chain of dependencies"
        )

    def _ended(self, job: Job) -> bool:
        """Whether `job` has no runs to come (a one-off's own run is not read: see docs)."""
        if job.status == JobStatus.COMPLETED:  # its last runs may be due, or retrying, yet
            return (runs_end_ms(job) or 0) + attempts_seconds(job.spec) * 1000 <= self._clock()
        return job.status == JobStatus.CANCELLED

    def link(self, job: Job) -> None:
        """Before the job item is written: index an `after` job under its upstream
        (QuotaExceeded, and no job written, when the upstream has MAX_DEPENDENTS)."""
        schedule = job.spec.schedule
        if not isinstance(schedule, After):
            return
        try:
            self._jobs.add_dependent(job.tenant, schedule.job_id, job.id, at_most=MAX_DEPENDENTS)
        except ConditionFailed:
            raise QuotaExceeded(
                f"job {schedule.job_id} already has {MAX_DEPENDENTS} jobs that run after it; "
                "cancel one first",
                COUNT_QUOTA_RETRY_AFTER_SECONDS,
                field=FIELD,
            ) from None

    def unlink(self, old: Job, new: Job | None = None) -> None:
        """After the job item is written: `old` no longer depends on its upstream (cancelled,
        or `new`, its PATCHed self, depends on another job or on none)."""
        schedule = old.spec.schedule
        if not isinstance(schedule, After):
            return
        now = new.spec.schedule if new is not None else None
        if isinstance(now, After) and now.job_id == schedule.job_id:
            return
        self._jobs.remove_dependent(old.tenant, schedule.job_id, old.id)

    def trigger(self, upstream: Job, run: Run, ids: Sequence[str]) -> int:
        """Send a run of every dependent of `upstream` that `run`'s final outcome matches:
        `ids` are the dependents recorded when the run read its job (JobStore.dependents).
        Returns how many were sent; raises what the queue raises (the caller retries)."""
        if run.status not in (RunStatus.SUCCEEDED, RunStatus.FAILED) or not ids:
            return 0
        now = self._clock()
        sent = 0
        unreadable: list[str] = []
        # A few at a time: a tenant's 1,000 dependents with 64 KiB payloads, read at once,
        # held ~1.6 GB in the shared worker (a security audit, round five).
        for start in range(0, len(ids), TRIGGER_READS):
            found, bad = self._read(upstream.tenant, ids[start : start + TRIGGER_READS])
            sent += self._send_triggered(upstream, run, found, now)
            unreadable += bad
        if unreadable:  # after its siblings' runs are out: the redelivery tries it again
            raise ValueError(f"dependents of {upstream.id} that cannot be read: {unreadable}")
        return sent

    def _send_triggered(self, upstream: Job, run: Run, found: dict[str, Job], now: int) -> int:
        """Send the runs of `found`'s dependents that `run`'s outcome matches: how many."""
        # A run triggers those linked when it read its dependents (its last attempt's claim), or
        # when it was asked for; and those not paused when it ended. Else a copy of its message
        # (a lost delete, a failed trigger, a redrive) read later ones (outside audits).
        claimed = run.attempts[-1].started_ms if run.attempts else now
        linked_by = run.asked_ms if run.asked_ms is not None else claimed
        ended = run.finished_ms or now
        messages = []
        for job in sorted(found.values(), key=lambda j: j.id):
            schedule = job.spec.schedule
            if not isinstance(schedule, After) or schedule.job_id != upstream.id:
                continue
            if job.status != JobStatus.SCHEDULED or job.tenant != upstream.tenant:
                continue
            if schedule.on not in ("finished", run.status.value):
                continue
            if (job.linked_ms or job.created_ms) > linked_by or (job.resumed_ms or 0) > ended:
                continue  # linked since, or paused then (a run-now's ask charged those linked)
            # Starts now, plus the dependent's own jitter for this run.
            due = now + job.due_ms(run.scheduled_ms) - run.scheduled_ms
            message = replace(
                run_message(job, run.scheduled_ms, jittered=False),
                due_ms=due,
                upstream_run_id=run.run_id,
                asked_ms=run.asked_ms,
            )
            messages.append((message, delay_seconds(due, now)))
        if messages:
            self._queue.send(messages)
        return len(messages)

    def fan_out(self, job: Job) -> int:
        """How many runs one run of `job` may start below it: its `after` jobs that are
        scheduled or paused (one may be resumed before the run ends: uncharged, that sent 50
        runs for one token; a security audit, round five), theirs, and so on (each job once).
        A run-now and each run of a backfill spend a submission token for each (until
        2026-11-30 one token started up to 1,000 runs this way; found by an outside audit).
        A few reads a level (TRIGGER_READS jobs each: 999 dependents of 64 KiB read at once
        held ~1.5 GiB in the 512 MiB API; a security audit, round seven), none without
        dependents."""
        return sum(len(level) for level in self._levels(job))

    def _levels(self, job: Job) -> Iterator[list[str]]:
        """The jobs below `job` that may still run, a level at a time (each job once)."""
        seen = {job.id}
        # (None: stored before the mark, maybe with dependents: read, as its runs do.)
        below = self._jobs.dependents(job.tenant, job.id) if job.has_dependents is not False else ()
        while below:
            fresh = [i for i in dict.fromkeys(below) if i not in seen]
            seen.update(fresh)
            level: list[str] = []
            ids: list[str] = []
            for start in range(0, len(fresh), TRIGGER_READS):
                keys = [(job.tenant, i) for i in fresh[start : start + TRIGGER_READS]]
                try:
                    found = self._jobs.get_with_dependents(keys)
                except Exception as exc:
                    if not undecodable(exc):
                        raise
                    level += [i for _, i in keys]  # counted, and run none: it does not decode
                    continue
                live = {key[1]: under for key, (j, under) in found.items() if j.status in _MAY_RUN}
                level += live
                ids += [i for under in live.values() for i in under]
            if level:
                yield level
            below = tuple(ids)

    def _read(self, tenant: str, ids: Sequence[str]) -> tuple[dict[str, Job], list[str]]:
        """The dependents, and those whose items do not decode: one such item fails a read of
        them all, so then each is read alone (found by an outside audit: one bad dependent
        held back its siblings for good). A failure of the store itself is raised."""
        try:
            return self._jobs.get_many([(tenant, i) for i in ids]), []
        except Exception as exc:
            if not undecodable(exc):  # the store's failure (throttled): the caller retries
                raise
            if len(ids) == 1:
                return {}, list(ids)
        found: dict[str, Job] = {}
        unreadable: list[str] = []
        for job_id in ids:
            try:
                found |= self._jobs.get_many([(tenant, job_id)])
            except Exception as exc:
                if not undecodable(exc):
                    raise
                unreadable.append(job_id)
        return found, unreadable


def relinked(old: Job, new: Job) -> Job:
    """`new`, PATCHed from `old`, with the instant it was linked to its upstream when it runs
    after a job it did not (the change's `updated_ms`; trigger)."""
    schedule, was = new.spec.schedule, old.spec.schedule
    if not isinstance(schedule, After) or (
        isinstance(was, After) and was.job_id == schedule.job_id
    ):
        return new
    return replace(new, linked_ms=new.updated_ms)
