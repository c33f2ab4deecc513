"""The cron matcher at its edges: syntax it must refuse, the exact instant of a run moved by a
spring-forward gap, independence from the host's time zone, and the last occurrence before an
instant when occurrences come in dense clusters."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from duetime.domain.errors import ValidationError
from duetime.domain.schedule import Cron, next_occurrence, parse_schedule, previous_occurrence

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def utc(month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


# --- syntax that is refused ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 1 * 1#6",  # a month has no 6th Monday (with a day of month, so the field counts)
        "0 0 L/2 * *",  # L is a day on its own or a range's end, not a range's start
        "0 0 L-5 * *",
        "1-z * * * *",  # a range's end that is neither a number nor a name
        "0 0 1-x * *",
        "0 0 * 1-foo *",
        "0 0 ? * ?,1",
    ],
)
def test_given_malformed_cron_items_when_parsed_then_refused(expression: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_schedule({"cron": expression})
    assert caught.value.field == "schedule.cron"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 0 25-L 2 ?", [utc(2, 25), utc(2, 26), utc(2, 27), utc(2, 28)]),
        ("0 0 ? 2 ?", [utc(2, 1), utc(2, 2), utc(2, 3), utc(2, 4)]),
        ("0 0 28 2 5#4", [utc(2, 27), utc(2, 28)]),  # the 4th Friday, or the 28th
    ],
)
def test_given_question_marks_and_ranges_to_l_when_next_then_their_days(
    expression: str, expected: list[datetime]
) -> None:
    cron = parse_schedule({"cron": expression})
    found: list[datetime] = []
    after = utc(1, 31, 12)
    for _ in expected:
        occurrence = next_occurrence(cron, created_at=CREATED, after=after)
        assert occurrence is not None
        found.append(occurrence)
        after = occurrence
    assert found == expected


# --- spring forward: the run moves to the transition instant, to the second ---------------------


@pytest.mark.parametrize("minute", [1, 7, 23, 59])
def test_given_a_fixed_time_in_a_spring_gap_when_next_then_exactly_the_transition(
    minute: int,
) -> None:
    # Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00Z); 02:mm does not exist.
    cron = Cron(f"{minute} 2 * * *", "Europe/Berlin")
    found = next_occurrence(cron, created_at=CREATED, after=utc(3, 28, 12))
    assert found == utc(3, 29, 1)


# --- the host's time zone does not matter --------------------------------------------------------


@pytest.fixture
def host_in_new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("host_in_new_york")
def test_given_a_host_outside_utc_when_next_then_the_same_instants() -> None:
    assert time.timezone != 0  # the host's local time is not UTC here
    tokyo = Cron("0 9 * * *", "Asia/Tokyo")
    assert next_occurrence(tokyo, created_at=CREATED, after=utc(5, 1, 12)) == utc(5, 2, 0)
    # 10:00Z is after 12:00Z's local reading (08:00 in New York) but before 12:00Z itself
    utc_daily = Cron("0 10 * * *")
    assert next_occurrence(utc_daily, created_at=CREATED, after=utc(5, 1, 12)) == utc(5, 2, 10)


# --- the last occurrence before an instant, in dense clusters -------------------------------------


@pytest.mark.parametrize(
    ("expression", "before", "expected"),
    [
        # every minute of an hour, asked hours later: the cluster is found, then its end
        ("* 9 * * *", utc(6, 1, 15), utc(6, 1, 9, 59)),
        ("* 0-11 * * *", utc(6, 1, 23, 30), utc(6, 1, 11, 59)),
        ("*/5 9-10 * * *", utc(6, 1, 10, 32, 30), utc(6, 1, 10, 30)),
        # `before` on an occurrence: the one before it
        ("*/5 9-10 * * *", utc(6, 1, 10, 30), utc(6, 1, 10, 25)),
        ("* 9 * * *", utc(6, 1, 9, 59), utc(6, 1, 9, 58)),
        ("* 9,15 * * *", utc(6, 1, 15), utc(6, 1, 9, 59)),  # the cluster, not `before` itself
        # every minute of some days, asked days later
        ("* * 1-3 * *", utc(6, 20), utc(6, 3, 23, 59)),
        ("*/7 8-17 * * 1-5", utc(6, 6, 12), utc(6, 5, 17, 56)),  # Saturday: Friday's last
    ],
)
def test_given_a_dense_cluster_when_previous_then_its_last_occurrence(
    expression: str, before: datetime, expected: datetime
) -> None:
    cron = Cron(expression)
    assert previous_occurrence(cron, created_at=CREATED, before=before) == expected


def test_given_a_cluster_cut_by_end_at_when_previous_then_its_last_occurrence_not_after_end() -> (
    None
):
    cron = Cron("* 9 * * *", end_at=utc(6, 1, 9, 40, 30))
    assert previous_occurrence(cron, created_at=CREATED, before=utc(6, 2, 15)) == utc(6, 1, 9, 40)


def test_given_a_cluster_that_starts_at_the_creation_when_previous_then_within_it() -> None:
    created = utc(6, 1, 9, 30)
    cron = Cron("* 9 * * *")
    assert previous_occurrence(cron, created_at=created, before=utc(6, 1, 15)) == utc(6, 1, 9, 59)
    assert previous_occurrence(cron, created_at=created, before=utc(6, 1, 9, 31)) == created
    assert previous_occurrence(cron, created_at=created, before=created) is None


def test_given_half_a_year_of_minutes_before_a_gap_when_previous_then_found_quickly() -> None:
    # 260,000 occurrences lie in the window the search ends in: it must bisect them, not step
    # through them (about 5 ms; stepping takes seconds).
    every_minute_to_june = Cron("* * * 1-6 *")
    started = time.perf_counter()
    found = previous_occurrence(
        every_minute_to_june, created_at=datetime(2020, 1, 1, tzinfo=UTC), before=utc(12, 31)
    )
    assert found == utc(6, 30, 23, 59)
    assert time.perf_counter() - started < 1.0
