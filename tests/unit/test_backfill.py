"""The pure part of backfill (duetime.domain.backfill): the body's range and the occurrences of a
schedule in [from, to), bounded at 1,000."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.domain.backfill import (
    MAX_BACKFILL_OCCURRENCES,
    BackfillRange,
    backfill_occurrences,
    parse_backfill_range,
)
from duetime.domain.errors import ValidationError
from duetime.domain.planning import rate_count_between
from duetime.domain.schedule import Cron, Rate
from duetime.domain.timeutil import rfc3339_ms, to_ms

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = to_ms(T0)
MINUTE = 60_000
DAY = 86_400_000
NOW = MS + DAY
EARLIEST = NOW - 30 * DAY


def span(start_minutes: int, end_minutes: int) -> BackfillRange:
    return BackfillRange(MS + start_minutes * MINUTE, MS + end_minutes * MINUTE)


# --- the range -------------------------------------------------------------------------------


def parse(body: object) -> BackfillRange:
    return parse_backfill_range(body, now_ms=NOW, earliest_ms=EARLIEST)


def test_a_range_is_parsed_to_milliseconds() -> None:
    body = {"from": "2026-11-21T10:00:00Z", "to": "2026-11-21T11:30:00.250+01:00"}

    assert parse(body) == BackfillRange(MS, MS + 30 * MINUTE + 250)


def test_to_may_be_now_and_from_the_start_of_the_hot_window() -> None:
    assert parse({"from": rfc3339_ms(EARLIEST), "to": rfc3339_ms(NOW)}) == BackfillRange(
        EARLIEST, NOW
    )


def test_the_epoch_itself_is_a_valid_instant() -> None:
    body = {"from": "1970-01-01T00:00:00Z", "to": "1970-01-01T00:00:00.001Z"}

    assert parse_backfill_range(body, now_ms=NOW, earliest_ms=0) == BackfillRange(0, 1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (None, "body"),
        ([], "body"),
        ({"to": rfc3339_ms(MS)}, "from"),
        ({"from": rfc3339_ms(MS)}, "to"),
        ({"from": None, "to": rfc3339_ms(MS)}, "from"),
        ({"from": 1, "to": rfc3339_ms(MS)}, "from"),
        ({"from": "yesterday", "to": rfc3339_ms(MS)}, "from"),
        ({"from": rfc3339_ms(MS), "to": "2026-11-21T10:00:00"}, "to"),  # no offset
        ({"from": "1969-12-31T23:59:59Z", "to": rfc3339_ms(MS)}, "from"),
        ({"from": rfc3339_ms(MS), "to": rfc3339_ms(NOW + 1)}, "to"),  # in the future
        ({"from": rfc3339_ms(MS), "to": rfc3339_ms(MS)}, "from"),  # empty
        ({"from": rfc3339_ms(MS + 1), "to": rfc3339_ms(MS)}, "from"),  # reversed
        ({"from": rfc3339_ms(EARLIEST - 1), "to": rfc3339_ms(MS)}, "from"),  # before the window
        ({"from": rfc3339_ms(MS), "to": rfc3339_ms(MS + 1), "until": "x"}, "until"),
    ],
)
def test_a_bad_range_is_refused_naming_the_field(body: Any, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse(body)

    assert raised.value.field == field


def test_a_range_out_of_bounds_is_refused_with_the_bound_it_crossed() -> None:
    # The client learns where now is and where the hot window begins, to correct the range
    with pytest.raises(ValidationError) as future:
        parse({"from": rfc3339_ms(MS), "to": rfc3339_ms(NOW + 1)})
    with pytest.raises(ValidationError) as old:
        parse({"from": rfc3339_ms(EARLIEST - 1), "to": rfc3339_ms(MS)})

    assert future.value.message == f"must not be in the future (now is {rfc3339_ms(NOW)})"
    assert old.value.message.startswith(f"must not be before {rfc3339_ms(EARLIEST)}: ")


# --- the occurrences -------------------------------------------------------------------------


def test_rate_occurrences_in_the_range_from_inclusive_to_exclusive() -> None:
    rate = Rate(60, start_at=T0)

    found = backfill_occurrences(rate, created_at=T0 - timedelta(days=1), span=span(2, 5))

    assert found == (MS + 2 * MINUTE, MS + 3 * MINUTE, MS + 4 * MINUTE)


def test_a_range_between_occurrences_holds_none() -> None:
    rate = Rate(3600, start_at=T0)

    found = backfill_occurrences(
        rate, created_at=T0 - timedelta(days=1), span=BackfillRange(MS + 1, MS + 3_599_999)
    )

    assert found == ()


def test_occurrences_before_the_job_was_created_are_not_its_own() -> None:
    # A rate anchored on an old start_at, for a job created at 10:02:30
    rate = Rate(60, start_at=T0 - timedelta(hours=1))
    created = T0 + timedelta(minutes=2, seconds=30)

    found = backfill_occurrences(rate, created_at=created, span=span(0, 5))

    assert found == (MS + 3 * MINUTE, MS + 4 * MINUTE)


def test_a_rate_without_start_at_counts_from_the_job_s_creation() -> None:
    found = backfill_occurrences(Rate(60), created_at=T0, span=span(-10, 4))

    assert found == (MS + MINUTE, MS + 2 * MINUTE, MS + 3 * MINUTE)


def test_cron_occurrences_follow_the_expression_and_its_timezone() -> None:
    # 09:00 on weekdays in Paris (08:00 UTC in winter), over a week from Saturday 21 Nov
    cron = Cron("0 9 * * MON-FRI", "Europe/Paris")

    found = backfill_occurrences(cron, created_at=T0 - timedelta(days=30), span=span(0, 7 * 1440))

    days = [(datetime.fromtimestamp(ms / 1000, UTC)).strftime("%a %H:%M") for ms in found]
    assert days == ["Mon 08:00", "Tue 08:00", "Wed 08:00", "Thu 08:00", "Fri 08:00"]


def test_the_schedule_s_end_at_bounds_the_occurrences() -> None:
    rate = Rate(60, start_at=T0, end_at=T0 + timedelta(minutes=2))

    found = backfill_occurrences(rate, created_at=T0, span=span(0, 10))

    assert found == (MS, MS + MINUTE, MS + 2 * MINUTE)


def test_exactly_1000_occurrences_are_accepted() -> None:
    rate = Rate(60, start_at=T0)

    found = backfill_occurrences(rate, created_at=T0, span=span(0, MAX_BACKFILL_OCCURRENCES))

    assert len(found) == MAX_BACKFILL_OCCURRENCES == 1000
    assert found[-1] == MS + 999 * MINUTE


def test_1001_rate_occurrences_are_refused_on_to_with_the_exact_count() -> None:
    rate = Rate(60, start_at=T0)

    with pytest.raises(ValidationError) as raised:
        backfill_occurrences(rate, created_at=T0, span=span(0, 5000))

    assert raised.value.field == "to"
    assert "holds 5,000 occurrences" in raised.value.message
    # Where the first 1,000 end: the 1,001st occurrence
    assert f"to={rfc3339_ms(MS + 1000 * MINUTE)}" in raised.value.message


def test_too_many_cron_occurrences_are_counted_up_to_a_bound() -> None:
    every_minute = Cron("* * * * *", "UTC")

    with pytest.raises(ValidationError) as few:
        backfill_occurrences(every_minute, created_at=T0, span=span(0, 1500))
    with pytest.raises(ValidationError) as many:
        backfill_occurrences(every_minute, created_at=T0, span=span(0, 20 * 1440))

    assert (few.value.field, many.value.field) == ("to", "to")
    assert "holds 1,500 occurrences" in few.value.message
    assert "holds more than 2,000 occurrences" in many.value.message  # counted on from 1,001


def test_too_many_occurrences_of_a_rate_without_start_at_are_counted_from_the_creation() -> None:
    # Created at 10:00: occurrences at 10:01, 10:02, ...; [10:00, 10:00 + 5,000 min) holds 4,999
    with pytest.raises(ValidationError) as raised:
        backfill_occurrences(Rate(60), created_at=T0, span=span(0, 5000))

    assert "holds 4,999 occurrences" in raised.value.message


def test_a_cron_count_starts_at_from_not_at_an_occurrence_a_millisecond_before() -> None:
    every_minute = Cron("* * * * *", "UTC")

    # from 10:00:00.001: the 10:00 occurrence is outside; 10:01 ... 11:39 are inside
    with pytest.raises(ValidationError) as raised:
        backfill_occurrences(
            every_minute, created_at=T0, span=BackfillRange(MS + 1, MS + 1500 * MINUTE)
        )

    assert "holds 1,499 occurrences" in raised.value.message


def test_a_smaller_limit_bounds_the_listing() -> None:
    with pytest.raises(ValidationError):
        backfill_occurrences(Rate(60, start_at=T0), created_at=T0, span=span(0, 4), limit=3)


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [(0, 1, 1), (0, 60_000, 1), (0, 60_001, 2), (1, 60_001, 1), (-MINUTE, 0, 0), (5, 5, 0)],
)
def test_rate_count_between_counts_the_half_open_range(start: int, end: int, expected: int) -> None:
    rate = Rate(60, start_at=T0)

    assert rate_count_between(rate, T0, MS + start, MS + end) == expected


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [(0, 60_000, 0), (0, 60_001, 1), (60_001, 120_001, 1), (30_000, 3_600_000, 59)],
)
def test_rate_count_between_anchors_a_rate_without_start_at_on_the_creation(
    start: int, end: int, expected: int
) -> None:
    # Created at 10:00: the first occurrence is at 10:01
    assert rate_count_between(Rate(60), T0, MS + start, MS + end) == expected
