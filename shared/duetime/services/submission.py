"""Submission: how a new job becomes durable and armed, alone (POST /jobs, JobService.create)
or in a batch (duetime.services.batch). Both go through the same steps:

1. `check`: the deployment's shortest rate, the runtime's time limit, the target (not one of
   duetime's own resources), an `after` job's upstream.
2. `prepare`: the first occurrence, the job id, the Idempotency-Key claim (a replay answers
   with the job the first request created, after finishing what that request started, see
   `replayed`), the active-recurring quota (a refusal frees the key it recorded: `unbind`);
   the job to write.
3. the write and the first occurrence's dispatch: `create` (one conditional put) then
   `launch`; in a batch (duetime.services.batch), one BatchWriteItem for the unkeyed jobs, the
   dispatches together. A keyed request whose conditional write finds its job written by
   another request with the key (its retry) answers as a replay of it (`replay_lost`).
   What a key is bound to: duetime.services.idempotency.
   A submission is not acknowledged unless it went out: on a failure the job is `withdraw`n
   (cancelled with SUBMISSION_FAILED, uncounted) rather than left never to run, and the error
   goes to the caller, whose retry with the same key revives it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from duetime.domain.addresses import url_refusal
from duetime.domain.errors import (
    COUNT_QUOTA_RETRY_AFTER_SECONDS,
    DomainError,
    IdempotencyConflict,
    QuotaExceeded,
    ValidationError,
)
from duetime.domain.ids import JobIds
from duetime.domain.jobs import (
    RECORDING_MARGIN_SECONDS,
    SUBMISSION_FAILED,
    Job,
    JobSpec,
    JobStatus,
    Runtime,
)
from duetime.domain.messages import RunMessage
from duetime.domain.planning import first_due, hot_until, no_occurrence
from duetime.domain.reach import region_refusal
from duetime.domain.schedule import Rate
from duetime.domain.targets import HttpTarget
from duetime.domain.timeutil import from_ms, to_ms
from duetime.observability import logger
from duetime.ports import ConditionFailed, JobStore, KeyHold, StoreError
from duetime.services.dependencies import Dependencies
from duetime.services.dispatch import Dispatcher
from duetime.services.idempotency import fingerprint, key_expires_at, same_request
from duetime.settings import Quotas, Settings


def counted(spec: JobSpec) -> bool:
    """Whether a job counts against the tenant's active recurring jobs: a recurring one, or
    an `after` one, which runs each time its upstream does (until 2026-11-30 it did not count,
    and one rate job could fan out to any number of runs an occurrence)."""
    return spec.recurring or spec.triggered


@dataclass(frozen=True)
class Prepared:
    """A new job to write, its quota counted; or (`replay`) the job an earlier request with the
    same Idempotency-Key created, as it is now."""

    job: Job
    replay: bool = False
    resumed: bool = False  # its id comes from an earlier request that died before writing it
    key: str | None = None  # the Idempotency-Key this request recorded for the job
    # What withdrawing the job must respect, if it has a key: a replay that answered with it.
    hold: KeyHold | None = None


class Submission:
    def __init__(
        self,
        jobs: JobStore,
        dispatcher: Dispatcher,
        deps: Dependencies,
        settings: Settings,
        *,
        clock: Callable[[], int],
        entropy: Callable[[int], bytes],
        batch_dispatcher: Dispatcher | None = None,
    ) -> None:
        """`batch_dispatcher`: what `dispatch_batch` dispatches with (JobService gives one whose
        sends are held to their release moments); None: `dispatcher`."""
        self._jobs = jobs
        self._dispatcher = dispatcher
        self._batch_dispatcher = batch_dispatcher or dispatcher
        self._deps = deps
        self._settings = settings
        self._clock = clock
        self._ids = JobIds(entropy)

    def create(
        self, tenant: str, spec: JobSpec, *, idempotency_key: str | None, quotas: Quotas | None
    ) -> Job:
        """Submit one job (see JobService.create)."""
        self.check(tenant, spec, quotas)
        prepared = self.prepare(tenant, spec, idempotency_key, quotas, self._clock())
        job = prepared.job
        if prepared.replay:
            return job
        limit = quotas.max_active_recurring_jobs if quotas is not None else None
        try:
            self._deps.link(job)
            self._jobs.create(job)
        except Exception as exc:
            if isinstance(exc, ConditionFailed | DomainError):  # not written (by us)
                # A key's count: kept by the job its other request wrote (ConditionFailed), or
                # carried on by a retry that resumed the key meanwhile (unbind: False).
                refused = isinstance(exc, DomainError) and not prepared.resumed
                if prepared.hold is None or (refused and self.unbind(tenant, prepared.key, job.id)):
                    self.release(job)
            elif not silent(exc):  # perhaps written, its answer lost: released if it is not
                self.withdraw(job, written=False, hold=prepared.hold)
            if isinstance(exc, ConditionFailed) and prepared.hold is not None:
                # A request with the same key wrote the job first: this one replays it.
                replayed = self.replay_lost(job, prepared.hold, limit)
                if replayed is not None:
                    return replayed
            raise
        if job.next_due_ms is not None:  # None: an `after` job, run by its upstream
            self.launch(job, prepared.hold)
        if prepared.resumed and prepared.hold is not None:
            return self.answered(job, prepared.hold, self._clock(), limit)
        return job

    def check(
        self, tenant: str, spec: JobSpec, quotas: Quotas | None, old: Job | None = None
    ) -> tuple[Job, ...]:
        """What a job body must meet beyond its own validation, at create and at PATCH (of job
        `old`). `quotas`: the tenant's limits (None: none). Returns the chain of `after` jobs
        above it, as read (Dependencies.check), but for an unchanged schedule (until 2026-12-01
        walked again: a 404 on every change once its upstream expired; a lifecycle audit)."""
        schedule = spec.schedule
        shortest = quotas.min_rate_seconds if quotas is not None else 0
        if isinstance(schedule, Rate) and schedule.seconds < shortest:
            raise QuotaExceeded(
                f"rate_seconds must be at least {shortest} for this deployment",
                COUNT_QUOTA_RETRY_AFTER_SECONDS,
                field="schedule.rate_seconds",
            )
        worker = self._settings.worker_timeout_seconds
        limit = worker - RECORDING_MARGIN_SECONDS
        if spec.runtime == Runtime.LAMBDA and spec.timeout_seconds > limit:
            # A lambda-runtime run must fit in the worker's invocation with time to record it.
            raise ValidationError(
                "timeout_seconds",
                f"must be at most {limit} for the lambda runtime (its worker stops after "
                f"{worker} s and keeps {RECORDING_MARGIN_SECONDS} s to record the outcome); "
                "use the fargate runtime for longer jobs",
            )
        # A job may not reach duetime's own queues, topics, functions, nor another tenant's.
        own, scoped = self._settings.own_resources(), self._settings.tenant_targets()
        refused = (
            own.refusal(spec.target)
            or scoped.refusal(spec.target, tenant)
            or region_refusal(spec.target, self._settings.region())
        )
        if refused is not None:
            raise ValidationError(f"target.{refused[0]}", refused[1])
        if isinstance(spec.target, HttpTarget) and (
            why := url_refusal(
                spec.target.url,
                require_https=self._settings.require_https,
                allow_private=self._settings.allow_private_targets,
            )
        ):
            raise ValidationError("target.url", why)
        unchanged = old is not None and schedule == old.spec.schedule  # its upstream may be gone
        return () if unchanged else self._deps.check(tenant, schedule, old)

    def prepare(
        self,
        tenant: str,
        spec: JobSpec,
        idempotency_key: str | None,
        quotas: Quotas | None,
        now: int,
    ) -> Prepared:
        """The job a checked body becomes, its Idempotency-Key claimed and its quota counted;
        or, for a replay of an earlier request, that request's job. A first request that died
        after claiming its key is completed under the job id it had claimed (`resumed`)."""
        limit = quotas.max_active_recurring_jobs if quotas is not None else None
        first = first_due(spec.schedule, created_at=from_ms(now))
        # (A replay answers with its job even once the schedule is over: checked below.)
        ended = first is None and not spec.triggered
        if ended and idempotency_key is None:
            raise no_occurrence(spec.schedule, from_ms(now))
        job_id = self._ids.new(now)
        resumed = False
        claimed: str | None = None
        hold = None
        if idempotency_key is not None:
            bound = fingerprint(spec)
            for again in (False, True):  # again: the key was freed while this one resumed it
                recorded = self._jobs.claim_key(
                    tenant, idempotency_key, job_id, bound, key_expires_at(now), now // 1000
                )
                if recorded is None:
                    claimed = idempotency_key
                    hold = KeyHold(idempotency_key)
                    break
                if not same_request(recorded[1], spec):
                    raise IdempotencyConflict(idempotency_key)
                hold = KeyHold(idempotency_key, secrets.token_hex(8))
                existing = self._jobs.get(tenant, recorded[0])
                if existing is not None:
                    replayed = self.replayed(existing, now, limit, hold)
                    return Prepared(self.answered(replayed, hold, now, limit), replay=True)
                # The request that recorded the key has not written its job (it died, or is
                # at it): this one writes it in its place, holding the key first, so that the
                # other, refused meanwhile (a quota), cannot free it under this job.
                if self._jobs.mark_key(tenant, idempotency_key, hold.token, recorded[0]) or again:
                    job_id, resumed = recorded[0], True
                    break
        if ended:
            self.unbind(tenant, claimed, job_id)
            raise no_occurrence(spec.schedule, from_ms(now))
        # One count a key (marked on it), carried on by a request resuming it (until 2026-12-01
        # five keyed retries through an outage counted 5, no job: a contract audit, round 8).
        if counted(spec) and limit is not None:
            keyed = (idempotency_key, job_id) if idempotency_key is not None else None
            try:
                self.reserve(tenant, limit, keyed)
            except QuotaExceeded:
                self.unbind(tenant, claimed, job_id)
                if resumed and hold is not None:  # the other's failure may withdraw it again
                    self._jobs.unmark_key(tenant, hold.key, hold.token)
                raise
        due = to_ms(first) if first is not None else None  # None: an `after` job
        job = Job(
            tenant=tenant,
            id=job_id,
            spec=spec,
            status=JobStatus.SCHEDULED,
            created_ms=now,
            updated_ms=now,
            generation_ms=now,
            next_due_ms=due,
            expires_at=self.expiry(spec, due, now),
        )
        return Prepared(job, resumed=resumed, key=claimed, hold=hold)

    def unbind(self, tenant: str, key: str | None, job_id: str) -> bool:
        """A request refused before its job was written (a quota) frees the Idempotency-Key it
        recorded: the key names no job, so a later request with it, whatever its body, is a
        first request. A key recorded by an earlier request, or resumed by a retry since,
        stays bound to it (False)."""
        return key is None or self._jobs.release_key(tenant, key, job_id)

    def expiry(self, spec: JobSpec, due: int | None, now: int) -> int | None:
        """A one-off job lives for the hot window after its run can have ended, every attempt
        and wait taken (a retry reads its job: until 2026-11-30 a short window expired it under
        its retries, which were dropped; an outside audit), and its run record no less (see
        RunExecutor): after that its history is in the archive. Others do not expire."""
        if spec.recurring or due is None:
            return None
        return hot_until(spec, max(due, now), self._settings.run_ttl_seconds)

    def launch(self, job: Job, hold: KeyHold | None = None) -> None:
        """Dispatch a new (written) job's first occurrence; on a failure the job is withdrawn
        (unless a replay answered with it meanwhile: `hold`) and the error goes to the
        caller."""
        try:
            self._dispatcher.dispatch([(job, job.next_due_ms or 0)])
        except Exception as exc:
            if not silent(exc):  # a table that gave no answer is not asked again (silent)
                self.withdraw(job, hold=hold)
            raise

    def write(self, jobs: Sequence[Job]) -> None:
        """New unkeyed jobs, by BatchWriteItem (a batch: duetime.services.batch)."""
        self._jobs.create_many(jobs)

    def write_keyed(self, job: Job) -> None:
        """A new keyed job, by a conditional put: ConditionFailed if its key's other request
        (its retry, or a concurrent copy) wrote it first."""
        self._jobs.create(job)

    def dispatch_batch(self, due: Sequence[tuple[Job, int]]) -> None:
        """A batch's first occurrences (its sends held to their release moments)."""
        self._batch_dispatcher.dispatch(due)

    def rescue(self, jobs: Sequence[Job], unsent: Sequence[RunMessage]) -> None:
        """Runs of a batch's `jobs` SQS did not take: timers for the sweep (Dispatcher.rescue)."""
        self._dispatcher.rescue(jobs, unsent)

    def replay_lost(self, job: Job, hold: KeyHold, recurring_limit: int | None) -> Job | None:
        """A keyed request whose write of its job failed its condition: a request with the
        same key (its retry, or a concurrent copy) wrote the job first, and this one answers
        as a replay of it. It finishes what the other started (`replayed`) and marks the key
        (`answered`), so that the other's failure can no longer withdraw the job this one
        answers with. None: the job is gone again."""
        existing = self._jobs.get(job.tenant, job.id)
        if existing is None:
            return None
        mine = KeyHold(hold.key, hold.token or secrets.token_hex(8))
        now = self._clock()
        replayed = self.replayed(existing, now, recurring_limit, mine)
        return self.answered(replayed, mine, now, recurring_limit)

    def abandon(self, prepared: Sequence[Prepared], failed: BaseException | None = None) -> None:
        """Prepared jobs, written or not, that will not be acknowledged (their request
        `failed`): withdrawn, until the store gives no answer (`silent`: the rest are left as
        they are; none when the request's failure was that)."""
        for p in prepared if not silent(failed) else ():
            if not self.withdraw(p.job, written=False, hold=p.hold):
                return

    def now(self) -> int:
        return self._clock()

    def answered(self, job: Job, hold: KeyHold, now: int, recurring_limit: int | None) -> Job:
        """A replay went through (its job armed, revived, or written and sent in place of a
        first request that had not written it): its key is marked with its token, so that
        no earlier request with the key, still sending, can withdraw the job from now on
        (`hold`); and the job is read again, as the replay answers with it as it is. One
        withdrawn between this replay's dispatch and its mark (the first request's send
        failed) is revived. A replay that fails marks nothing: the first request's failure
        still withdraws the job."""
        self._jobs.mark_key(job.tenant, hold.key, hold.token, job.id)
        try:
            current = self._jobs.get(job.tenant, job.id)
            if current is None:
                return job
            if current.status == JobStatus.CANCELLED and current.cancel_reason == SUBMISSION_FAILED:
                return self.replayed(current, now, recurring_limit, hold)
            return current
        except Exception as exc:  # it answers with an error after all: its mark holds nothing
            if not silent(exc):  # (a silent table is not asked again: a contract audit, round 9)
                self._jobs.unmark_key(job.tenant, hold.key, hold.token)
            raise

    def withdraw(self, job: Job, *, written: bool = True, hold: KeyHold | None = None) -> bool:
        """A submission failed before it was acknowledged: its job is cancelled
        (SUBMISSION_FAILED) and uncounted, unless a replay of the request (`hold`: its key)
        answered with the job meanwhile. `written=False`: the job may not have been written
        (a batch's write failed part way). A withdrawal that fails leaves the job as it is
        (the reconciler arms it if nothing else does) and the caller's own error goes on.
        False: the store gave no answer (`silent`), so the next would take as long."""
        now = self._clock()
        cancelled = replace(
            job,
            status=JobStatus.CANCELLED,
            updated_ms=now,
            expires_at=now // 1000 + self._settings.run_ttl_seconds,
            cancel_reason=SUBMISSION_FAILED,
            version=job.version + 1,
        )
        try:
            self._jobs.replace(cancelled, expected=job, hold=hold)
        except ConditionFailed:
            # Not written (a batch's write failed part way), or answered by a replay, or
            # changed since it was written (a replay revived it, or its owner changed it once a
            # replay named it): it lives on, still counted, and the caller still gets its own
            # error.
            stored = None if written else self._jobs.get(job.tenant, job.id)
            if written or (stored is not None and stored.created_ms == job.created_ms):
                logger.warning("a failed submission's job changed since: not withdrawn")
                return True
            if hold is not None:  # not written by this request: a key's count goes with its key
                if stored is not None or hold.token:  # its other request's job, or resumed
                    return True
                if not self._jobs.release_key(job.tenant, hold.key, job.id):
                    return True  # a retry resumed it: the count goes on with it (a review)
        except Exception as exc:
            logger.exception("withdrawing a failed submission's job failed")
            return not silent(exc)
        self.release(job)
        return True

    def reserve(self, tenant: str, limit: int, key: tuple[str, str] | None = None) -> None:
        """Count a new recurring job against the tenant's quota of active ones (an atomic
        check and increment of a counter: O(1), whatever the tenant holds); with `key`, unless
        that Idempotency-Key's count was taken already (JobStore.reserve_recurring)."""
        if self._jobs.reserve_recurring(tenant, limit, key) is False:
            raise QuotaExceeded(
                f"at most {limit} active (scheduled or paused) recurring or `after` jobs per "
                "tenant; cancel one first",
                COUNT_QUOTA_RETRY_AFTER_SECONDS,
                field="schedule",
            )

    def release(self, job: Job, failed: BaseException | None = None) -> None:
        """A counted job stopped being active (cancelled, completed, never created), or a write
        that counted it `failed`: not if that may have been applied (`StoreError.unknown`: the
        count stays, one high at worst until the daily recount; a contract audit, round 7)."""
        if counted(job.spec) and not (isinstance(failed, StoreError) and failed.unknown):
            self._jobs.release_recurring(job.tenant)

    def replayed(
        self, job: Job, now: int, recurring_limit: int | None, hold: KeyHold | None = None
    ) -> Job:
        """A replay finishes what the first request started, and otherwise shows the job as it
        is now.

        - The first request died between storing the job and dispatching it: the scheduled
          job is armed again (idempotent: the same timer keys and run ids).
        - Its dispatch failed, so it withdrew the job: the replay revives and dispatches it
          (and, failing again, withdraws it again, unless a later replay (`hold`) answered
          with it meanwhile, and answers with the error).
        - Anything else (run, paused, cancelled by its owner since) is the job's true state."""
        if job.status == JobStatus.SCHEDULED:
            self._dispatcher.arm(job, now)
        elif job.status == JobStatus.CANCELLED and job.cancel_reason == SUBMISSION_FAILED:
            if counted(job.spec) and recurring_limit is not None:
                self.reserve(job.tenant, recurring_limit)
            # From the first occurrence it had (a one-off's instant): what the first request
            # would have dispatched; the occurrences missed since go by the catch-up policy.
            due = job.next_due_ms
            revived = replace(
                job,
                status=JobStatus.SCHEDULED,
                updated_ms=now,
                next_due_ms=due,
                expires_at=self.expiry(job.spec, due, now),
                cancel_reason=None,
                version=job.version + 1,
                # Withdrawn, it was charged to no run-now or backfill (Dependencies.trigger);
                # its chain begins again (the reconciler's settle).
                linked_ms=now if job.spec.triggered else job.linked_ms,
                generation_ms=now,
            )
            try:
                self._jobs.replace(revived, expected=job)
            except ConditionFailed:  # another replay revived it meanwhile
                self.release(job)
                current = self._jobs.get(job.tenant, job.id)
                return current if current is not None else job
            except StoreError as exc:  # not written (the store read it back): its count goes
                self.release(job, exc)  # back (until 2026-11-30 it was kept: an outside audit)
                raise
            if revived.next_due_ms is not None:  # None: an `after` job, run by its upstream
                self.launch(revived, hold)
            return revived
        return job


def silent(exc: BaseException | None) -> bool:
    """The store gave no answer (its three attempts timed out: ~9-18 s on the API's clients).
    No withdrawal is tried after it: it took as long again, and the API function (29 s) was
    stopped midway (until 2026-12-01; a contract audit). The job, if its write landed, stays."""
    return isinstance(exc, StoreError) and exc.unknown
