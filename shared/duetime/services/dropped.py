"""A delivery whose job no longer lets its run start (cancelled, paused, changed since, gone):
what becomes of the run it names (duetime.services.execute, step 2), by its record:

- a retry's run, `retrying`: it ends `failed`, its last attempt's error kept with why it
  stops, rather than showing as in progress for good (and holding an overlap gate);
- a run an earlier receive of this very message claimed and died holding: it ends `failed`
  as abandoned once its lease is over (until then the message is kept);
- a run that had finished (the message was kept, or came back after a crash, to send its
  `after` jobs' runs or to free its overlap gate): that is done now, as a duplicate delivery
  does it. Until 2026-11-30 the change dropped it, and the dependents of a run that had
  succeeded never ran (found by an outside fault audit);
- a buffered occurrence whose start its holder's release sent: it ends `skipped`, and the
  gate it was handed goes on (until 2026-11-30 a first delivery was taken to have no record,
  and it showed `buffered` until its TTL; an outside lifecycle audit).

A run an upstream's run triggered (`after`) that a pause or a change drops, with no record, is
recorded `skipped`: its upstream's message may come back (its worker died between the trigger
sends, its delete was lost) and send it again under the job's generation after the resume;
the record makes that copy a duplicate (until 2026-11-30 it ran: an outside fault audit).
"""

from __future__ import annotations

from collections.abc import Callable

from duetime.domain.jobs import Job, JobStatus
from duetime.domain.messages import RunMessage
from duetime.domain.runs import (
    LEASE_MARGIN_MS,
    Run,
    RunOutcome,
    RunStatus,
    abandoned_end,
    not_retried,
    stopped_by_its_job,
)
from duetime.domain.schedule import After
from duetime.ports import Delivery, RunStore
from duetime.services.job_reads import Found
from duetime.services.overlap import OverlapGuard, unclaimed
from duetime.services.results import Result, lease_end
from duetime.settings import Settings

ABANDONED_ERROR = "the worker stopped during the attempt (killed at its timeout, or crashed)"


class DroppedRuns:
    def __init__(
        self,
        runs: RunStore,
        settings: Settings,
        *,
        clock: Callable[[], int],
        after_the_lease: Callable[[Delivery, Run, str], Result],
        finished: Callable[[Found, RunMessage, Run], Result],
        overlap: OverlapGuard,
    ) -> None:
        """`after_the_lease`: the result that brings the message back once a run's lease is
        over; `finished`: what a duplicate delivery of a finished run does (its dependents'
        runs, its gate); `overlap`: the gate a run this ends frees."""
        self._runs = runs
        self._settings = settings
        self._clock = clock
        self._after_the_lease = after_the_lease
        self._finished = finished
        self._overlap = overlap

    def _record_dropped(self, job: Job, message: RunMessage, buffered: bool) -> None:
        """A run that a pause or a change of its job dropped before it began: `skipped`.
        A buffered occurrence's, whose start its release had sent (it showed `buffered` until
        its record's TTL: until 2026-11-30, a lifecycle audit); a triggered run's (below),
        while the job still runs after the upstream that sent it (a cancelled job's runs stop
        for good; one moved onto another upstream is owed that one's run of the same instant,
        whose run id is the same: until 2026-11-30 the record took it for a copy)."""
        schedule = job.spec.schedule
        upstream = (message.upstream_run_id or "").rpartition("-")[0]  # <job id>-<instant>
        if not buffered and (
            job.status == JobStatus.CANCELLED
            or not isinstance(schedule, After)
            or schedule.job_id != upstream
        ):
            return
        self._runs.record(
            unclaimed(
                job,
                message.scheduled_ms,
                RunStatus.SKIPPED,
                self._clock(),
                self._settings.run_ttl_seconds,
                due_ms=message.due_ms,
                asked_ms=message.asked_ms,
            )
        )

    def end(
        self, delivery: Delivery, message: RunMessage, reason: str, found: Found | None
    ) -> Result | None:
        """What becomes of the run of a dropped delivery: a result when the message must stay
        (or has more to do), else None (it is dropped)."""
        # (Read for a first delivery too: a buffered occurrence's first attempt has a record.
        # Ended by a pause or a cancel, or by a change if this is the start its release sent:
        # a copy of an earlier generation's message for the same instant, dropped as changed,
        # must not end the new one waiting there. Until 2026-11-30 a change never ended it,
        # and it showed `buffered` for good: an outside lifecycle audit.)
        run = self._runs.get(message.job_id, message.scheduled_ms)
        stopped = found is not None and found[0].status in (JobStatus.PAUSED, JobStatus.CANCELLED)
        buffered = (
            run is not None
            and run.status == RunStatus.BUFFERED
            and found is not None
            and (stopped or self._overlap.handed(found[0], message))
        )
        if run is None or buffered:
            if found is not None and (buffered or message.upstream_run_id is not None):
                self._record_dropped(found[0], message, buffered)
            # The gate it was handed goes on; so does one a holder that died before its claim
            # was handed (until 2026-12-01 nothing freed it, and the occurrence buffered behind
            # it stayed `buffered` for good: an outside fault audit, round twelve).
            if found is not None and (buffered or (run is None and stopped)):
                self._overlap.release(found[0], message.scheduled_ms)
            return None
        now = self._clock()
        if run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            # (Not one that a change ended, a retry dropped: it triggers nothing, however often
            # its message comes; a review of this change.)
            owed = (
                None
                if found is None or stopped_by_its_job(run)
                else self._finished(found, message, run)
            )
            return owed if owed is not None and owed.soon else None
        if run.status == RunStatus.RETRYING and run.attempt == message.attempt - 1:
            last = run.attempts[-1] if run.attempts else None
            error = not_retried(last.error if last else None, reason)
            ended = (last.finished_ms if last else None) or now
            if last is not None and last.error == ABANDONED_ERROR and found is not None:
                # Its worker died: it ended by its lease's end at the latest, not when that was
                # found (until 2026-12-01 a 90-minute duration; an outside history audit).
                lease = found[0].spec.timeout_seconds * 1000 + LEASE_MARGIN_MS
                ended = min(ended, last.started_ms + lease)
            done = self._runs.finish(run, RunOutcome(RunStatus.FAILED, ended, error))
        elif (
            run.status == RunStatus.RUNNING
            and run.lease is not None
            and run.lease.message_id == delivery.message_id
        ):
            if lease_end(run.lease, self._settings) > now:  # its holder may still be running it
                return self._after_the_lease(delivery, run, "dropped once its lease is over")
            error = not_retried(ABANDONED_ERROR, reason)
            done = self._runs.finish(
                run, RunOutcome(RunStatus.FAILED, abandoned_end(run, now), error)
            )
        else:
            return None
        if done is not None and found is not None:
            # Its gate too: the release reads the job, finds it paused, cancelled or changed,
            # and ends a waiting occurrence `skipped` (until 2026-11-30 it stayed `buffered`
            # until its record's TTL; an outside lifecycle audit).
            self._overlap.release(found[0], message.scheduled_ms)
        return None
