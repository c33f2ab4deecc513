"""Catch-up planning at its edges: a timer that is the only missed occurrence, a schedule whose
last occurrence is at the end of time, and the first run of a job anchored in the past."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.jobs import Catchup, CatchupMode
from duetime.domain.planning import Plan, first_due, plan_recurring
from duetime.domain.schedule import MAX_RATE_SECONDS, Cron, Rate
from duetime.domain.timeutil import to_ms

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = to_ms(T0)
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
GRACE_MS = 60_000


@pytest.mark.parametrize("mode", [CatchupMode.LATEST, CatchupMode.ALL])
def test_given_a_cron_timer_that_is_the_only_missed_occurrence_then_it_runs_and_none_is_skipped(
    mode: CatchupMode,
) -> None:
    # Given an hourly cron whose 10:00 timer is swept 30 minutes late (the grace is 1 minute)
    now = MS + 30 * MINUTE_MS

    # When the sweep plans it
    result = plan_recurring(
        Cron("0 * * * *"),
        created_at=T0 - timedelta(days=1),
        catchup=Catchup(mode, 3600),
        due_ms=MS,
        now_ms=now,
        horizon_ms=now + MINUTE_MS,
        grace_ms=GRACE_MS,
    )

    # Then the missed 10:00 run is enqueued, nothing is skipped, and the chain goes on at 11:00
    assert result == Plan((MS,), MS + HOUR_MS, 0)


def test_given_a_cron_timer_that_is_the_only_missed_occurrence_when_none_then_one_is_skipped() -> (
    None
):
    now = MS + 30 * MINUTE_MS
    result = plan_recurring(
        Cron("0 * * * *"),
        created_at=T0 - timedelta(days=1),
        catchup=Catchup(CatchupMode.NONE, 3600),
        due_ms=MS,
        now_ms=now,
        horizon_ms=now + MINUTE_MS,
        grace_ms=GRACE_MS,
    )
    assert result == Plan((), MS + HOUR_MS, 1)


def test_given_the_last_occurrence_before_year_10000_missed_then_the_chain_ends_one_skipped() -> (
    None
):
    # Given a rate whose last occurrence before the end of year 9999 was missed long ago
    start = datetime(9999, 1, 1, tzinfo=UTC)
    rate = Rate(MAX_RATE_SECONDS, start_at=start)  # 366 days: the next one is in year 10000
    due = to_ms(start)
    now = due + 30 * 86_400_000

    # When the sweep plans it, outside the catch-up window
    result = plan_recurring(
        rate,
        created_at=start - timedelta(days=1),
        catchup=Catchup(CatchupMode.LATEST, 3600),
        due_ms=due,
        now_ms=now,
        horizon_ms=now + MINUTE_MS,
        grace_ms=GRACE_MS,
    )

    # Then nothing runs, the chain is over, and exactly that one occurrence was skipped
    assert result == Plan((), None, 1)


def test_given_a_rate_anchored_in_the_past_then_an_occurrence_at_creation_is_first() -> None:
    created = T0 + timedelta(minutes=2)
    assert first_due(Rate(60, start_at=T0), created_at=created) == created


def test_given_a_rate_anchored_in_the_past_then_an_occurrence_just_before_creation_is_not_run() -> (
    None
):
    created = T0 + timedelta(minutes=1, milliseconds=1)
    assert first_due(Rate(60, start_at=T0), created_at=created) == T0 + timedelta(minutes=2)
