"""Planning ahead: a sweeper's chain enqueues up to the next 10-minute line, so a frequent
schedule's timer is written once per line instead of once per sweep (duetime.domain.planning)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from duetime.domain.jobs import Catchup
from duetime.domain.planning import (
    CHAIN_AHEAD_MAX_MS,
    CHAIN_AHEAD_RUNS,
    CHAIN_GRID_MS,
    chain_ahead_ms,
    plan_recurring,
)
from duetime.domain.schedule import Cron, Rate, Schedule, next_occurrence
from duetime.domain.timeutil import from_ms, to_ms

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = to_ms(T0)
MINUTE = 60_000
GRACE = 60_000


def ahead(
    schedule: Schedule, now: int, horizon: int, jitter_seconds: int = 0
) -> tuple[tuple[int, ...], int | None]:
    """A sweep at `now` planning the chain from its first occurrence at or after now."""
    first = next_occurrence(schedule, created_at=T0, after=from_ms(now - 1))
    assert first is not None
    plan = plan_recurring(
        schedule,
        created_at=T0 - timedelta(hours=1),
        catchup=Catchup(),
        due_ms=to_ms(first),
        now_ms=now,
        horizon_ms=horizon,
        grace_ms=GRACE,
        ahead_ms=chain_ahead_ms(horizon, now, jitter_seconds),
    )
    return plan.enqueue, plan.next_due_ms


def test_the_line_is_the_next_ten_minute_line_after_the_horizon() -> None:
    now = MS + 2 * MINUTE + 500  # 10:02:00.5
    assert chain_ahead_ms(MS + 4 * MINUTE, now, 0) == MS + 10 * MINUTE
    # A horizon on a line goes to the next one.
    assert chain_ahead_ms(MS + 10 * MINUTE, MS + 8 * MINUTE, 0) == MS + 20 * MINUTE


def test_no_line_when_its_messages_would_not_fit_sqs_delay() -> None:
    now = MS + 30_000
    line = MS + 10 * MINUTE
    assert chain_ahead_ms(MS + 3 * MINUTE, now, 0) == line
    # The jitter delays a message further: the furthest must stay within CHAIN_AHEAD_MAX_MS.
    fits = (CHAIN_AHEAD_MAX_MS - (line - now)) // 1000
    assert chain_ahead_ms(MS + 3 * MINUTE, now, fits) == line
    assert chain_ahead_ms(MS + 3 * MINUTE, now, fits + 1) is None
    # A horizon just short of a line: the next line is more than 14 minutes away.
    assert chain_ahead_ms(MS + 9 * MINUTE, MS - 6 * MINUTE, 0) is None


def test_a_per_minute_cron_enqueues_up_to_the_line_and_its_timer_waits_on_it() -> None:
    now = MS + 1_000
    enqueue, next_due = ahead(Cron("* * * * *"), now, MS + 3 * MINUTE)
    assert enqueue == tuple(MS + m * MINUTE for m in range(1, 10))
    assert next_due == MS + 10 * MINUTE


def test_a_schedule_sparser_than_the_line_is_planned_as_before() -> None:
    now = MS + 1_000
    enqueue, next_due = ahead(Cron("0 * * * *"), now, MS + 3 * MINUTE)
    assert enqueue == ()
    assert next_due == MS + 60 * MINUTE


def test_a_frequent_rate_goes_by_the_horizon() -> None:
    # More than CHAIN_AHEAD_RUNS occurrences before the line: the horizon holds many already.
    now = MS + 500
    rate = Rate(5, start_at=T0)
    enqueue, next_due = ahead(rate, now, MS + 3 * MINUTE)
    assert enqueue[-1] < MS + 3 * MINUTE
    assert next_due == MS + 3 * MINUTE
    assert (MS + 10 * MINUTE - MS - 3 * MINUTE) // 5_000 > CHAIN_AHEAD_RUNS


def test_a_schedule_ending_before_the_line_goes_by_the_horizon() -> None:
    # Planning to its end would complete the job at this sweep, minutes before its last run.
    ending = Cron("* * * * *", end_at=T0 + timedelta(minutes=7, seconds=30))
    now = MS + 1_000
    enqueue, next_due = ahead(ending, now, MS + 3 * MINUTE)
    assert enqueue == (MS + MINUTE, MS + 2 * MINUTE)
    assert next_due == MS + 3 * MINUTE


@given(
    minute=st.integers(0, 59),
    second=st.integers(0, 59),
    lookahead=st.integers(1, 5),
    period=st.sampled_from([20, 30, 60, 120, 300, 600, 900]),
    jitter=st.integers(0, 120),
)
def test_every_message_fits_sqs_delay_and_the_chain_loses_no_occurrence(
    minute: int, second: int, lookahead: int, period: int, jitter: int
) -> None:
    now = MS + minute * MINUTE + second * 1000
    horizon = (now // MINUTE + lookahead + 2) * MINUTE
    rate = Rate(period, start_at=T0)
    enqueue, next_due = ahead(rate, now, horizon, jitter)
    assert all(m + jitter * 1000 - now <= CHAIN_AHEAD_MAX_MS for m in enqueue)
    # The plan and its next timer together are every occurrence from the first on, in order.
    chain = [*enqueue, next_due]
    assert None not in chain
    assert all(b - a == period * 1000 for a, b in itertools.pairwise(chain))  # type: ignore[operator]
    assert next_due is not None
    # The next timer waits on the line when the chain planned ahead, else past the horizon.
    line = chain_ahead_ms(horizon, now, jitter)
    first_past = [edge for edge in (horizon, line) if edge is not None and next_due >= edge]
    assert first_past
    assert next_due < max(first_past) + period * 1000
    if line is not None and next_due >= line:
        assert line % CHAIN_GRID_MS == 0
        assert len(enqueue) <= CHAIN_AHEAD_RUNS + (horizon - now) // (period * 1000) + 1
