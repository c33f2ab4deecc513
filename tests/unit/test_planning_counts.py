"""Counting occurrences in planning: skipped rate occurrences up to an `end_at` that is itself an
occurrence, `latest` when there is no previous occurrence to find, and the rate counter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.jobs import Catchup, CatchupMode
from duetime.domain.planning import Plan, _rate_count_before, plan_recurring
from duetime.domain.schedule import Cron, Rate
from duetime.domain.timeutil import to_ms

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = to_ms(T0)
MINUTE_MS = 60_000
DAY_MS = 86_400_000
GRACE_MS = 60_000


@pytest.mark.parametrize("mode", list(CatchupMode))
def test_given_a_rate_ending_on_an_occurrence_all_lost_then_the_one_at_end_at_counts_as_skipped(
    mode: CatchupMode,
) -> None:
    # Given a 1-minute rate from 10:00 whose end_at is its 10:10 occurrence, swept a day after
    # its 10:05 timer (far outside the 1-hour catch-up window)
    rate = Rate(60, start_at=T0, end_at=T0 + timedelta(minutes=10))
    now = MS + DAY_MS

    # When the sweep plans it
    result = plan_recurring(
        rate,
        created_at=T0 - timedelta(days=1),
        catchup=Catchup(mode, 3600),
        due_ms=MS + 5 * MINUTE_MS,
        now_ms=now,
        horizon_ms=now + MINUTE_MS,
        grace_ms=GRACE_MS,
    )

    # Then nothing runs, the chain is over, and 10:05 to 10:10 inclusive (6) were skipped
    assert result == Plan((), None, 6)


def test_given_latest_and_no_previous_occurrence_can_be_found_then_the_timer_itself_runs() -> None:
    # Given a cron whose only occurrence is the last minute of year 9999: looking back from
    # just after it overflows the calendar, so no previous occurrence is found
    due = to_ms(datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
    now = due + 59_999  # 23:59:59.999, the last representable millisecond

    # When the sweep plans it, a second late
    result = plan_recurring(
        Cron("59 23 31 12 *", start_at=datetime(9999, 1, 1, tzinfo=UTC)),
        created_at=datetime(9999, 1, 1, tzinfo=UTC),
        catchup=Catchup(CatchupMode.LATEST, 3600),
        due_ms=due,
        now_ms=now,
        horizon_ms=now,
        grace_ms=1000,
    )

    # Then `latest` falls back to the timer's occurrence: it runs, and the chain ends
    assert result == Plan((due,), None, 0)


# --- the rate counter ----------------------------------------------------------------------------
# Tested directly: plan_recurring only asks it about limits past the anchor and at most
# end_at + 1 ms, where these differences do not show.


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (T0 - timedelta(days=1), 0),  # long before the anchor
        (T0 + timedelta(minutes=1), 0),  # the anchor itself is not before itself
        (T0 + timedelta(minutes=1, milliseconds=1), 1),
        (T0 + timedelta(minutes=3), 2),
    ],
)
def test_given_a_rate_without_start_at_then_counting_starts_one_period_after_creation(
    limit: datetime, expected: int
) -> None:
    # Pins the anchor (created_at + one period) and that counts never go below zero
    assert _rate_count_before(Rate(60), T0, to_ms(limit)) == expected


@pytest.mark.parametrize(
    ("end_at", "expected"),
    [
        (T0 + timedelta(minutes=10), 11),  # end_at is an occurrence: 10:00 to 10:10
        (T0 + timedelta(minutes=10) - timedelta(milliseconds=1), 10),  # just before 10:10
    ],
)
def test_given_a_rate_with_end_at_then_only_occurrences_up_to_end_at_are_counted(
    end_at: datetime, expected: int
) -> None:
    rate = Rate(60, start_at=T0, end_at=end_at)
    assert _rate_count_before(rate, T0 - timedelta(days=1), MS + DAY_MS) == expected
