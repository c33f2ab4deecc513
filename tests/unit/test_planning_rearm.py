"""Where a job goes on once its schedule changed (`planning.rearmed_due`, PATCH): a recurring
schedule's first occurrence from now on, on its own anchor; a one-off counted from the change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.planning import rearmed_due
from duetime.domain.schedule import After, At, Cron, Delay, Rate

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
CREATED = T0 - timedelta(days=3)
MS = timedelta(milliseconds=1)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # an occurrence at the change itself is due then: "from now on" includes now
        (T0 + timedelta(minutes=5), T0 + timedelta(minutes=5)),
        # one a millisecond before the change is past
        (T0 + timedelta(minutes=5) + MS, T0 + timedelta(minutes=6)),
        # between occurrences: the next one on the anchor, not the change plus the period
        (T0 + timedelta(minutes=5, seconds=20), T0 + timedelta(minutes=6)),
    ],
)
def test_a_rate_goes_on_at_its_first_occurrence_from_now_on_its_start_at(
    now: datetime, expected: datetime
) -> None:
    rate = Rate(60, start_at=T0)

    assert rearmed_due(rate, created_at=CREATED, now=now) == expected


def test_a_rate_without_start_at_stays_anchored_on_the_job_s_creation() -> None:
    # Created at 10:00:10: occurrences at 10:01:10, 10:02:10, ... (not counted from the change)
    created = T0 + timedelta(seconds=10)

    found = rearmed_due(Rate(60), created_at=created, now=T0 + timedelta(minutes=5, seconds=30))

    assert found == T0 + timedelta(minutes=6, seconds=10)


def test_a_cron_goes_on_at_its_first_occurrence_from_now_on() -> None:
    hourly = Cron("0 * * * *", "UTC")

    assert rearmed_due(hourly, created_at=CREATED, now=T0) == T0
    assert rearmed_due(hourly, created_at=CREATED, now=T0 + MS) == T0 + timedelta(hours=1)


def test_a_delay_counts_from_the_change_not_from_the_creation() -> None:
    now = T0 + timedelta(hours=2)

    assert rearmed_due(Delay(90), created_at=CREATED, now=now) == now + timedelta(seconds=90)


def test_an_at_goes_on_at_its_instant_and_an_after_has_none() -> None:
    at = At(T0 + timedelta(days=1))

    assert rearmed_due(at, created_at=CREATED, now=T0) == T0 + timedelta(days=1)
    assert rearmed_due(After("01UP"), created_at=CREATED, now=T0) is None
