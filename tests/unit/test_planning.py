"""Which occurrences of a recurring job a sweep enqueues: on time, missed, catch-up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from duetime.domain import planning
from duetime.domain.jobs import Catchup, CatchupMode
from duetime.domain.planning import MAX_CATCHUP_RUNS, Plan, first_due, plan_recurring
from duetime.domain.schedule import (
    At,
    Cron,
    Delay,
    Rate,
    Schedule,
    next_occurrence,
    previous_occurrence,
)
from duetime.domain.timeutil import from_ms, to_ms

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = to_ms(T0)
EVERY_MINUTE = Rate(60, start_at=T0)
GRACE = 60_000
MICROSECOND = timedelta(microseconds=1)


def plan(mode: CatchupMode, due: int, now: int, horizon: int, window: int = 3600) -> Plan:
    return plan_recurring(
        EVERY_MINUTE,
        created_at=T0,
        catchup=Catchup(mode, window),
        due_ms=due,
        now_ms=now,
        horizon_ms=horizon,
        grace_ms=GRACE,
    )


def test_on_time_occurrences_before_the_horizon_are_all_enqueued() -> None:
    result = plan_recurring(
        Rate(20, start_at=T0),
        created_at=T0,
        catchup=Catchup(),
        due_ms=MS,
        now_ms=MS - 30_000,
        horizon_ms=MS + 60_000,
        grace_ms=GRACE,
    )
    assert result.enqueue == (MS, MS + 20_000, MS + 40_000)
    assert result.next_due_ms == MS + 60_000
    assert result.skipped == 0


@pytest.mark.parametrize(
    ("mode", "enqueued_missed"),
    [
        (CatchupMode.ALL, [MS + m * 60_000 for m in range(9)]),
        (CatchupMode.LATEST, [MS + 8 * 60_000]),
        (CatchupMode.NONE, []),
    ],
)
def test_after_ten_minutes_down_the_catchup_policy_picks_missed_runs(
    mode: CatchupMode, enqueued_missed: list[int]
) -> None:
    now = MS + 10 * 60_000
    result = plan(mode, MS, now, now + 60_000)
    on_time = [MS + 9 * 60_000, MS + 10 * 60_000]  # within the 60 s misfire grace and ahead
    assert list(result.enqueue) == enqueued_missed + on_time
    assert result.next_due_ms == now + 60_000
    assert result.skipped == 9 - len(enqueued_missed)


def test_missed_runs_older_than_the_window_are_never_run() -> None:
    now = MS + 120 * 60_000
    result = plan(CatchupMode.ALL, MS, now, now + 60_000, window=600)
    missed = [o for o in result.enqueue if o < now - GRACE]
    assert missed == [now - m * 60_000 for m in range(10, 1, -1)]


def test_catching_up_all_is_bounded() -> None:
    # Changed semantics: `all` used to keep only the *last* 100 missed runs and drop the rest.
    # It now enqueues the *oldest* MAX_CATCHUP_RUNS and continues from the first one left over
    # (see the continuation tests below); nothing inside the window is dropped.
    now = MS + 2000 * 60_000
    result = plan(CatchupMode.ALL, MS, now, now + 60_000, window=172_800)
    assert result.enqueue == tuple(MS + m * 60_000 for m in range(MAX_CATCHUP_RUNS))
    assert result.next_due_ms == MS + MAX_CATCHUP_RUNS * 60_000
    assert result.skipped == 0


def test_a_schedule_that_ends_has_no_next_timer() -> None:
    ending = Rate(60, start_at=T0, end_at=datetime(2026, 11, 21, 10, 2, tzinfo=UTC))
    result = plan_recurring(
        ending,
        created_at=T0,
        catchup=Catchup(),
        due_ms=MS,
        now_ms=MS,
        horizon_ms=MS + 10 * 60_000,
        grace_ms=GRACE,
    )
    assert result.enqueue == (MS, MS + 60_000, MS + 120_000)
    assert result.next_due_ms is None


def test_a_rate_anchored_in_the_past_starts_at_the_next_occurrence_after_creation() -> None:
    created = datetime(2026, 11, 21, 10, 5, 30, tzinfo=UTC)
    first = first_due(Rate(60, start_at=T0), created_at=created)
    assert first == datetime(2026, 11, 21, 10, 6, tzinfo=UTC)
    assert first_due(Cron("0 * * * *"), created_at=created) == datetime(
        2026, 11, 21, 11, 0, tzinfo=UTC
    )


# --- edge cases ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "missed_run", "skipped"),
    [(CatchupMode.LATEST, [-2], 118), (CatchupMode.NONE, [], 119)],
)
def test_a_timer_older_than_its_window_jumps_to_the_window(
    mode: CatchupMode, missed_run: list[int], skipped: int
) -> None:
    now = MS + 120 * 60_000
    result = plan(mode, MS, now, now + 60_000, window=600)
    assert list(result.enqueue) == [now + m * 60_000 for m in [*missed_run, -1, 0]]
    assert result.next_due_ms == now + 60_000
    # 119 occurrences are older than the grace (minutes 0..118); `latest` runs one of them.
    assert result.skipped == skipped


def test_a_cron_timer_older_than_its_window_runs_the_latest_in_the_window() -> None:
    now = MS + 120 * 60_000
    result = plan_recurring(
        Cron("*/10 * * * *"),
        created_at=T0,
        catchup=Catchup(CatchupMode.LATEST, 1800),
        due_ms=MS,
        now_ms=now,
        horizon_ms=now + 60_000,
        grace_ms=GRACE,
    )
    assert result.enqueue == (now - 10 * 60_000, now)
    assert result.next_due_ms == now + 10 * 60_000
    assert 1 <= result.skipped <= 11  # a lower bound for cron: 11 occurrences did not run


def test_a_window_shorter_than_the_grace_still_runs_on_time_occurrences() -> None:
    now = MS + 30_000  # the occurrence at MS is 30 s late: within the 60 s grace
    for mode in CatchupMode:
        result = plan(mode, MS, now, now + 60_000, window=0)
        assert result.enqueue == (MS, MS + 60_000), mode
        assert result.skipped == 0


def test_a_cron_end_between_two_occurrences_ends_the_chain() -> None:
    hourly = Cron("0 * * * *", end_at=datetime(2026, 11, 21, 10, 30, tzinfo=UTC))
    result = plan_recurring(
        hourly,
        created_at=T0 - timedelta(hours=1),
        catchup=Catchup(),
        due_ms=MS,
        now_ms=MS,
        horizon_ms=MS + 3 * 3_600_000,
        grace_ms=GRACE,
    )
    assert result == Plan((MS,), None, 0)
    before = T0 + timedelta(hours=2)
    assert previous_occurrence(hourly, created_at=T0 - timedelta(hours=1), before=before) == T0


def test_a_one_second_rate_steps_by_one_second() -> None:
    rate = Rate(1, start_at=T0)
    second = timedelta(seconds=1)
    assert next_occurrence(rate, created_at=T0, after=T0) == T0 + second
    assert next_occurrence(rate, created_at=T0, after=T0 + second / 2) == T0 + second
    assert previous_occurrence(rate, created_at=T0, before=T0 + second) == T0
    assert previous_occurrence(rate, created_at=T0, before=T0 + MICROSECOND) == T0
    assert previous_occurrence(rate, created_at=T0, before=T0) is None
    result = plan_recurring(
        rate,
        created_at=T0,
        catchup=Catchup(),
        due_ms=MS,
        now_ms=MS,
        horizon_ms=MS + 5000,
        grace_ms=GRACE,
    )
    assert result == Plan(tuple(range(MS, MS + 5000, 1000)), MS + 5000, 0)


def test_previous_of_a_fixed_time_cron_in_a_spring_gap_is_the_transition() -> None:
    # Berlin 2026-03-29: 02:30 does not exist; a fixed-time job runs at 03:00 CEST (01:00Z).
    daily = Cron("30 2 * * *", "Europe/Berlin")
    created = datetime(2026, 1, 1, tzinfo=UTC)
    transition = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    later = transition + timedelta(hours=5)
    assert previous_occurrence(daily, created_at=created, before=later) == transition
    assert previous_occurrence(daily, created_at=created, before=transition) == datetime(
        2026, 3, 28, 1, 30, tzinfo=UTC
    )


def test_previous_of_one_offs_is_their_instant_when_before() -> None:
    at = At(T0)
    assert previous_occurrence(at, created_at=T0, before=T0) is None
    assert previous_occurrence(at, created_at=T0, before=T0 + timedelta(milliseconds=1)) == T0
    delay = Delay(60)
    assert previous_occurrence(delay, created_at=T0, before=T0 + timedelta(minutes=1)) is None
    assert previous_occurrence(delay, created_at=T0, before=T0 + timedelta(minutes=2)) == (
        T0 + timedelta(minutes=1)
    )


# --- bounded work --------------------------------------------------------------------------------

DAY_MS = 86_400_000
WEEK_S = 604_800


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the schedule evaluations planning makes (not their time)."""
    calls = [0]

    def counting(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(planning, "next_occurrence", counting(next_occurrence))
    monkeypatch.setattr(planning, "previous_occurrence", counting(previous_occurrence))
    return calls


def every_second(
    mode: CatchupMode, due: int, now: int, window: int = WEEK_S, horizon: int | None = None
) -> Plan:
    return plan_recurring(
        Rate(1, start_at=T0 - timedelta(days=30)),
        created_at=T0 - timedelta(days=30),
        catchup=Catchup(mode, window),
        due_ms=due,
        now_ms=now,
        horizon_ms=now + 60_000 if horizon is None else horizon,
        grace_ms=GRACE,
    )


@pytest.mark.parametrize("mode", [CatchupMode.LATEST, CatchupMode.NONE])
@pytest.mark.parametrize("downtime_ms", [DAY_MS, 7 * DAY_MS])
@pytest.mark.parametrize("window", [3600, WEEK_S])
def test_latest_and_none_after_long_downtime_cost_a_few_evaluations(
    evaluations: list[int], mode: CatchupMode, downtime_ms: int, window: int
) -> None:
    result = every_second(mode, MS - downtime_ms, MS, window)
    on_time = list(range(MS - GRACE, MS + 60_000, 1000))
    missed = [MS - GRACE - 1000] if mode == CatchupMode.LATEST else []
    assert list(result.enqueue) == missed + on_time
    assert result.next_due_ms == MS + 60_000
    assert result.skipped == (downtime_ms - GRACE) // 1000 - len(missed)
    assert evaluations[0] < 10 + len(result.enqueue)


def test_all_after_a_day_enqueues_the_bound_and_continues_from_the_rest(
    evaluations: list[int],
) -> None:
    due = MS - DAY_MS
    result = every_second(CatchupMode.ALL, due, MS)
    assert result.enqueue == tuple(range(due, due + MAX_CATCHUP_RUNS * 1000, 1000))
    assert result.next_due_ms == due + MAX_CATCHUP_RUNS * 1000  # the first missed one left
    assert result.skipped == 0
    assert evaluations[0] < 10 + len(result.enqueue)


def test_all_outside_the_window_jumps_to_the_window(evaluations: list[int]) -> None:
    due = MS - 7 * DAY_MS
    result = every_second(CatchupMode.ALL, due, MS, window=3600)
    window_start = MS - 3_600_000
    assert result.enqueue[0] == window_start
    assert len(result.enqueue) == MAX_CATCHUP_RUNS
    assert result.skipped == (window_start - due) // 1000
    assert evaluations[0] < 10 + len(result.enqueue)


def test_all_continued_sweep_after_sweep_runs_every_occurrence_of_the_window_once(
    evaluations: list[int],
) -> None:
    window = 3000
    now = MS
    due: int | None = MS - DAY_MS
    enqueued: list[int] = []
    skipped = 0
    for _ in range(10):
        assert due is not None
        horizon = now + 60_000
        result = every_second(CatchupMode.ALL, due, now, window, horizon)
        assert len(result.enqueue) <= MAX_CATCHUP_RUNS + 120
        enqueued += result.enqueue
        skipped += result.skipped
        due = result.next_due_ms
        if due == horizon:
            break  # caught up: the chain is back on its next on-time occurrence
        assert due is not None
        assert due < now - GRACE  # a continuation lies in the past
        now += 60_000
    else:
        pytest.fail("never caught up")
    first = MS - window * 1000
    assert enqueued == list(range(first, due, 1000))  # each exactly once, in order
    assert skipped == (first - (MS - DAY_MS)) // 1000
    assert evaluations[0] < 10 * 10 + len(enqueued)


# --- properties: the plan equals a one-by-one walk -----------------------------------------------


def reference_plan(
    schedule: Schedule,
    created_at: datetime,
    catchup: Catchup,
    due_ms: int,
    now_ms: int,
    horizon_ms: int,
    grace_ms: int,
    cap: int,
) -> Plan:
    """The documented rules, applied to every occurrence from `due_ms` in turn."""
    on_time_from = now_ms - grace_ms
    lost_before = min(now_ms - catchup.window_seconds * 1000, on_time_from)
    missed: list[int] = []
    on_time: list[int] = []
    skipped = 0
    occurrence: int | None = due_ms
    while occurrence is not None and occurrence < horizon_ms:
        if occurrence >= on_time_from:
            on_time.append(occurrence)
        elif occurrence >= lost_before:
            missed.append(occurrence)
        else:
            skipped += 1
        found = next_occurrence(schedule, created_at=created_at, after=from_ms(occurrence))
        occurrence = None if found is None else to_ms(found)
    if catchup.mode == CatchupMode.ALL:
        if len(missed) > cap:
            return Plan(tuple(missed[:cap]), missed[cap], skipped)
        return Plan(tuple(missed + on_time), occurrence, skipped)
    kept = missed[-1:] if catchup.mode == CatchupMode.LATEST else []
    return Plan(tuple(kept + on_time), occurrence, skipped + len(missed) - len(kept))


ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",  # +05:30
    "Australia/Lord_Howe",  # a 30-minute daylight-saving shift
    "Asia/Kathmandu",  # +05:45
)
DENSE_CRONS = ("* * * * *", "*/7 * * * *")
SPARSE_CRONS = ("30 2 * * *", "0 9 * * 1-5", "15 */3 * * *")


@cache
def transitions(zone_name: str) -> tuple[datetime, ...]:
    """The instants (to the second) at which `zone_name` changes its offset, 2020..2030."""
    zone = ZoneInfo(zone_name)

    def offset(instant: datetime) -> timedelta | None:
        return instant.astimezone(zone).utcoffset()

    found: list[datetime] = []
    day = datetime(2020, 1, 1, tzinfo=UTC)
    while day < datetime(2031, 1, 1, tzinfo=UTC):
        following = day + timedelta(days=1)
        if offset(day) != offset(following):
            low, high = day, following
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
            found.append(high)
        day = following
    return tuple(found)


@st.composite
def around_transitions(draw: st.DrawFn, zone: str) -> datetime:
    """An instant near one of the zone's transitions (or anywhere in 2020..2030 without any)."""
    candidates = transitions(zone)
    near_one = draw(st.booleans())
    if candidates and near_one:
        base = draw(st.sampled_from(candidates))
        return base + timedelta(milliseconds=draw(st.integers(-6 * 3_600_000, 6 * 3_600_000)))
    return draw(st.datetimes(datetime(2020, 1, 1), datetime(2030, 12, 31), timezones=st.just(UTC)))


@st.composite
def planning_cases(draw: st.DrawFn) -> tuple[Schedule, datetime, Catchup, int, int, int, int]:
    """(schedule, created_at, catchup, due_ms, now_ms, horizon_ms, grace_ms), with the walk the
    reference makes kept to a few thousand occurrences. Instants are often whole seconds or
    minutes, so that occurrences fall exactly on the window, grace and horizon boundaries."""
    unit = draw(st.sampled_from([1, 1000, 60_000]))

    def instant(low: int, high: int) -> int:
        value = draw(st.integers(low, high))
        return value - value % unit

    zone = draw(st.sampled_from(ZONES))
    now_ms = to_ms(draw(around_transitions(zone)))
    now_ms -= now_ms % unit
    hour = 3_600_000
    expression = draw(st.sampled_from((None, *DENSE_CRONS, *SPARSE_CRONS)))
    if expression is None:  # a rate
        period_ms = draw(st.integers(1, 10) | st.integers(1, 7200)) * 1000
        downtime = period_ms * draw(st.integers(0, 2500)) + draw(st.integers(0, period_ms))
        horizon_ms = now_ms + period_ms * draw(st.integers(0, 50)) + draw(st.integers(1, period_ms))
    elif expression in DENSE_CRONS:
        downtime = draw(st.integers(0, 240)) * 60_000 + draw(st.integers(0, 59_999))
        horizon_ms = instant(now_ms + 1, now_ms + hour)
    else:
        downtime = draw(st.integers(0, 240)) * hour + draw(st.integers(0, hour - 1))
        horizon_ms = instant(now_ms + 1, now_ms + 48 * hour)
    created_ms = instant(now_ms - downtime - 240 * hour, now_ms - downtime - 1)
    bounded = draw(st.sampled_from(["neither", "neither", "start", "end", "both"]))
    start = instant(created_ms - 720 * hour, now_ms) if bounded in ("start", "both") else None
    end = instant(now_ms - downtime, horizon_ms) if bounded in ("end", "both") else None
    if start is not None and end is not None and end <= start:
        end = start + draw(st.integers(1, 24 * hour))
    start_at = None if start is None else from_ms(start)
    end_at = None if end is None else from_ms(end)
    schedule: Schedule = (
        Rate(period_ms // 1000, start_at, end_at)
        if expression is None
        else Cron(expression, zone, start_at, end_at)
    )
    created_at = from_ms(created_ms)
    due = next_occurrence(schedule, created_at=created_at, after=from_ms(now_ms - downtime))
    assume(due is not None)  # a schedule that ended has no timer
    assert due is not None
    window = draw(st.sampled_from([0, 60, WEEK_S]) | st.integers(0, downtime // 1000 * 3 // 2))
    catchup = Catchup(draw(st.sampled_from(list(CatchupMode))), min(window, WEEK_S))
    grace = draw(st.sampled_from([0, 1000, 60_000, 120_000]) | st.integers(0, 600_000))
    return schedule, created_at, catchup, to_ms(due), now_ms, horizon_ms, grace


@settings(max_examples=400, deadline=None)
@given(planning_cases(), st.sampled_from([3, MAX_CATCHUP_RUNS]))
def test_the_plan_equals_a_walk_over_every_occurrence(
    case: tuple[Schedule, datetime, Catchup, int, int, int, int], cap: int
) -> None:
    schedule, created_at, catchup, due_ms, now_ms, horizon_ms, grace_ms = case
    # A small bound makes cron schedules reach it too.
    with mock.patch.object(planning, "MAX_CATCHUP_RUNS", cap):
        result = plan_recurring(
            schedule,
            created_at=created_at,
            catchup=catchup,
            due_ms=due_ms,
            now_ms=now_ms,
            horizon_ms=horizon_ms,
            grace_ms=grace_ms,
        )
    expected = reference_plan(
        schedule, created_at, catchup, due_ms, now_ms, horizon_ms, grace_ms, cap
    )
    assert result.enqueue == expected.enqueue
    assert result.next_due_ms == expected.next_due_ms
    if isinstance(schedule, Rate):
        assert result.skipped == expected.skipped
    else:
        assert result.skipped <= expected.skipped  # a lower bound for cron
        assert (result.skipped == 0) == (expected.skipped == 0)


# --- properties: previous_occurrence mirrors next_occurrence -------------------------------------

ALL_CRONS = (*DENSE_CRONS, *SPARSE_CRONS, "* 9 * * *", "0 0 29 2 *", "@yearly")


@st.composite
def schedules_and_instants(draw: st.DrawFn) -> tuple[Schedule, datetime, datetime]:
    """(schedule, created_at, before): `before` near a transition of the cron's zone; bounds and
    creation around it. Often `before` or `end_at` is itself an occurrence (the boundaries)."""
    zone = draw(st.sampled_from(ZONES))
    unit = draw(st.sampled_from([1, 1000, 60_000]))
    base_ms = to_ms(draw(around_transitions(zone)))

    def near() -> datetime:
        value = base_ms + draw(st.integers(-40 * 86_400_000, 86_400_000))
        return from_ms(value - value % unit)

    before = near()
    created_at = near()
    start_at = near() if draw(st.booleans()) else None
    end_at = near() if draw(st.booleans()) else None
    if start_at is not None and end_at is not None and end_at <= start_at:
        end_at = start_at + draw(st.integers(1, 10)) * timedelta(days=1)
    kind = draw(st.sampled_from(["at", "delay", "rate", "cron"]))
    schedule: Schedule
    if kind == "at":
        schedule = At(near())
    elif kind == "delay":
        schedule = Delay(draw(st.integers(0, 40 * 86_400)))
    elif kind == "rate":
        seconds = draw(st.integers(1, 10) | st.integers(1, 7200) | st.integers(1, 31_622_400))
        schedule = Rate(seconds, start_at, end_at)
    else:
        schedule = Cron(draw(st.sampled_from(ALL_CRONS)), zone, start_at, end_at)
    snap = draw(st.sampled_from(["no", "before", "end"]))
    occurrence = next_occurrence(schedule, created_at=created_at, after=before)
    if occurrence is not None and snap == "before":
        before = occurrence
    elif occurrence is not None and snap == "end" and isinstance(schedule, Rate | Cron):
        schedule = replace(schedule, end_at=occurrence)
        if schedule.start_at is not None and schedule.start_at >= occurrence:
            schedule = replace(schedule, start_at=None)
    return schedule, created_at, before + draw(st.sampled_from([0, 0, 1, 999])) * MICROSECOND


@settings(max_examples=400, deadline=None)
@given(schedules_and_instants())
def test_previous_occurrence_agrees_with_next_occurrence(
    case: tuple[Schedule, datetime, datetime],
) -> None:
    schedule, created_at, before = case
    previous = previous_occurrence(schedule, created_at=created_at, before=before)
    if previous is None:
        first = next_occurrence(schedule, created_at=created_at, after=None)
        assert first is None or first >= before
        return
    assert previous < before
    just_before = previous - timedelta(milliseconds=1)
    assert next_occurrence(schedule, created_at=created_at, after=just_before) == previous
    following = next_occurrence(schedule, created_at=created_at, after=previous)
    assert following is None or following >= before
