"""Which occurrences of a recurring job to enqueue in a sweep, and when its chain continues.

A recurring job has one timer at a time: its next occurrence. When the sweeper meets that
timer it enqueues every occurrence before the sweep's horizon (each is its own run) and writes
one new timer for the first occurrence it did not plan. Occurrences at or after now − misfire
grace are *on time* and always run. Older ones were *missed* (the system was down or behind);
the job's catch-up policy decides which of those still run:

- occurrences older than the catch-up window (now − window) never run, whatever the mode;
- `latest` runs the most recent missed occurrence inside the window, `none` runs none;
- `all` runs every missed occurrence inside the window, oldest first, but at most 1,000 missed
  occurrences per job per sweep; the rest are continued by the next sweep. When the bound is
  reached the plan stops there: its next timer is the first missed occurrence not enqueued
  (in the past), and on-time occurrences wait for the continuation to reach them.

Planning ahead (the sweeper's chains, `ahead_ms`): a chain that goes on past the horizon may
also enqueue its occurrences up to the next line of a 10-minute grid (`chain_ahead_ms`), so its
timer is written once per grid step instead of once per minute: a per-minute cron costs a
timer write (and the sweep's job read) per ten occurrences instead of one each. The lines are
the same for every chain of a job, so a chain re-armed beside a live one (the reconciler, a
replay) meets it at the next line and the two merge. A chain plans ahead only when every
message still fits SQS's delay (the line at most `CHAIN_AHEAD_MAX_MS` away, jitter included),
when at most `CHAIN_AHEAD_RUNS` occurrences lie before the line (a rate of seconds goes by the
horizon, which already holds many of its occurrences), and when its schedule goes on past the
line: a chain ending sooner goes by the horizon, so a job is completed no earlier than before.

Cost: occurrences that do not run are jumped over, not visited, so a plan costs a few
schedule evaluations plus one per occurrence enqueued, whatever the downtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import Catchup, CatchupMode, Job, JobSpec
from duetime.domain.retry import longest_retry_wait_ms
from duetime.domain.schedule import (
    After,
    Cron,
    Rate,
    Schedule,
    is_recurring,
    next_occurrence,
    previous_occurrence,
)
from duetime.domain.timeutil import MINUTE_MS, from_ms, rfc3339_ms, to_ms

# `POST /schedules/preview` shows at most this many occurrences.
MAX_PREVIEW_OCCURRENCES = 20

# `all` enqueues at most this many missed occurrences of one job in one plan; the plan's next
# timer continues from the first one left over.
MAX_CATCHUP_RUNS = 1000

# Planning ahead (see the module docstring): chains plan up to the next line of this grid...
CHAIN_GRID_MS = 10 * MINUTE_MS
# ...when it is at most this far from now, its jitter included (SQS delays stop at 900 s: a
# minute of margin for a sweep that sends late)...
CHAIN_AHEAD_MAX_MS = 840_000
# ...and at most this many occurrences lie before it.
CHAIN_AHEAD_RUNS = 60


@dataclass(frozen=True)
class Plan:
    enqueue: tuple[int, ...]  # scheduled instants (ms) to send now, ascending
    next_due_ms: int | None  # the chain's next timer, or None when the schedule is over
    # Occurrences that will never run because of this plan: exact for rates, a lower bound for
    # cron (occurrences jumped over without being visited count as one per jump).
    skipped: int


def plan_recurring(
    schedule: Schedule,
    *,
    created_at: datetime,
    catchup: Catchup,
    due_ms: int,
    now_ms: int,
    horizon_ms: int,
    grace_ms: int,
    ahead_ms: int | None = None,
) -> Plan:
    """`due_ms` is the timer's occurrence; occurrences in [due_ms, horizon_ms) are planned now,
    and those in [horizon_ms, ahead_ms) too when the chain may plan ahead (module docstring)."""
    on_time_from = now_ms - grace_ms
    window_start = now_ms - catchup.window_seconds * 1000
    # Occurrences before `lost_before` never run: older than the window and not on time.
    lost_before = min(window_start, on_time_from)
    # Missed occurrences that may still run lie in [lost_before, missed_until).
    missed_until = min(on_time_from, horizon_ms)
    enqueue: list[int] = []
    skipped = 0
    occurrence: int | None = due_ms

    if due_ms < lost_before:
        occurrence = _next(schedule, created_at, lost_before - 1)
        skipped += _dropped(schedule, created_at, due_ms, occurrence)

    if occurrence is not None and occurrence < missed_until:
        if catchup.mode == CatchupMode.ALL:
            while occurrence is not None and occurrence < missed_until:
                if len(enqueue) == MAX_CATCHUP_RUNS:
                    # Bounded work per sweep: the continuation timer picks up from here.
                    return Plan(tuple(enqueue), occurrence, skipped)
                enqueue.append(occurrence)
                occurrence = _next(schedule, created_at, occurrence)
        elif catchup.mode == CatchupMode.LATEST:
            latest = _previous(schedule, created_at, missed_until)
            if latest is None or latest < occurrence:
                latest = occurrence  # `due_ms` itself is the only missed occurrence
            skipped += _dropped(schedule, created_at, occurrence, latest)
            enqueue.append(latest)
            occurrence = _next(schedule, created_at, latest)
        else:
            following = _next(schedule, created_at, missed_until - 1)
            skipped += _dropped(schedule, created_at, occurrence, following)
            occurrence = following

    while occurrence is not None and occurrence < horizon_ms:
        enqueue.append(occurrence)
        occurrence = _next(schedule, created_at, occurrence)
    if ahead_ms is not None and occurrence is not None:
        ahead = _ahead(schedule, created_at, occurrence, ahead_ms)
        if ahead is not None:
            enqueue += ahead[0]
            occurrence = ahead[1]
    return Plan(tuple(enqueue), occurrence, skipped)


def chain_ahead_ms(horizon_ms: int, now_ms: int, jitter_seconds: int) -> int | None:
    """How far a chain planned now up to `horizon_ms` may plan ahead: the next grid line after
    the horizon, or None when its messages would not fit SQS's delay."""
    line = (horizon_ms // CHAIN_GRID_MS + 1) * CHAIN_GRID_MS
    if line - now_ms + jitter_seconds * 1000 > CHAIN_AHEAD_MAX_MS:
        return None
    return line


def _ahead(
    schedule: Schedule, created_at: datetime, first: int, until_ms: int
) -> tuple[list[int], int] | None:
    """The occurrences from `first` (one) before `until_ms` and the one after them; None when
    more than CHAIN_AHEAD_RUNS lie there or the schedule ends before `until_ms`."""
    found: list[int] = []
    occurrence: int | None = first
    while occurrence is not None and occurrence < until_ms:
        if len(found) == CHAIN_AHEAD_RUNS:
            return None
        found.append(occurrence)
        occurrence = _next(schedule, created_at, occurrence)
    return None if occurrence is None else (found, occurrence)


def _dropped(schedule: Schedule, created_at: datetime, first: int, until: int | None) -> int:
    """How many occurrences in [first, until) are dropped: `first` (an occurrence) and every
    occurrence between; `until` None means all that remain. Exact for rates; for cron, counting
    would mean visiting them, so only `first` is counted."""
    if until is not None and until <= first:
        return 0
    if isinstance(schedule, Rate):
        if until is None:
            if schedule.end_at is None:
                return 1  # unbounded yet no next occurrence: past year 9999
            until = to_ms(schedule.end_at) + 1
        return (
            1
            + _rate_count_before(schedule, created_at, until)
            - _rate_count_before(schedule, created_at, first + 1)
        )
    return 1


def _rate_count_before(rate: Rate, created_at: datetime, limit: int) -> int:
    """Occurrences of `rate` before `limit`, mirroring `_rate_next` (anchor, end_at)."""
    anchor = to_ms(
        rate.start_at if rate.start_at is not None else created_at + timedelta(seconds=rate.seconds)
    )
    if rate.end_at is not None:
        limit = min(limit, to_ms(rate.end_at) + 1)
    return max(0, -((anchor - limit) // (rate.seconds * 1000)))  # ceil((limit - anchor) / P)


def rate_count_between(rate: Rate, created_at: datetime, start_ms: int, end_ms: int) -> int:
    """How many occurrences of `rate` lie in [start_ms, end_ms): arithmetic, no visits."""
    return max(
        0,
        _rate_count_before(rate, created_at, end_ms)
        - _rate_count_before(rate, created_at, start_ms),
    )


def _next(schedule: Schedule, created_at: datetime, after_ms: int) -> int | None:
    found = next_occurrence(schedule, created_at=created_at, after=from_ms(after_ms))
    return to_ms(found) if found is not None else None


def _previous(schedule: Schedule, created_at: datetime, before_ms: int) -> int | None:
    found = previous_occurrence(schedule, created_at=created_at, before=from_ms(before_ms))
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


def rearmed_due(
    schedule: Schedule, *, created_at: datetime, now: datetime, kept: datetime | None = None
) -> datetime | None:
    """Where a job goes on once it is re-armed (PATCH): a recurring schedule's first
    occurrence from now on, on its own anchor (start_at, or the job's creation for a rate
    without one); a one-off's instant, a delay counted from the change. `kept`: a one-off's
    instant when its schedule did not change (only its queue, jitter or staging did): it
    stays, as a delay counted again would be another run, a second one if the first runs."""
    if isinstance(schedule, Rate | Cron):
        return next_occurrence(
            schedule, created_at=created_at, after=now - timedelta(milliseconds=1)
        )
    return kept if kept is not None else first_due(schedule, created_at=now)


def no_occurrence(schedule: Schedule, now: datetime) -> ValidationError:
    """The error for a schedule with no occurrence from `now` on, naming what ends it: its
    `end_at` (in the past, or before the next occurrence), else the schedule itself."""
    end = schedule.end_at if isinstance(schedule, Rate | Cron) else None
    if end is None:
        return ValidationError("schedule", "has no occurrence in the future")
    if end <= now:
        return ValidationError(
            "schedule.end_at", f"is in the past (now is {rfc3339_ms(to_ms(now))})"
        )
    return ValidationError("schedule.end_at", "comes before the schedule's next occurrence")


def upcoming(schedule: Schedule, *, now: datetime, count: int) -> list[datetime]:
    """The first `count` occurrences of a job submitted at `now` with this schedule (fewer when
    the schedule ends): the first is the `next_run_at` POST /jobs would answer. A one-off has
    one (an `at` in the past too: such a job runs at once); `after` has none of its own."""
    if isinstance(schedule, After):
        raise ValidationError(
            "schedule.after", "has no occurrences of its own: it runs when its upstream's run ends"
        )
    found: list[datetime] = []
    occurrence = first_due(schedule, created_at=now)
    while occurrence is not None and len(found) < count:
        found.append(occurrence)
        if not is_recurring(schedule):
            break
        occurrence = next_occurrence(schedule, created_at=now, after=occurrence)
    return found


def runs_end_ms(job: Job) -> int | None:
    """A bound on when a recurring job's last run is due: its `end_at` plus its jitter (None:
    its schedule has no end). A job is completed once its last occurrence is handed over, up to
    the dispatch horizon ahead of it: until this bound it has runs to come."""
    schedule = job.spec.schedule
    if not isinstance(schedule, Rate | Cron) or schedule.end_at is None:
        return None
    return to_ms(schedule.end_at) + job.spec.jitter_seconds * 1000


def completed_expires_at(job: Job, now_ms: int, ttl_seconds: int) -> int:
    """When a recurring job completed at `now_ms` expires (epoch seconds): the hot window after
    its last run can have ended (runs_end_ms), or after now."""
    return hot_until(job.spec, max(now_ms, runs_end_ms(job) or 0), ttl_seconds)


def hot_until(spec: JobSpec, run_ms: int, ttl_seconds: int) -> int:
    """When the item of `spec`'s job whose (last) run happens at `run_ms` leaves the hot table
    (epoch seconds): the hot window after that run can have ended (attempts_seconds). Its run's
    record leaves a hot window after the run's start, so it can go first: the reconciler then
    leaves the job alone (duetime.services.reconcile)."""
    return run_ms // 1000 + attempts_seconds(spec) + ttl_seconds


def attempts_seconds(spec: JobSpec) -> int:
    """The most a run can take from its instant to its last attempt's end: its jitter, every
    attempt's timeout and every wait between them, a target's Retry-After included (until
    2026-12-01 the backoff's cap: a completed upstream whose last run waited out a Retry-After
    refused a new dependent; a lifecycle audit). A retry reads its job, so the job's item must
    outlive it (a short hot window expired it under its retries until 2026-11-30)."""
    retry = spec.retry
    backoffs = math.ceil((retry.max_attempts - 1) * longest_retry_wait_ms(retry) / 1000)
    return spec.jitter_seconds + retry.max_attempts * spec.timeout_seconds + backoffs
