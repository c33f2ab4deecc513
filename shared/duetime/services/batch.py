"""Batch submission (POST /jobs/batch): up to MAX_BATCH_JOBS jobs in one request, each answered
on its own, in order. Every item goes through the steps of a single submission
(duetime.services.submission: check, prepare, launch, withdraw), so it gets the same checks,
quotas and idempotency semantics, and one item's error (invalid, over a quota, an idempotency
conflict) leaves the others alone.

What the items share is batched:
- the items without an idempotency key are written by BatchWriteItem (25 a request), without
  a condition: a fresh id is a new ULID (80 random bits) that no stored job can have, so the
  `attribute_not_exists` of a single create guards nothing. A keyed item's job keeps the
  conditional put: a retry with its key may write the same id (the id its record names) at the
  same moment, or before a write of ours that the SDK retried lands; the condition keeps the
  job the client was answered with (BatchSubmitter._write).
- the idempotency claims stay conditional puts, one per keyed item: the condition is the claim
  (a transaction would fail the whole batch on one replayed key).
- the first occurrences of all new jobs are dispatched at once (Dispatcher.dispatch): their
  timers by BatchWriteItem, their messages by SendMessageBatch, 10 a request per queue.

A failure of the shared writes or sends is no item's fault: as for a single create, the jobs
not yet acknowledged are withdrawn (cancelled, SUBMISSION_FAILED) and the error goes to the
caller, whose retry with the same idempotency keys revives them; but runs SQS did not take
(some, or all, named by the queue) become timers the next sweep sends: their jobs stand.

An `after` job is refused in a batch (400 on schedule.after): its upstream is checked and
indexed one job at a time (POST /jobs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from duetime.domain.errors import (
    IDEMPOTENCY_FIELD,
    DomainError,
    IdempotencyConflict,
    NotFound,
    ValidationError,
)
from duetime.domain.jobs import JobSpec
from duetime.observability import logger
from duetime.ports import ConditionFailed, QueueError
from duetime.services.idempotency import fingerprint
from duetime.services.jobs import JobService, JobView
from duetime.services.submission import Prepared, silent
from duetime.settings import Quotas

MAX_BATCH_JOBS = 100


@dataclass(frozen=True)
class BatchJob:
    """One valid item of a batch: its job body and its own idempotency key."""

    spec: JobSpec
    idempotency_key: str | None = None


BatchResult = JobView | DomainError


class BatchSubmitter:
    def __init__(self, service: JobService) -> None:
        self._service = service
        self._submission = service.submission

    def _as_now(self, tenant: str, job_id: str) -> JobView | DomainError:
        """A replayed item's job as it is now; its own 404 when it has expired since (its
        record outlived by its key: a hot window under a day). Until 2026-11-30 that 404 was
        the whole batch's, the other items unwritten (found by an outside audit)."""
        try:
            return self._service.get(tenant, job_id)
        except NotFound as exc:
            return exc

    def create(
        self,
        tenant: str,
        items: Sequence[BatchJob | DomainError],
        *,
        quotas: Quotas | None = None,
    ) -> list[BatchResult]:
        """Submit the valid items (an item already an error stays one); a result per item,
        in order: the job (a replay: as it is now) or the error that refused it."""
        submission = self._submission
        now = submission.now()
        results: list[BatchResult | None] = [None] * len(items)
        new: dict[int, Prepared] = {}  # item -> its new job, prepared (its quota counted)
        keyed: dict[str, tuple[int, str]] = {}  # key -> (first item with it, fingerprint)
        same_as: dict[int, int] = {}  # an item that repeats an earlier item's key and body
        try:
            for index, item in enumerate(items):
                if isinstance(item, DomainError):
                    results[index] = item
                    continue
                key = item.idempotency_key
                if key is not None and key in keyed:
                    first, bound = keyed[key]
                    if bound != fingerprint(item.spec):
                        results[index] = IdempotencyConflict(key, IDEMPOTENCY_FIELD)
                    else:
                        same_as[index] = first
                    continue
                if key is not None:
                    keyed[key] = (index, fingerprint(item.spec))
                try:
                    prepared = self._prepare(tenant, item, now, quotas)
                except DomainError as exc:
                    # A refused item binds nothing (as a refused POST /jobs): a later item
                    # with its key is a first request, whatever its body.
                    if key is not None:
                        del keyed[key]
                    if isinstance(exc, IdempotencyConflict):  # the item's own key
                        exc = IdempotencyConflict(exc.key, IDEMPOTENCY_FIELD)
                    results[index] = exc
                    continue
                if prepared.replay:
                    results[index] = self._as_now(tenant, prepared.job.id)
                else:
                    new[index] = prepared
        except Exception as exc:
            submission.abandon(list(new.values()), exc)
            raise
        written = self._write(list(new.values()), quotas)
        for index, prepared in new.items():
            job = prepared.job
            # Resumed (an earlier request's id), or written first by a concurrent replay: it is
            # answered as it is now.
            view = JobView(job, job.status, None) if job.id in written else None
            results[index] = view or self._as_now(tenant, job.id)
        for index, first in same_as.items():
            results[index] = results[first]
        answered = [r for r in results if r is not None]
        if len(answered) != len(items):
            raise RuntimeError("a batch item was left without a result")
        return answered

    def _write(self, new: Sequence[Prepared], quotas: Quotas | None) -> set[str]:
        """Write prepared jobs and dispatch their first occurrences, together: the unkeyed ones
        by one unconditional BatchWriteItem (a new ULID no stored job can have), a keyed one by
        a conditional put, as a retry with its key may write the same id at the same moment (a
        resumed id), or later (a write of ours that lands late, after the client's retry
        wrote, sent and answered the job, would overwrite it). Returns the ids of the jobs it
        wrote fresh, to answer as written (a resumed job, or one a retry wrote first, is
        answered as it is now). Runs whose send SQS did not take become timers the next sweep
        sends (late, not lost; until 2026-11-30 every job was withdrawn, those whose runs had
        run too: an outside fault audit). On another failure every job not acknowledged is
        withdrawn, then the error raised. `quotas`: the tenant's (for a job revived here)."""
        submission = self._submission
        written = [p.job for p in new if p.hold is None]
        lost: set[str] = set()  # jobs a retry with the same key wrote first: theirs, not ours
        try:
            submission.write(list(written))
            for p in new:
                if p.hold is None:
                    continue
                try:
                    submission.write_keyed(p.job)
                except ConditionFailed:  # written by its key's other request: one count a key
                    lost.add(p.job.id)
                    continue
                written.append(p.job)
            try:
                submission.dispatch_batch([(job, job.next_due_ms or 0) for job in written])
            except QueueError as exc:
                if not exc.failed:  # which runs went out is not known: none stands
                    raise
                submission.rescue(written, exc.failed)
        except Exception as exc:
            submission.abandon([p for p in new if p.job.id not in lost], exc)
            raise
        limit = quotas.max_active_recurring_jobs if quotas is not None else None
        for p in new:
            if p.hold is None or not (p.resumed or p.job.id in lost):
                continue
            try:
                if p.job.id in lost:
                    submission.replay_lost(p.job, p.hold, limit)
                else:
                    submission.answered(p.job, p.hold, submission.now(), limit)
            except Exception as exc:  # withdrawn meanwhile and not revived: answered as it is
                if silent(exc):  # the table gave no answer: the next would wait as long (a 500)
                    raise
                logger.warning("a keyed batch job was withdrawn and not revived")
        return {p.job.id for p in new if not p.resumed and p.job.id not in lost}

    def _prepare(self, tenant: str, item: BatchJob, now: int, quotas: Quotas | None) -> Prepared:
        if item.spec.triggered:
            raise ValidationError("schedule.after", "not in a batch: create it with POST /jobs")
        self._submission.check(tenant, item.spec, quotas)
        return self._submission.prepare(tenant, item.spec, item.idempotency_key, quotas, now)
