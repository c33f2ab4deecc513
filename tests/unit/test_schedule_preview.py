"""`upcoming` (duetime.domain.planning): the occurrences POST /schedules/preview shows, the
first being the `next_run_at` a job submitted at the same instant gets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.domain.errors import ValidationError
from duetime.domain.planning import first_due, upcoming
from duetime.domain.schedule import After, At, Cron, Delay, Rate, parse_schedule

NOW = datetime(2026, 11, 21, 10, 0, 5, 123_000, tzinfo=UTC)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_cron_across_a_daylight_saving_change_keeps_the_wall_time() -> None:
    # Given 09:00 every day in Berlin, starting before the change to summer time (28 March 2027)
    cron = Cron("0 9 * * *", "Europe/Berlin", start_at=utc("2027-03-26T00:00:00"))

    # Then 09:00 is 08:00 UTC before the change and 07:00 UTC after it
    assert upcoming(cron, now=NOW, count=4) == [
        utc("2027-03-26T08:00:00"),
        utc("2027-03-27T08:00:00"),
        utc("2027-03-28T07:00:00"),
        utc("2027-03-29T07:00:00"),
    ]


def test_weekdays_at_nine_skip_the_weekend() -> None:
    found = upcoming(Cron("0 9 * * 1-5", "Europe/Berlin"), now=NOW, count=6)
    assert found == [utc(f"2026-11-{day}T08:00:00") for day in (23, 24, 25, 26, 27, 30)]


def test_a_rate_counts_from_now_or_from_its_start() -> None:
    assert upcoming(Rate(60), now=NOW, count=2) == [
        utc("2026-11-21T10:01:05.123"),
        utc("2026-11-21T10:02:05.123"),
    ]
    # An anchor in the past: the occurrences from now on, on the anchor's grid
    started = Rate(3600, start_at=utc("2026-11-21T09:30:00"))
    assert upcoming(started, now=NOW, count=2) == [
        utc("2026-11-21T10:30:00"),
        utc("2026-11-21T11:30:00"),
    ]


def test_fewer_than_asked_when_the_schedule_ends() -> None:
    ending = Rate(3600, start_at=utc("2026-11-21T11:00:00"), end_at=utc("2026-11-21T13:00:00"))
    assert upcoming(ending, now=NOW, count=20) == [
        utc("2026-11-21T11:00:00"),
        utc("2026-11-21T12:00:00"),
        utc("2026-11-21T13:00:00"),
    ]
    over = Cron("* * * * *", end_at=utc("2026-11-21T09:00:00"))
    assert upcoming(over, now=NOW, count=5) == []


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        (At(utc("2026-12-01T00:00:00")), [utc("2026-12-01T00:00:00")]),
        # An instant in the past: a job submitted now runs it at once
        (At(utc("2026-01-01T00:00:00")), [utc("2026-01-01T00:00:00")]),
        (Delay(90), [utc("2026-11-21T10:01:35.123")]),
    ],
)
def test_a_one_off_has_its_one_instant(schedule: At | Delay, expected: list[datetime]) -> None:
    assert upcoming(schedule, now=NOW, count=5) == expected


def test_after_has_no_occurrences_of_its_own() -> None:
    with pytest.raises(ValidationError) as raised:
        upcoming(After("01KAAAAAAAAAAAAAAAAAAAAAAA"), now=NOW, count=5)
    assert raised.value.field == "schedule.after"


@pytest.mark.parametrize(
    "raw",
    [
        {"cron": "*/7 * * * *"},
        {"cron": "0 2 * * *", "timezone": "America/New_York"},
        {"rate_seconds": 45, "start_at": "2026-11-20T00:00:00Z"},
        {"at": "2026-11-22T00:00:00Z"},
    ],
)
def test_the_first_occurrence_is_the_first_due_of_a_job_submitted_now(raw: object) -> None:
    schedule = parse_schedule(raw)
    found = upcoming(schedule, now=NOW, count=3)
    assert found[0] == first_due(schedule, created_at=NOW)
    assert found == sorted(set(found))
    assert all(instant >= NOW for instant in found[1:])


def test_a_cron_starting_in_the_last_hours_of_year_9999_shows_them() -> None:
    # Found by an outside audit: the preview showed none, and a job was refused
    cron = Cron("*/30 * * * *", start_at=utc("9999-12-31T21:30:00"))
    times = ("21:30", "22:00", "22:30", "23:00", "23:30")
    assert upcoming(cron, now=NOW, count=10) == [utc(f"9999-12-31T{t}:00") for t in times]
