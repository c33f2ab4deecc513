"""Job lifecycle: submit, inspect, cancel, pause, resume, update, run now.

A submission (duetime.services.submission) is durable before it is acknowledged: the job item
is written, then its first occurrence is dispatched (duetime.services.dispatch): sent straight
to SQS with DelaySeconds when it falls before the sweep horizon (short delays, `at` in the
past, run-now), otherwise written as a timer for the sweeper.

A one-off job's terminal status (succeeded/failed) is its run's: the worker writes only the
run record (a write per run saved) and reads resolve it (docs/architecture.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from duetime.domain.errors import (
    DomainError,
    IdempotencyConflict,
    IllegalTransition,
    NotFound,
    PreconditionFailed,
)
from duetime.domain.jobs import Job, JobFilter, JobSpec, JobStatus, rearms, updated_spec
from duetime.domain.messages import delay_seconds, run_message
from duetime.domain.planning import completed_expires_at, no_occurrence, rearmed_due, runs_end_ms
from duetime.domain.runs import Run, RunStatus, UnreadableRun, refuse_ended
from duetime.domain.timeutil import from_ms, to_ms
from duetime.ports import ConditionFailed, JobQueue, JobStore, Page, RunStore, TimerStore
from duetime.services.dependencies import Dependencies, relinked
from duetime.services.dispatch import Dispatcher
from duetime.services.idempotency import (
    RUN_NOW_REFUSED,
    key_expires_at,
    run_now_binding,
    run_now_bound,
)
from duetime.services.overlap import OverlapGuard
from duetime.services.release import ReleasedSender
from duetime.services.run_now import RunNowInstants
from duetime.services.submission import Submission, counted
from duetime.settings import Quotas, Settings

# How often a change without If-Match reads the job again when another request wrote it
# meanwhile: each time one of the writers wins, so this many at once all get through.
WRITE_TRIES = 10
# How many jobs of a `GET /jobs` page have their last run read at once.
VIEW_READS = 16


@dataclass(frozen=True)
class JobView:
    """A job as a client sees it: effective status and its latest run."""

    job: Job
    status: JobStatus
    last_run: Run | None


class JobService:
    def __init__(
        self,
        jobs: JobStore,
        timers: TimerStore,
        runs: RunStore,
        queue: JobQueue,
        settings: Settings,
        *,
        clock: Callable[[], int],
        entropy: Callable[[int], bytes] = os.urandom,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """`sleep`: batch create holds its sends to their release moments (services.release)."""
        self._jobs = jobs
        self._timers = timers
        self._runs = runs
        self._queue = queue
        self._settings = settings
        self._clock = clock
        self._entropy = entropy
        self._dispatcher = Dispatcher(jobs, timers, queue, settings, clock=clock)
        self._deps = Dependencies(jobs, queue, clock=clock)  # `after` jobs
        self._overlap = OverlapGuard(jobs, runs, queue, settings, clock=clock)
        self._instants = RunNowInstants(jobs, self._dispatcher, self._deps)
        held = (
            self._dispatcher
            if sleep is None
            else Dispatcher(
                jobs, timers, ReleasedSender(queue, clock=clock, sleep=sleep), settings, clock=clock
            )
        )
        self.submission = Submission(
            jobs,
            self._dispatcher,
            self._deps,
            settings,
            clock=clock,
            entropy=entropy,
            batch_dispatcher=held,
        )

    def create(
        self,
        tenant: str,
        spec: JobSpec,
        *,
        idempotency_key: str | None = None,
        quotas: Quotas | None = None,
    ) -> Job:
        """Submit a job (duetime.services.submission). With an idempotency key, a replay of the
        same request returns the job the first call created (for 24 hours), after finishing
        what that call started; the same key with another request is an IdempotencyConflict.
        `quotas`: the tenant's limits (the API's; None: no limit), the shortest rate interval
        and the active recurring jobs."""
        return self.submission.create(tenant, spec, idempotency_key=idempotency_key, quotas=quotas)

    def _send(self, job: Job, due: int, now: int, asked: int | None = None) -> None:
        """A run asked for at `asked` (now), at `due` (run-now): not jittered."""
        message = replace(run_message(job, due, jittered=False), asked_ms=asked or now)
        self._queue.send([(message, delay_seconds(due, now))])

    def get(self, tenant: str, job_id: str) -> JobView:
        job = self._jobs.get(tenant, job_id)
        if job is None or self._expired(job):
            raise NotFound(f"job {job_id} not found")
        return self._view(job)

    def fan_out(self, tenant: str, job_id: str) -> int:
        """How many runs of its `after` jobs one run of the job may start (Dependencies)."""
        return self._deps.fan_out(self.get(tenant, job_id).job)

    def list_runs(
        self, tenant: str, job_id: str, limit: int = 50, cursor: str | None = None
    ) -> Page[Run]:
        """A job's runs, newest first; another tenant's job is NotFound like an unknown one."""
        self.get(tenant, job_id)
        return self._runs.list(job_id, limit, cursor)

    def list(
        self,
        tenant: str,
        limit: int = 50,
        cursor: str | None = None,
        match: JobFilter | None = None,
    ) -> Page[JobView]:
        """One page of the tenant's jobs, newest first: `limit` jobs are read (one query), and
        those `match` refuses are left out before their last run is read, so a page may hold
        fewer (even none) while its cursor says more follow."""
        page = self._jobs.list(tenant, limit, cursor)
        kept = [
            job
            for job in page.items
            if not self._expired(job) and (match is None or match.matches(job.spec))
        ]
        # Their last runs, a query each, several at once (one after another, a page of 100
        # waited for 100 round trips: noticed by an outside security audit, round six).
        with ThreadPoolExecutor(max_workers=max(1, min(VIEW_READS, len(kept)))) as pool:
            return Page(list(pool.map(self._view, kept)), page.cursor)

    def _expired(self, job: Job) -> bool:
        """Past its TTL (DynamoDB serves it up to two days more): history, not state."""
        return job.expires_at is not None and job.expires_at <= self._clock() // 1000

    def _view(self, job: Job) -> JobView:
        last = self._runs.list(job.id, 1, None).items
        last_run = last[0] if last else None
        status = job.status
        if status == JobStatus.SCHEDULED and not job.spec.recurring and job.next_due_ms is not None:
            try:  # (a record that does not decode is shown as none, as a listing leaves it out)
                own = last_run if last_run and last_run.scheduled_ms == job.next_due_ms else None
                own = own or self._runs.get(job.id, job.next_due_ms)
            except UnreadableRun:
                own = None
            if own is not None and own.status == RunStatus.SUCCEEDED:
                status = JobStatus.SUCCEEDED
            elif own is not None and own.status == RunStatus.FAILED:
                status = JobStatus.FAILED
        return JobView(job, status, last_run)

    # `if_match`: the versions the caller accepts (If-Match), None for any; another is a
    # PreconditionFailed, checked before anything else (RFC 9110 13.2.2), as for an update.
    def cancel(
        self, tenant: str, job_id: str, *, if_match: frozenset[int] | None = None
    ) -> JobView:
        return self._transition(tenant, job_id, JobStatus.CANCELLED, if_match)

    def pause(self, tenant: str, job_id: str, *, if_match: frozenset[int] | None = None) -> JobView:
        return self._transition(tenant, job_id, JobStatus.PAUSED, if_match)

    def resume(
        self, tenant: str, job_id: str, *, if_match: frozenset[int] | None = None
    ) -> JobView:
        return self._transition(tenant, job_id, JobStatus.SCHEDULED, if_match)

    def _transition(
        self, tenant: str, job_id: str, wanted: JobStatus, if_match: frozenset[int] | None
    ) -> JobView:
        for _ in range(WRITE_TRIES):
            done = self._try_transition(tenant, job_id, wanted, if_match)
            if done is not None:
                return done
        raise IllegalTransition(job_id, "being changed by another request", wanted)

    def _try_transition(
        self, tenant: str, job_id: str, wanted: JobStatus, if_match: frozenset[int] | None
    ) -> JobView | None:
        """One read-modify-write of a status change; None: the job changed meanwhile (without
        If-Match: read it again and decide again)."""
        view = self.get(tenant, job_id)
        job = view.job
        if if_match is not None and job.version not in if_match:
            raise PreconditionFailed(job.id, if_match, job.version)
        if view.status != job.status:  # a finished one-off job
            raise IllegalTransition(job.id, view.status, wanted)
        now = self._clock()
        # Completed once its last occurrence was handed over, a job whose last run is not due
        # yet can still be cancelled: its runs not started never start (a worker drops them).
        early = job.status == JobStatus.COMPLETED and (runs_end_ms(job) or 0) > now
        base = (
            replace(job, status=JobStatus.SCHEDULED)
            if early and wanted == JobStatus.CANCELLED
            else job
        )
        updated = base.transition(wanted, now)
        withdrawn = job.cancel_reason is not None  # its submission failed: cancelled, uncounted
        if updated is job and withdrawn:
            # Cancelled by its owner now: the cancel is theirs, so a replay of the submission
            # no longer revives the job (it did, and the job ran after a 200 `cancelled`).
            updated = replace(job, cancel_reason=None, updated_ms=now, version=job.version + 1)
        if updated is job:
            # Resuming a scheduled job arms it again: a resume whose dispatch failed after its
            # status was stored is completed by resuming again.
            if wanted == JobStatus.SCHEDULED and self._dispatcher.arm(job, now):
                return self.get(tenant, job_id)  # its schedule was over: completed
            return view
        if wanted == JobStatus.CANCELLED:
            updated = replace(updated, expires_at=now // 1000 + self._settings.run_ttl_seconds)
        due: int | None = None
        if wanted == JobStatus.SCHEDULED:
            # Resume restarts the chain at the first occurrence from now on: occurrences that
            # fell due while paused are skipped, not caught up.
            due = self._dispatcher.next_due(job, now)
            if due is None and not job.spec.triggered:
                expires = completed_expires_at(job, now, self._settings.run_ttl_seconds)
                updated = replace(
                    updated, status=JobStatus.COMPLETED, next_due_ms=None, expires_at=expires
                )
            else:
                updated = replace(updated, next_due_ms=due)
        ended = updated.status in (JobStatus.CANCELLED, JobStatus.COMPLETED)
        # Its count goes with the same write (a completed job's went at its completion): until
        # 2026-11-30 a write of its own after it, left undone by a failure between the two.
        release = ended and not withdrawn and not early and counted(job.spec)
        try:
            self._jobs.replace(updated, expected=job, release=release)
        except ConditionFailed:
            if if_match is not None:  # changed since the caller's version was checked
                raise PreconditionFailed(job.id, if_match, job.version + 1) from None
            return None
        if ended:
            self._deps.unlink(job)
        if due is not None:
            self._dispatcher.dispatch([(updated, due)])
        return self._view(updated)

    def update(
        self,
        tenant: str,
        job_id: str,
        changes: object,
        *,
        if_match: frozenset[int] | None = None,
        quotas: Quotas | None = None,
    ) -> JobView:
        """PATCH a scheduled or paused job (updated_spec). `if_match`: the version the caller
        read, else PreconditionFailed; without it a concurrent write is retried over. A new
        schedule, priority or runtime re-arms the job (a new generation: the old chain's
        timers and messages are dropped); docs/api.md tells the rules."""
        for _ in range(WRITE_TRIES):
            view = self.get(tenant, job_id)
            job = view.job
            if if_match is not None and job.version not in if_match:
                raise PreconditionFailed(job.id, if_match, job.version)
            if view.status not in (JobStatus.SCHEDULED, JobStatus.PAUSED):
                raise IllegalTransition(job.id, view.status, "updated")
            spec = updated_spec(job.spec, changes)
            now = self._clock()
            if spec == job.spec and spec.text == job.spec.text:  # (JSON's values: JobSpec.text)
                # Nothing to write. A scheduled job is armed again, and a policy's change made
                # again (a lift, a hold): an update whose dispatch or gate write failed is
                # completed by sending it again.
                self._overlap.changed(job)
                if job.status == JobStatus.SCHEDULED and self._dispatcher.arm(job, now):
                    return self.get(tenant, job_id)  # its schedule was over: completed
                return view
            if job.status == JobStatus.PAUSED and not (spec.recurring or spec.triggered):
                raise IllegalTransition(job.id, "paused", "a one-off (resume it first)")
            chain = self.submission.check(tenant, spec, quotas, job)
            updated = relinked(
                job, replace(job, spec=spec, updated_ms=now, version=job.version + 1)
            )
            due: int | None = None
            if rearms(job.spec, spec):
                armed = job.next_due_ms if spec.schedule == job.spec.schedule else None
                found = rearmed_due(
                    spec.schedule,
                    created_at=from_ms(job.created_ms),
                    now=from_ms(now),
                    kept=from_ms(armed) if armed is not None else None,
                )
                if found is None and not spec.triggered:
                    if spec.schedule == job.spec.schedule:
                        raise IllegalTransition(job.id, "past its last occurrence", "updated")
                    raise no_occurrence(spec.schedule, from_ms(now))
                due = to_ms(found) if found is not None else None
                if due is not None and not spec.recurring:
                    refuse_ended("schedule.at", self._runs.get(job.id, due))
                updated = replace(
                    updated,
                    generation=job.generation + 1,
                    generation_ms=now,
                    next_due_ms=due,
                    expires_at=self.submission.expiry(spec, due, now),
                )
            reserved = counted(spec) and not counted(job.spec) and quotas is not None
            if reserved and quotas is not None:
                self.submission.reserve(tenant, quotas.max_active_recurring_jobs)
            try:
                self._deps.link(updated)
                # A new `after` only over its chain as read (a concurrent PATCH could close a loop)
                moved = spec.schedule != job.spec.schedule
                released = counted(job.spec) and not counted(spec)  # its count, in that write
                chain_read = chain if moved else ()
                self._jobs.replace(updated, expected=job, unchanged=chain_read, release=released)
            except ConditionFailed:
                # The job changed (with If-Match, the next read answers 412), or the chain
                # of its new `after` did: check again.
                if reserved:
                    self._jobs.release_recurring(tenant)
                continue
            except Exception as exc:  # refused (its upstream's dependents are full) or failed
                if reserved:  # undo, but for a write that may have been applied
                    self.submission.release(updated, exc)
                raise
            self._deps.unlink(job, updated)
            self._overlap.changed(updated, job.spec)  # its waiting one runs, or its active holds
            if due is not None and job.status == JobStatus.SCHEDULED:  # paused: resume arms it
                self._rearm(updated, due, now)
            return self._view(updated)
        raise IllegalTransition(job_id, "being changed by another request", "updated")

    def _rearm(self, job: Job, due: int, now: int) -> None:
        """Dispatch an updated job's next occurrence. A one-off whose run waits for a retry on
        that same instant goes on with it: its next attempt, under the job's new settings and
        generation (an attempt 1 would be taken for a copy of the one that failed)."""
        pending = None if job.spec.recurring else self._runs.get(job.id, due)
        if pending is None or pending.status != RunStatus.RETRYING:
            self._dispatcher.dispatch([(job, due)])
            return
        message = replace(run_message(job, due), attempt=pending.attempt + 1)
        self._queue.send([(message, delay_seconds(message.due_ms, now))])

    def run_now(
        self,
        tenant: str,
        job_id: str,
        idempotency_key: str | None = None,
        check: Callable[[Job], None] = lambda job: None,
        asked_ms: int | None = None,
    ) -> int:
        """One extra run now, besides the schedule. Returns its scheduled instant. With an
        idempotency key, a replay (the same key for the same job, within 24 hours) answers
        the first request's instant and sends that run again, in case the first request died
        before sending it (a copy shares its run id: it runs once); the key used for another
        request is an IdempotencyConflict. `check` (a request's preconditions) gates the first
        request only: a replay answered a 412 once the job had changed (until 2026-11-30). A
        key is bound only once they hold: a copy landing between the bind and the unbind of a
        refused request was taken for its replay and sent its run (until 2026-11-30).
        `asked_ms`: when the request was asked, if before now (its `after` jobs were counted
        then: duetime.services.dependencies)."""
        job = self.get(tenant, job_id).job
        now = self._clock()
        asked = now if asked_ms is None else min(asked_ms, now)
        try:
            check(job)
            if job.status != JobStatus.SCHEDULED:
                raise IllegalTransition(job_id, job.status, "run")
        except DomainError as refused:
            if idempotency_key is None:
                raise
            return self._replay_refused(job, idempotency_key, now, refused)
        instant = self._instants.reserve(job, now)
        if idempotency_key is None:
            self._send(job, instant, now, asked)
            return instant
        binding = run_now_binding(instant, now)
        recorded = self._jobs.claim_key(
            tenant, idempotency_key, job_id, binding, key_expires_at(now), now // 1000
        )
        if recorded is not None:
            return self._replay(job, idempotency_key, recorded, now)
        job = self.get(tenant, job_id).job  # as it is now that the key is bound
        if job.status != JobStatus.SCHEDULED:
            if job.updated_ms < now:  # (not seen at the first read: a clock behind)
                self.submission.unbind(tenant, idempotency_key, job_id)
                raise IllegalTransition(job_id, job.status, "run")
            # Changed since the run was asked for: the change stops it, as it would have a
            # moment later, but a completed (by its end_at) job's runs run.
            if not _completed_since(job, now):
                return instant
        self._send(job, instant, now, asked)
        return instant

    def _replay_refused(self, job: Job, key: str, now: int, refused: DomainError) -> int:
        """A keyed run-now its preconditions or its job's status refuse: a replay if its key is
        bound to a run of the job, else `refused`. The key is held a moment as refused (a copy
        that passes its checks meanwhile is told to try again), then freed."""
        recorded = self._jobs.claim_key(
            job.tenant, key, job.id, RUN_NOW_REFUSED, key_expires_at(now), now // 1000
        )
        if recorded is None:
            self.submission.unbind(job.tenant, key, job.id)
        elif recorded != (job.id, RUN_NOW_REFUSED):  # (else a copy, refused too)
            return self._replay(job, key, recorded, now)
        raise refused

    def _replay(self, job: Job, key: str, recorded: tuple[str, str], now: int) -> int:
        """The answer to a repeat of the run-now that bound `key` (`recorded`)."""
        bound = run_now_bound(recorded[1]) if recorded[0] == job.id else None
        if bound is None:
            raise IdempotencyConflict(key, in_use=recorded[1] == RUN_NOW_REFUSED)
        first, asked = bound
        job = self.get(job.tenant, job.id).job
        # Completed (by its end_at) since the ask: its runs run, so the run is sent, as without a
        # key (until 2026-11-30 it was not: found by an outside audit). Paused (resumed too: a
        # new generation) or cancelled since: dropped, nothing to send (it ran: another audit).
        unchanged = job.status == JobStatus.SCHEDULED and (job.generation_ms or 0) <= asked
        if unchanged or _completed_since(job, asked):
            self._send(job, first, now, asked)
        elif job.updated_ms < asked:  # not scheduled when asked: that request was refused
            raise IllegalTransition(job.id, job.status, "run")
        return first


def _completed_since(job: Job, instant_ms: int) -> bool:
    """Ended by its schedule at or after `instant_ms`: a run asked for then still runs."""
    return job.status == JobStatus.COMPLETED and job.updated_ms >= instant_ms
