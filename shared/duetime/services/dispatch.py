"""Turning due occurrences into SQS messages or timers: shared by submission and the sweeper.

For each (job, occurrence):
- one-off: a message if it falls before the horizon, else a timer;
- recurring: every occurrence before the horizon becomes a message (each is its own run) and
  one timer holds the chain's next occurrence; a schedule that has ended completes the job.

The horizon is the newest bucket minute a sweep may already have read (the global horizon,
or minute(now) + lookahead + 1 when that is further: a sweep starting in the next minute
reaches that far). After writing timers we read the global horizon again: a timer whose bucket
it has reached may have been missed by that sweep, so it is dispatched again (as a message),
and a duplicate is absorbed by the worker's claim (see duetime.services.sweep).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from duetime.config import Settings
from duetime.domain.ids import minute_of
from duetime.domain.jobs import Job, JobStatus
from duetime.domain.planning import plan_recurring
from duetime.domain.timeutil import MINUTE_MS, from_ms
from duetime.observability import logger
from duetime.ports import ConditionFailed, JobQueue, JobStore, RunMessage, Timer, TimerStore


def delay_seconds(due_ms: int, now_ms: int) -> int:
    """SQS releases the message at most this long after now: never after the due instant (the
    worker waits out the remaining fraction of a second), never beyond SQS's 900 s."""
    return max(0, min(900, (due_ms - now_ms) // 1000))


def run_message(job: Job, scheduled_ms: int) -> RunMessage:
    return RunMessage(
        tenant=job.tenant,
        job_id=job.id,
        scheduled_ms=scheduled_ms,
        attempt=1,
        due_ms=scheduled_ms,
        runtime=job.spec.runtime,
        priority=job.spec.priority,
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
        queue: JobQueue,
        settings: Settings,
        *,
        clock: Callable[[], int],
    ) -> None:
        self._jobs = jobs
        self._timers = timers
        self._queue = queue
        self._settings = settings
        self._clock = clock

    def dispatch(self, due: Sequence[tuple[Job, int]]) -> Dispatched:
        result = Dispatched()
        now = self._clock()
        horizon = max(
            self._timers.sweep_state().horizon_minute or 0,
            minute_of(now) + self._settings.lookahead_minutes + 1,
        )
        messages: list[tuple[RunMessage, int]] = []
        pending = list(due)
        while pending:
            horizon_ms = (horizon + 1) * MINUTE_MS
            timers: list[tuple[Job, Timer]] = []
            for job, due_ms in pending:
                if not job.spec.recurring:
                    if due_ms < horizon_ms:
                        messages.append((run_message(job, due_ms), delay_seconds(due_ms, now)))
                    else:
                        timers.append((job, Timer(job.tenant, job.id, due_ms, job.generation)))
                    continue
                plan = plan_recurring(
                    job.spec.schedule,
                    created_at=from_ms(job.created_ms),
                    catchup=job.spec.catchup,
                    due_ms=due_ms,
                    now_ms=now,
                    horizon_ms=horizon_ms,
                    grace_ms=self._settings.misfire_grace_seconds * 1000,
                )
                result.skipped += plan.skipped
                messages += [(run_message(job, s), delay_seconds(s, now)) for s in plan.enqueue]
                if plan.next_due_ms is None:
                    self._complete(job, now)
                    result.completed += 1
                else:
                    timers.append(
                        (job, Timer(job.tenant, job.id, plan.next_due_ms, job.generation))
                    )
            if not timers:
                break
            self._timers.put([t for _, t in timers])
            result.timers += len(timers)
            state = self._timers.sweep_state()
            if state.cursor_minute is None:
                # Before the very first sweep: make it start from now, not from its own minute.
                self._timers.advance_cursor(None, minute_of(now))
            latest = state.horizon_minute or 0
            pending = [(job, t.due_ms) for job, t in timers if minute_of(t.due_ms) <= latest]
            horizon = max(horizon, latest)
        if messages:
            self._queue.send(messages)
            result.messages += len(messages)
        return result

    def _complete(self, job: Job, now: int) -> None:
        done = replace(
            job,
            status=JobStatus.COMPLETED,
            updated_ms=now,
            next_due_ms=None,
            expires_at=now // 1000 + self._settings.run_ttl_seconds,
        )
        try:
            self._jobs.replace(done, expected=job)
        except ConditionFailed:
            logger.warning("job changed while completing it", extra={"job_id": job.id})
