"""Which occurrences of a recurring job to enqueue in a sweep, and when its chain continues.

A recurring job has one timer at a time: its next occurrence. When the sweeper meets that
timer it enqueues every occurrence before the sweep's horizon (each is its own run) and writes
one new timer for the first occurrence at or after the horizon. Occurrences that are already
older than the misfire grace were *missed* (the system was down or behind); the job's
catch-up policy decides which of those still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.jobs import Catchup, CatchupMode
from duetime.domain.schedule import Cron, Rate, Schedule, next_occurrence
from duetime.domain.timeutil import from_ms, to_ms

# `all` never enqueues more than this many missed occurrences of one job in one sweep.
MAX_CATCHUP_RUNS = 100


@dataclass(frozen=True)
class Plan:
    enqueue: tuple[int, ...]  # scheduled instants (ms) to send now, ascending
    next_due_ms: int | None  # the chain's next timer, or None when the schedule is over
    skipped: int  # missed occurrences visited and not run (a lower bound)


def plan_recurring(
    schedule: Schedule,
    *,
    created_at: datetime,
    catchup: Catchup,
    due_ms: int,
    now_ms: int,
    horizon_ms: int,
    grace_ms: int,
) -> Plan:
    """`due_ms` is the timer's occurrence; occurrences in [due_ms, horizon_ms) are planned now."""
    missed: list[int] = []
    on_time: list[int] = []
    skipped = 0
    window_start = now_ms - catchup.window_seconds * 1000
    occurrence: int | None = due_ms
    if catchup.mode != CatchupMode.ALL and due_ms < window_start:
        # Jump over occurrences that are outside the window without visiting each one.
        # (Those jumped over are not counted in `skipped`.)
        occurrence = _next(schedule, created_at, window_start - 1)
    while occurrence is not None and occurrence < horizon_ms:
        if occurrence >= now_ms - grace_ms:
            on_time.append(occurrence)
        elif occurrence >= window_start:
            missed.append(occurrence)
        else:
            skipped += 1
        occurrence = _next(schedule, created_at, occurrence)
    kept = _catch_up(catchup.mode, missed)
    skipped += len(missed) - len(kept)
    return Plan(tuple(kept + on_time), occurrence, skipped)


def _catch_up(mode: CatchupMode, missed: list[int]) -> list[int]:
    if mode == CatchupMode.ALL:
        return missed[-MAX_CATCHUP_RUNS:]
    if mode == CatchupMode.LATEST:
        return missed[-1:]
    return []


def _next(schedule: Schedule, created_at: datetime, after_ms: int) -> int | None:
    found = next_occurrence(schedule, created_at=created_at, after=from_ms(after_ms))
    return to_ms(found) if found is not None else None


def first_due(schedule: Schedule, *, created_at: datetime) -> datetime | None:
    """The first occurrence a new job runs. For a recurring job whose anchor lies in the past
    (a rate with an old `start_at`), occurrences before the job existed are not 'missed'."""
    first = next_occurrence(schedule, created_at=created_at, after=None)
    if first is not None and first < created_at and isinstance(schedule, Rate | Cron):
        return next_occurrence(
            schedule, created_at=created_at, after=created_at - timedelta(milliseconds=1)
        )
    return first
