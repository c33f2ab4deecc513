"""Backfill: run the occurrences of a recurring job's past range that never ran.

The range and its occurrences are the domain's (duetime.domain.backfill). An occurrence with a
run record (whatever its status: succeeded, failed, skipped, buffered, running) is left alone;
the others are sent as ordinary first attempts of the job's current generation, with the run
ids the schedule would have given them (`<job id>-<scheduled ms>`), so a copy of one still on
its way is a duplicate the claim settles, never a second run.

Sent at once: a backfilled run is due at the backfill's instant (its lateness is counted from
then), its `scheduled_for` the occurrence; one whose jittered start is still to come is due
at that start, as a copy of its own message (which may be on its way, or dropped). The
overlap policy still applies at claim time: under `skip` or `buffer_one` the occurrences sent
together meet each other at the gate. Cost: one batch read of the run records (BatchGetItem,
100 keys a request) and one SendMessageBatch per 10 occurrences sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from duetime.domain.backfill import backfill_occurrences, parse_backfill_range
from duetime.domain.errors import IllegalTransition
from duetime.domain.jobs import JobStatus
from duetime.domain.messages import delay_seconds, run_message
from duetime.domain.timeutil import from_ms
from duetime.ports import JobQueue, QueueError, RunStore
from duetime.services.jobs import JobService
from duetime.settings import Settings

SEND_CHUNK = 100  # occurrences handed to the queue per call (it batches them by 10)


class Backfill:
    def __init__(
        self,
        service: JobService,
        runs: RunStore,
        queue: JobQueue,
        settings: Settings,
        *,
        clock: Callable[[], int],
    ) -> None:
        self._service = service
        self._runs = runs
        self._queue = queue
        self._settings = settings
        self._clock = clock

    def backfill(
        self,
        tenant: str,
        job_id: str,
        body: Callable[[], object],
        *,
        sent: Callable[[int], None] = lambda count: None,
        asked_ms: int | None = None,
    ) -> int:
        """Send the occurrences of the range `body()` names that have no run record yet;
        returns how many were sent, and tells `sent` each part's count once it is out (the API
        charges it; `asked_ms`: when it was asked, if before now: its runs trigger the `after`
        jobs there were then). NotFound (unknown job, another tenant's), IllegalTransition (a
        one-off, paused or cancelled job), ValidationError (the body, the range). The body is
        read once the job is found: an unknown job is a 404 before a bad body is a 400."""
        job = self._service.get(tenant, job_id).job
        if not job.spec.recurring:
            kind = "an after job" if job.spec.triggered else "a one-off job"
            raise IllegalTransition(job.id, kind, "backfilled")
        if job.status not in (JobStatus.SCHEDULED, JobStatus.COMPLETED):
            # A paused or cancelled job's runs are dropped by the worker: refuse, not lose.
            raise IllegalTransition(job.id, job.status, "backfilled")
        now = self._clock()
        span = parse_backfill_range(
            body(), now_ms=now, earliest_ms=now - self._settings.run_ttl_seconds * 1000
        )
        occurrences = backfill_occurrences(
            job.spec.schedule, created_at=from_ms(job.created_ms), span=span
        )
        recorded = self._runs.get_many([(job.id, ms) for ms in occurrences]) if occurrences else {}
        # One whose jitter puts its start after now may be on its way (its chain sent it, and
        # no pause or change dropped it since) or not (dropped by a pause, a change or the
        # catch-up after downtime): it is sent for its own start, which a copy on its way
        # shares, with its run id (the claim makes them one run). Sent now, it ran early, and
        # under `skip` met the others at the gate and was recorded `skipped` (until
        # 2026-11-30); left to a message the catch-up had dropped, it never ran (until
        # 2026-12-01; outside lifecycle audits).
        missing = [ms for ms in occurrences if (job.id, ms) not in recorded]
        asked = now if asked_ms is None else min(asked_ms, now)
        for start in range(0, len(missing), SEND_CHUNK):
            part = missing[start : start + SEND_CHUNK]
            # (One still to come is a copy of its scheduled message: not asked, so whichever
            # of the two is claimed first, its run triggers the `after` jobs there are then.)
            messages = [
                replace(run_message(job, ms), due_ms=now, asked_ms=asked)
                if job.due_ms(ms) <= now
                else run_message(job, ms)
                for ms in part
            ]
            try:
                self._queue.send([(m, delay_seconds(m.visible_ms, now)) for m in messages])
            except QueueError as exc:  # those that went out are charged all the same
                sent(len(part) - len(exc.failed))
                raise
            sent(len(part))
        return len(missing)
