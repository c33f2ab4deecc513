"""The previous occurrence of a cron schedule: `end_at` as an exclusive `before`, and what the
backward search costs (it stops at the lower bound and does not depend on the job's age)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain import schedule
from duetime.domain.schedule import Cron, previous_occurrence

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Counts evaluations of the cron schedule (`_cron_next`, which the backward search is
    built on); returns a function reading the count."""
    calls = 0
    real = schedule._cron_next

    def counting(*args: object) -> datetime | None:
        nonlocal calls
        calls += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(schedule, "_cron_next", counting)
    return lambda: calls


# --- end_at --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (T0 + HOUR, T0),  # before == end_at: the occurrence at end_at is not before it
        (T0 + HOUR + MS, T0 + HOUR),  # one millisecond later it is
        (T0 + 5 * HOUR, T0 + HOUR),  # long after end_at: the last one, at end_at
    ],
)
def test_given_a_cron_whose_end_at_is_an_occurrence_then_previous_counts_it_only_before_before(
    before: datetime, expected: datetime
) -> None:
    # Given an hourly cron ending exactly on its 11:00 occurrence
    cron = Cron("0 * * * *", end_at=T0 + HOUR)

    # Then the previous occurrence is strictly before `before`, and never after end_at
    assert previous_occurrence(cron, created_at=T0 - DAY, before=before) == expected


# --- the cost of the backward search -------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "created_at", "before"),
    [
        (Cron("0 * * * *"), T0, T0),  # before == created_at
        (Cron("0 * * * *", start_at=T0), T0 - 30 * DAY, T0),  # before == start_at
        (Cron("0 * * * *", start_at=T0), T0 - 30 * DAY, T0 - HOUR),  # before < start_at
    ],
)
def test_given_before_at_or_below_the_lower_bound_then_none_without_evaluating_the_schedule(
    cron: Cron, created_at: datetime, before: datetime, evaluations: Callable[[], int]
) -> None:
    # Pins the shortcut: no occurrence can precede the later of created_at and start_at, so
    # nothing is searched (with start_at, created_at 30 days earlier is not the bound).
    assert previous_occurrence(cron, created_at=created_at, before=before) is None
    assert evaluations() == 0


@pytest.mark.parametrize(
    ("cron", "created_at"),
    [
        (Cron("0 0 1 1 *"), T0 - HOUR),
        (Cron("0 0 1 1 *", start_at=T0 - HOUR), T0 - 30 * DAY),  # start_at is the bound
    ],
    ids=["created_at", "start_at"],
)
def test_given_no_occurrence_since_the_lower_bound_then_the_search_stops_at_that_bound(
    cron: Cron, created_at: datetime, evaluations: Callable[[], int]
) -> None:
    # Given a yearly cron whose lower bound is one hour before `before`
    result = previous_occurrence(cron, created_at=created_at, before=T0)

    # Then there is none, known once the doubling window (1, 2, ..., 64 minutes: 7 evaluations)
    # passes the bound, not after looking back over 30 days or 41 years
    assert result is None
    assert evaluations() <= 8


@pytest.mark.parametrize(
    ("expression", "before", "expected"),
    [
        ("* * * * *", T0 + timedelta(seconds=30), T0),
        ("0 * * * *", T0 + timedelta(minutes=30), T0),
        ("* 9 * * *", T0, T0 - timedelta(minutes=1)),  # the last of a dense cluster
    ],
)
def test_given_an_old_job_then_the_previous_occurrence_costs_what_it_costs_for_a_new_one(
    expression: str,
    before: datetime,
    expected: datetime,
    evaluations: Callable[[], int],
) -> None:
    # Given the same cron created one day ago and ten years ago
    young = previous_occurrence(Cron(expression), created_at=T0 - DAY, before=before)
    young_cost = evaluations()
    old = previous_occurrence(Cron(expression), created_at=T0 - 3650 * DAY, before=before)
    old_cost = evaluations() - young_cost

    # Then both find the same occurrence, with as many evaluations (the search works back
    # from `before`, never forward from the job's first occurrence), and only a few
    assert young == old == expected
    assert old_cost == young_cost <= 8
