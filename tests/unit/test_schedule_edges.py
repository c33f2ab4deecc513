"""Schedules at their edges: the 1970 lower bound, the length and zone limits, instants between
milliseconds, a rate's `end_at` between two occurrences, and the end of year 9999."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.domain.cron import MAX_CRON_LENGTH
from duetime.domain.errors import ValidationError
from duetime.domain.jobs import parse_job_spec
from duetime.domain.schedule import (
    At,
    Cron,
    Rate,
    next_occurrence,
    parse_schedule,
    previous_occurrence,
)

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)
MINUTE = timedelta(minutes=1)


def refusal(raw: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        parse_schedule(raw)
    return caught.value


# --- the 1970 lower bound ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"at": "1970-01-01T00:00:00Z"}, At(datetime(1970, 1, 1, tzinfo=UTC))),
        (
            {"rate_seconds": 60, "start_at": "1970-01-01T00:00:00.000Z"},
            Rate(60, start_at=datetime(1970, 1, 1, tzinfo=UTC)),
        ),
    ],
)
def test_given_the_first_instant_of_1970_when_parsed_then_accepted(
    raw: dict[str, object], expected: object
) -> None:
    assert parse_schedule(raw) == expected


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"at": "1969-12-31T23:59:59.999Z"}, "schedule.at"),
        ({"cron": "@daily", "end_at": "1970-01-01T00:59:59.999+01:00"}, "schedule.end_at"),
    ],
)
def test_given_the_last_millisecond_before_1970_when_parsed_then_refused(
    raw: dict[str, object], field: str
) -> None:
    assert refusal(raw).field == field


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"at": "9999-12-31T23:59:59-01:00"}, "schedule.at"),  # year 10000 in UTC
        ({"at": "0000-01-01T00:00:00Z"}, "schedule.at"),
        ({"cron": "@daily", "start_at": "0001-01-01T00:00:00+00:01"}, "schedule.start_at"),
    ],
)
def test_given_a_well_formed_instant_out_of_range_then_the_range_is_said(
    raw: dict[str, object], field: str
) -> None:
    # It said "must be an RFC 3339 timestamp", which it is (found by an outside audit).
    error = refusal(raw)
    assert error.field == field
    assert str(error).endswith("must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z")


@pytest.mark.parametrize(
    ("at", "said"),
    [
        ("2026-02-29T00:00:00Z", "names 2026-02-29, which is no day of the calendar"),
        ("2026-02-30T00:00:00Z", "names 2026-02-30, which is no day of the calendar"),
        ("2026-13-01T00:00:00Z", "names 2026-13-01, which is no day of the calendar"),
        ("2026-11-21T24:00:00Z", "names 24:00:00, which is no time of day"),
        ("2026-11-21T09:61:00Z", "names 09:61:00, which is no time of day"),
    ],
)
def test_given_a_day_or_time_that_does_not_exist_then_the_refusal_names_it(
    at: str, said: str
) -> None:
    # It said "must be an RFC 3339 timestamp with an offset or Z", which a user who wrote
    # 2026-02-29 could not act on (a schedule audit).
    error = refusal({"at": at})
    assert error.field == "schedule.at"
    assert str(error).endswith(said)


# --- the cron length limit and the time zones ----------------------------------------------------


def test_given_a_cron_of_exactly_the_length_limit_when_parsed_then_accepted() -> None:
    expression = "0 0 * * " + ",".join(["1"] * ((MAX_CRON_LENGTH - 8 + 1) // 2))
    expression = expression.ljust(MAX_CRON_LENGTH)  # trailing blanks count, and are allowed
    assert len(expression) == MAX_CRON_LENGTH
    assert parse_schedule({"cron": expression}) == Cron(expression)


def test_given_a_cron_one_character_over_the_limit_when_parsed_then_refused() -> None:
    expression = "0 0 * * 1".ljust(MAX_CRON_LENGTH + 1)
    error = refusal({"cron": expression})
    assert error.field == "schedule.cron"
    assert str(MAX_CRON_LENGTH) in error.message


@pytest.mark.parametrize("zone", ["right/UTC", "right/Europe/Berlin"])
def test_given_a_leap_second_zone_when_parsed_then_refused(zone: str) -> None:
    # `right/` zones count leap seconds, so their wall clock drifts from POSIX time.
    assert refusal({"cron": "0 9 * * *", "timezone": zone}).field == "schedule.timezone"


@pytest.mark.parametrize(
    "zone", ["posixrules", "posix/Europe/Berlin", "Factory", "zone1970.tab", "Europe/Berlin/"]
)
def test_given_a_zone_the_pinned_tzdata_does_not_list_then_refused(zone: str) -> None:
    # A host's /usr/share/zoneinfo holds these too: accepted there, they were refused on a
    # host without them (a Lambda runtime), and a stored job failed to read.
    assert refusal({"cron": "0 9 * * *", "timezone": zone}).field == "schedule.timezone"


def test_zones_come_from_the_pinned_package_whatever_the_host_has() -> None:
    from importlib.resources import files

    from duetime.domain.schedule import zone

    berlin = zone("Europe/Berlin")
    assert berlin is zone("Europe/Berlin")  # read once
    assert str(berlin) == "Europe/Berlin"
    assert datetime(2026, 7, 1, 12, tzinfo=berlin).utcoffset() == timedelta(hours=2)
    pinned = files("tzdata").joinpath("zoneinfo", "Europe", "Berlin").read_bytes()
    assert pinned.startswith(b"TZif")
    with pytest.raises(ValueError):
        zone("../../etc/passwd")


# --- instants between milliseconds ---------------------------------------------------------------


def test_given_before_inside_a_millisecond_when_previous_then_the_next_one_is_excluded() -> None:
    half_a_millisecond = timedelta(microseconds=500)
    assert previous_occurrence(At(T0 + MS), created_at=T0, before=T0 + half_a_millisecond) is None
    assert previous_occurrence(At(T0), created_at=T0, before=T0 + half_a_millisecond) == T0


# --- a rate's end_at -----------------------------------------------------------------------------


def test_given_before_equal_to_end_at_when_previous_then_the_occurrence_at_end_at_is_excluded() -> (
    None
):
    rate = Rate(60, start_at=T0, end_at=T0 + 2 * MINUTE)
    assert previous_occurrence(rate, created_at=T0, before=T0 + 2 * MINUTE) == T0 + MINUTE
    assert previous_occurrence(rate, created_at=T0, before=T0 + 2 * MINUTE + MS) == T0 + 2 * MINUTE


def test_given_end_at_just_before_an_occurrence_when_previous_then_that_one_is_gone() -> None:
    rate = Rate(60, start_at=T0, end_at=T0 + MINUTE - MS)
    assert previous_occurrence(rate, created_at=T0, before=T0 + 10 * MINUTE) == T0
    assert next_occurrence(rate, created_at=T0, after=T0) is None


def test_given_a_zero_second_rate_built_in_code_when_asked_then_value_error() -> None:
    # parse_schedule refuses it; code that builds one directly gets a ValueError, not a loop
    # or a division by zero.
    with pytest.raises(ValueError, match="positive"):
        previous_occurrence(Rate(0), created_at=T0, before=T0 + MINUTE)
    with pytest.raises(ValueError, match="positive"):
        next_occurrence(Rate(0), created_at=T0, after=T0)


# --- the end of year 9999 ------------------------------------------------------------------------


def test_given_a_cron_when_its_next_occurrence_is_in_year_9999_then_found() -> None:
    yearly = Cron("0 0 1 1 *")
    after = datetime(9998, 12, 31, 12, 0, tzinfo=UTC)
    assert next_occurrence(yearly, created_at=T0, after=after) == datetime(9999, 1, 1, tzinfo=UTC)


def test_given_a_cron_on_the_last_minute_of_year_9999_then_it_is_an_occurrence() -> None:
    last_minute = Cron("59 23 31 12 *")
    after = datetime(9999, 12, 31, tzinfo=UTC)
    expected = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    assert next_occurrence(last_minute, created_at=T0, after=after) == expected
    assert next_occurrence(last_minute, created_at=T0, after=expected) is None


def test_given_a_cron_in_the_last_hours_of_year_9999_then_each_minute_is_an_occurrence() -> None:
    # Found by an outside audit: within 3 hours of the end, a window past it overflowed and
    # every occurrence there was lost (the API refused such a job: no occurrence in the future).
    every_minute = Cron("* * * * *")
    for after in (
        datetime(9999, 12, 31, 20, 58, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 58, tzinfo=UTC),
    ):
        found = next_occurrence(every_minute, created_at=T0, after=after)
        assert found == after + timedelta(minutes=1)
    last = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    assert next_occurrence(every_minute, created_at=T0, after=last) is None
    last_minute = Cron("59 23 31 12 *", start_at=datetime(9999, 12, 31, 21, 30, tzinfo=UTC))
    assert next_occurrence(last_minute, created_at=T0, after=None) == last
    # and the mirror
    assert previous_occurrence(every_minute, created_at=T0, before=last) == last - MINUTE
    end = datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    assert previous_occurrence(last_minute, created_at=T0, before=end) == last


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [
        # Local midnight of 9999-12-31 in Tokyo (UTC+9) is 15:00 UTC the day before.
        ("0 0 * * *", "Asia/Tokyo", datetime(9999, 12, 30, 12), datetime(9999, 12, 30, 15)),
        # The last local minute of the year in Tokyo is an instant of 9999.
        ("59 23 31 12 *", "Asia/Tokyo", datetime(9999, 12, 31), datetime(9999, 12, 31, 14, 59)),
        # Noon of 9999-12-31 in New York (UTC-5) is 17:00 UTC.
        ("0 12 31 12 *", "America/New_York", datetime(9999, 12, 31), datetime(9999, 12, 31, 17)),
        (
            "59 18 31 12 *",
            "America/New_York",
            datetime(9999, 12, 31),
            datetime(9999, 12, 31, 23, 59),
        ),
        # Past the end of 9999 in UTC (04:59 of year 10000) or in the zone's own wall time
        # (Tokyo's 10000-01-01): none.
        ("59 23 31 12 *", "America/New_York", datetime(9999, 12, 31), None),
        ("0 0 * * *", "Asia/Tokyo", datetime(9999, 12, 30, 15), None),
        (
            "* * * * *",
            "Pacific/Kiritimati",
            datetime(9999, 12, 31, 9, 58),
            datetime(9999, 12, 31, 9, 59),
        ),
        ("* * * * *", "Pacific/Kiritimati", datetime(9999, 12, 31, 9, 59), None),
        (
            "* * * * *",
            "Pacific/Pago_Pago",
            datetime(9999, 12, 31, 23, 58),
            datetime(9999, 12, 31, 23, 59),
        ),
    ],
)
def test_given_a_zone_when_the_year_9999_ends_then_occurrences_run_to_its_last_minute(
    expression: str, zone: str, after: datetime, expected: datetime | None
) -> None:
    cron = Cron(expression, timezone=zone)
    found = next_occurrence(cron, created_at=T0, after=after.replace(tzinfo=UTC))
    assert found == (None if expected is None else expected.replace(tzinfo=UTC))


@pytest.mark.parametrize(
    ("body", "field", "meant"),
    [
        ({"nmae": "x"}, "nmae", "name"),
        ({"retries": 3}, "retries", "retry"),
        ({"target": {"type": "http", "uri": "https://example.com/"}}, "target.uri", "url"),
        ({"retry": {"attempts": 3}}, "retry.attempts", "max_attempts"),
        ({"catchup": {"windows_seconds": 60}}, "catchup.windows_seconds", "window_seconds"),
        ({"schedule": {"after": {"job_id": "01J", "onn": "failed"}}}, "schedule.after.onn", "on"),
    ],
)
def test_given_a_misspelt_field_then_the_refusal_names_the_closest(
    body: dict[str, object], field: str, meant: str
) -> None:
    # A bare "unknown field" left the user to guess (a new user's walk, round four).
    raw: dict[str, object] = {
        "schedule": {"delay_seconds": 5},
        "target": {"type": "handler", "name": "x"},
    } | body
    with pytest.raises(ValidationError) as refused:
        parse_job_spec(raw)
    assert refused.value.field == field
    assert refused.value.message == f"unknown field; did you mean {meant}?"
