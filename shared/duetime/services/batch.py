"""Batch submission (POST /jobs/batch): up to MAX_BATCH_JOBS jobs in one request, each answered
on its own, in order. The batch path of JobService.create (kept beside it, in its own module
for the module-size limit, over the service's collaborators): every item gets the checks, the
quotas and the idempotency semantics of a single submission, and one item's error (invalid,
over a quota, an idempotency conflict) leaves the others alone.

What the items share is batched:
- the job items with fresh ids are written by BatchWriteItem (25 a request), without a
  condition: a fresh id is a new ULID (80 random bits) that no stored job can have, so the
  `attribute_not_exists` of a single create guards nothing. A job whose id comes from the
  idempotency record of an earlier request that died before writing it may be written at the
  same moment by another replay: it keeps the conditional put (rare: one per such item).
- the idempotency claims stay conditional puts, one per keyed item: the condition is the claim
  (a transaction would fail the whole batch on one replayed key).
- the first occurrences of all new jobs are dispatched at once (Dispatcher.dispatch): their
  timers by BatchWriteItem, their messages by SendMessageBatch, 10 a request per queue.

A failure of the shared writes or sends is no item's fault: as for a single create, the jobs
not yet acknowledged are cancelled (SUBMISSION_FAILED) and the error goes to the caller, whose
retry with the same idempotency keys revives them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, replace

from duetime.domain.errors import DomainError, IdempotencyConflict, ValidationError
from duetime.domain.ids import new_job_id
from duetime.domain.jobs import SUBMISSION_FAILED, Job, JobSpec, JobStatus
from duetime.domain.planning import first_due
from duetime.domain.timeutil import from_ms, to_ms
from duetime.ports import ConditionFailed
from duetime.services.jobs import IDEMPOTENCY_SECONDS, JobService, JobView
from duetime.services.submission import _check_min_rate, _fingerprint
from duetime.settings import Quotas

MAX_BATCH_JOBS = 100


@dataclass(frozen=True)
class BatchJob:
    """One valid item of a batch: its job body and its own idempotency key."""

    spec: JobSpec
    idempotency_key: str | None = None


BatchResult = JobView | DomainError


@dataclass(frozen=True)
class _New:
    index: int
    job: Job
    resumed: bool  # its id comes from an earlier request's idempotency record


class BatchSubmitter:
    def __init__(self, service: JobService) -> None:
        self._service = service

    def create(
        self,
        tenant: str,
        items: Sequence[BatchJob | DomainError],
        *,
        quotas: Quotas | None = None,
    ) -> list[BatchResult]:
        """Submit the valid items (an item already an error stays one); a result per item,
        in order: the job (a replay: as it is now) or the error that refused it."""
        service = self._service
        now = service._clock()
        results: list[BatchResult | None] = [None] * len(items)
        new: list[_New] = []
        keyed: dict[str, tuple[int, str]] = {}  # key -> (first item with it, fingerprint)
        same_as: dict[int, int] = {}  # an item that repeats an earlier item's key and body
        lost: set[str] = set()  # resumed jobs another replay wrote first: theirs, not ours
        try:
            for index, item in enumerate(items):
                if isinstance(item, DomainError):
                    results[index] = item
                    continue
                key = item.idempotency_key
                if key is not None and key in keyed:
                    first, fingerprint = keyed[key]
                    if fingerprint != _fingerprint(item.spec):
                        results[index] = IdempotencyConflict(key)
                    else:
                        same_as[index] = first
                    continue
                if key is not None:
                    keyed[key] = (index, _fingerprint(item.spec))
                try:
                    planned = self._plan(tenant, item, now, quotas)
                except DomainError as exc:
                    results[index] = exc
                    continue
                if isinstance(planned, JobView):
                    results[index] = planned
                else:
                    new.append(_New(index, planned[0], planned[1]))
            for done in self._launch(new, lost):
                results[done.index] = JobView(done.job, done.job.status, None)
            for done in new:
                if results[done.index] is None:  # a concurrent replay wrote it first
                    results[done.index] = service.get(tenant, done.job.id)
        except Exception:
            self._abandon([n.job for n in new if n.job.id not in lost])
            raise
        for index, first in same_as.items():
            results[index] = results[first]
        answered = [r for r in results if r is not None]
        if len(answered) != len(items):
            raise RuntimeError("a batch item was left without a result")
        return answered

    def _plan(
        self, tenant: str, item: BatchJob, now: int, quotas: Quotas | None
    ) -> JobView | tuple[Job, bool]:
        """JobService.create up to its write: the job to write (and whether its id came from
        an earlier request's record), or, for a replay, the job as it is now."""
        service = self._service
        spec = item.spec
        if quotas is not None:
            _check_min_rate(spec, quotas)
        recurring_limit = quotas.max_active_recurring_jobs if quotas is not None else None
        service._check_runtime(spec)
        service._check_target(spec)
        if spec.triggered:  # its upstream is checked and indexed one job at a time
            raise ValidationError("schedule.after", "not in a batch: create it with POST /jobs")
        first = first_due(spec.schedule, created_at=from_ms(now))
        if first is None:
            raise ValidationError("schedule", "has no occurrence in the future")
        job_id = new_job_id(now, service._entropy(10))
        resumed = False
        key = item.idempotency_key
        if key is not None:
            fingerprint = _fingerprint(spec)
            recorded = service._jobs.claim_key(
                tenant, key, job_id, fingerprint, now // 1000 + IDEMPOTENCY_SECONDS
            )
            if recorded is not None:
                if recorded[1] != fingerprint:
                    raise IdempotencyConflict(key)
                existing = service._jobs.get(tenant, recorded[0])
                if existing is not None:
                    replayed = service._replayed(existing, now, recurring_limit)
                    return service.get(tenant, replayed.id)
                job_id, resumed = recorded[0], True
        if spec.recurring and recurring_limit is not None:
            service._reserve_recurring(tenant, recurring_limit)
        due = to_ms(first)
        job = Job(
            tenant=tenant,
            id=job_id,
            spec=spec,
            status=JobStatus.SCHEDULED,
            created_ms=now,
            updated_ms=now,
            next_due_ms=due,
            expires_at=None
            if spec.recurring
            else max(due, now) // 1000 + service._settings.run_ttl_seconds,
        )
        return job, resumed

    def _launch(self, new: list[_New], lost: set[str]) -> list[_New]:
        """Write the new jobs and dispatch their first occurrences, together. Returns those
        written by this request; a resumed one a concurrent replay wrote first goes in `lost`."""
        service = self._service
        service._jobs.create_many([n.job for n in new if not n.resumed])
        written = [n for n in new if not n.resumed]
        for n in new:
            if not n.resumed:
                continue
            try:
                service._jobs.create(n.job)
            except ConditionFailed:
                service._release(n.job)  # the other request counted it
                lost.add(n.job.id)
                continue
            written.append(n)
        if written:
            service._dispatcher.dispatch([(n.job, n.job.next_due_ms or 0) for n in written])
        return written

    def _abandon(self, jobs: list[Job]) -> None:
        """The batch failed before it was acknowledged: its new jobs are cancelled (those
        written) and uncounted, as JobService._launch does for one."""
        service = self._service
        now = service._clock()
        for job in jobs:
            cancelled = replace(
                job,
                status=JobStatus.CANCELLED,
                updated_ms=now,
                expires_at=now // 1000 + service._settings.run_ttl_seconds,
                cancel_reason=SUBMISSION_FAILED,
                version=job.version + 1,
            )
            with suppress(ConditionFailed):  # never written
                service._jobs.replace(cancelled, expected=job)
            service._release(job)
