"""Cron expressions: the parser and the matcher. Pure: every function takes the instants it needs.

Expressions are matched on wall times with Vixie/Debian cron's rules, by a matcher of our own
(`_cron_spec` parses, `_next_wall` walks). A day matches when its month matches and, when the
day-of-month or the day-of-week field starts with `*` (Vixie's DOM_STAR/DOW_STAR), both day
fields match; otherwise either one. The extensions (`L`, `nW`, `d#n`, `Ld`/`dL`) count as
restricted fields.

Cron follows the Vixie/Debian cron daylight-saving policy. A job is *wildcard* when its minute or
hour field starts with `*`; otherwise it is *fixed-time*.

- Spring forward (the wall time does not exist): a fixed-time job runs once, at the transition
  instant (the first valid wall time after the gap); a wildcard job has no run for the missing
  wall times.
- Fall back (the wall time happens twice): a fixed-time job runs once, at the first occurrence;
  a wildcard job runs at both.

`duetime.domain.schedule` applies a `Cron` schedule's time zone and bounds on top of this,
through `_cron_spec` and `_first_cron_instant_after` (private names kept from when the matcher
lived there: scripts/mutation.sh names mutants by them). See docs/schedules.md for the
user-facing description.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import NamedTuple
from zoneinfo import ZoneInfo

MAX_CRON_LENGTH = 256
MACROS: Mapping[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_FIELDS = re.compile(r"\S+", re.ASCII)
# Hashed (H) and random (R) values (Jenkins, croniter): non-standard, and R is not even
# deterministic. Refused with their own message.
_HASH_OR_RANDOM = re.compile(r"^[hr](?:\(|/|$)", re.IGNORECASE)
_MINUTE, _HOUR, _DOM, _MONTH, _DOW = range(5)
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))  # day of week: 0 and 7 are Sunday
# Where `*` and `a/n` stop. Day of week stops at Saturday: `1/2` is Monday, Wednesday, Friday.
# (`*/n` is the same over 0-6 as over Vixie's 0-7, since 7 is Sunday again.)
_ENDS = (59, 23, 31, 12, 6)
# Items of a field, in any case (quoted as written when refused): `a`, `a-b`, `*`, each with an
# optional `/step`.
_ICASE = re.ASCII | re.IGNORECASE
_ITEM = re.compile(r"(?P<low>\*|[0-9a-z]+)(?:-(?P<high>[0-9a-z]+))?(?:/(?P<step>[0-9]+))?", _ICASE)
_NEAREST_WEEKDAY = re.compile(r"(?P<day>[0-9]+)w|w(?P<day_after>[0-9]+)", _ICASE)
_NTH_WEEKDAY = re.compile(r"(?P<low>[0-9a-z]+)(?:-(?P<high>[0-9a-z]+))?#(?P<nth>[0-9]+)", _ICASE)
_LAST_WEEKDAY = re.compile(r"l(?P<day>[0-9a-z]+)|(?P<day_before>[0-9a-z]+)l", _ICASE)
_NAMES: Mapping[int, Mapping[str, int]] = {
    3: {
        name: number
        for number, name in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
            start=1,
        )
    },
    4: {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6},
}
_CRON_SHAPE = (
    "must have 5 fields (minute hour day-of-month month day-of-week) or be one of "
    + " ".join(MACROS)
)
# The window in which wall time can run backwards relative to real time: over any backward
# shift of the pinned tzdata since 1970 but Antarctica/Vostok's 7 hours in 1994 (docs/schedules.md).
_SHIFT_WINDOW = timedelta(hours=3)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MINUTE_STEP = timedelta(minutes=1)
_DAY = timedelta(days=1)
_LAST_WALL = datetime(9999, 12, 31, 23, 59)


# --- parsing -------------------------------------------------------------------------------------


class _DayOfMonth(NamedTuple):
    star: bool  # Vixie's DOM_STAR: the field's text starts with `*` (or is `?`)
    days: frozenset[int]
    last: bool  # `L`: the last day of the month
    nearest: int | None  # `nW`: the weekday nearest day n, within the month


class _DayOfWeek(NamedTuple):
    star: bool  # Vixie's DOW_STAR
    weekdays: frozenset[int]  # 0 = Sunday ... 6 = Saturday
    nth: frozenset[tuple[int, int]]  # `d#n`: (weekday, n), the n-th such weekday of the month
    last: frozenset[int]  # `Ld` or `dL`: the last such weekday of the month


class _CronSpec(NamedTuple):
    """A parsed cron expression: what `_next_wall` needs to walk wall times."""

    minutes: tuple[int, ...]  # ascending
    hours: tuple[int, ...]  # ascending
    months: tuple[bool, ...]  # months[m] for m in 1-12; months[0] is unused
    # Which days of a month match depends only on its length and the weekday of its 1st:
    # days[(length - 28) * 7 + first] lists them (ascending) for a month of `length` days
    # whose 1st is weekday `first` (0 = Sunday).
    days: tuple[tuple[int, ...], ...]
    wildcard: bool  # minute or hour field starts with `*` (Vixie cron's DST distinction)

    def month_days(self, year: int, month: int) -> tuple[int, ...]:
        monday_based, length = calendar.monthrange(year, month)
        return self.days[(length - 28) * 7 + (monday_based + 1) % 7]


@lru_cache(maxsize=1024)
def _cron_spec(expression: str) -> _CronSpec:
    """Parse and validate a cron expression. Raises ValueError with a user-facing message."""
    if len(expression) > MAX_CRON_LENGTH:
        raise ValueError(f"must be at most {MAX_CRON_LENGTH} characters")
    text = expression.strip()
    if text.startswith("@"):
        standard = MACROS.get(text.lower())
        if standard is None:
            raise ValueError(f"unknown macro; use one of {' '.join(MACROS)}")
        text = standard
    fields = _FIELDS.findall(text)
    if len(fields) != 5:
        raise ValueError(f"{_CRON_SHAPE}; seconds and year fields are not supported")
    for part in ",".join(fields).split(","):
        if _HASH_OR_RANDOM.match(part):
            raise ValueError("hashed (H) and random (R) values are not supported")
    index = 0
    try:
        minutes = _plain_field(fields[_MINUTE], _MINUTE)
        index = _HOUR
        hours = _plain_field(fields[_HOUR], _HOUR)
        index = _DOM
        day_of_month = _day_of_month(fields[_DOM])
        index = _MONTH
        months = _plain_field(fields[_MONTH], _MONTH)
        index = _DOW
        day_of_week = _day_of_week(fields[_DOW])
    except ValueError as exc:
        raise ValueError(
            f"not a valid cron expression ({_FIELD_NAMES[index]} {fields[index]!r}: {exc})"
        ) from None
    days = tuple(
        _matching_days(day_of_month, day_of_week, length, first)
        for length in range(28, 32)
        for first in range(7)
    )
    # Every (length, first weekday) pair of every month happens, so this is exact: 0 0 30 2 *
    # never runs, 0 0 30 2 1 runs on Mondays in February.
    if not any(
        days[(length - 28) * 7 + first]
        for month in months
        for length in ((28, 29) if month == 2 else (calendar.monthrange(2001, month)[1],))
        for first in range(7)
    ):
        raise ValueError(
            "not a valid cron expression (its days never occur in its months, like 30 February)"
        )
    return _CronSpec(
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        months=tuple(month in months for month in range(13)),
        days=days,
        wildcard=fields[_MINUTE].startswith("*") or fields[_HOUR].startswith("*"),
    )


def _plain_field(text: str, index: int) -> set[int]:
    """The values of a comma-separated list of `a`, `a-b`, `*`, each with an optional `/n`."""
    values: set[int] = set()
    for item in text.split(","):
        values.update(_item_values(item, index))
    return values


def _item_values(item: str, index: int) -> range:
    match = _ITEM.fullmatch(item)
    if match is None:
        raise ValueError(f"{item!r} is not a value, a range or a step")
    low_text, high_text, step_text = match["low"], match["high"], match["step"]
    if low_text == "*":
        if high_text is not None:
            raise ValueError("a range cannot start with *")
        low, high = _BOUNDS[index][0], _ENDS[index]
    else:
        low = _value(low_text, index)
        if high_text is not None:
            high = _value(high_text, index, range_end=True)
            if low > high:
                hint = "Sunday is also 7, as in fri-7" if index == _DOW else "as in 22-23,0-2"
                raise ValueError(
                    f"the range {item} starts above its end; write a range that wraps around "
                    f"as two ({hint})"
                )
        elif step_text is not None:
            high = max(low, _ENDS[index])  # `a/n`: from a to the field's end
        else:
            high = low
    step = 1 if step_text is None else int(step_text)
    if step == 0:
        raise ValueError("a step must be at least 1")
    return range(low, high + 1, step)


def _value(text: str, index: int, *, range_end: bool = False) -> int:
    if text.isdigit():
        number = int(text)
    elif index in _NAMES and text.lower() in _NAMES[index]:
        return _NAMES[index][text.lower()]
    elif range_end and index == _DOM and text.lower() == "l":
        return 31  # `a-L`: to the last day of the month
    else:
        raise ValueError(f"{text!r} is not a number" + (" or a name" if index in _NAMES else ""))
    low, high = _BOUNDS[index]
    if not low <= number <= high:
        raise ValueError(f"{text} is out of range {low}-{high}")
    return number


def _day_of_month(text: str) -> _DayOfMonth:
    if text == "?":
        return _DayOfMonth(star=True, days=frozenset(range(1, 32)), last=False, nearest=None)
    items = text.split(",")
    days: set[int] = set()
    last = False
    nearest = None
    for item in items:
        if item.lower() == "l":
            last = True
            continue
        match = _NEAREST_WEEKDAY.fullmatch(item)
        if match is not None:
            if len(items) > 1:
                raise ValueError("W must be the only value of the field")
            nearest = _value(match["day"] or match["day_after"], _DOM)
            continue
        days.update(_item_values(item, _DOM))
    return _DayOfMonth(text.startswith("*"), frozenset(days), last, nearest)


def _day_of_week(text: str) -> _DayOfWeek:
    if text == "?":
        return _DayOfWeek(True, frozenset(range(7)), frozenset(), frozenset())
    weekdays: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for item in text.split(","):
        match = _NTH_WEEKDAY.fullmatch(item)
        if match is not None:
            number = int(match["nth"])
            if not 1 <= number <= 5:
                raise ValueError(f"#{match['nth']}: a month has a 1st to a 5th weekday, no other")
            low = _value(match["low"], _DOW)
            high = low if match["high"] is None else _value(match["high"], _DOW)
            if low > high:
                raise ValueError(f"the range {match['low']}-{match['high']} starts above its end")
            nth.update((weekday % 7, number) for weekday in range(low, high + 1))
            continue
        match = _LAST_WEEKDAY.fullmatch(item)
        if match is not None:
            last.add(_value(match["day"] or match["day_before"], _DOW) % 7)
            continue
        weekdays.update(weekday % 7 for weekday in _item_values(item, _DOW))
    return _DayOfWeek(text.startswith("*"), frozenset(weekdays), frozenset(nth), frozenset(last))


def _matching_days(
    day_of_month: _DayOfMonth, day_of_week: _DayOfWeek, length: int, first: int
) -> tuple[int, ...]:
    """The days of a month of `length` days whose 1st is weekday `first` that match.

    Vixie cron's rule: when either day field starts with `*`, a day must match both fields;
    otherwise it must match either one.
    """
    nearest = day_of_month.nearest
    if nearest is not None:
        nearest = _nearest_weekday(nearest, length, first) if nearest <= length else None
    both = day_of_month.star or day_of_week.star
    found = []
    for day in range(1, length + 1):
        weekday = (first + day - 1) % 7
        by_month = (
            day in day_of_month.days or (day_of_month.last and day == length) or day == nearest
        )
        by_week = (
            weekday in day_of_week.weekdays
            or (weekday, (day + 6) // 7) in day_of_week.nth
            or (weekday in day_of_week.last and day + 7 > length)
        )
        if (by_month and by_week) if both else (by_month or by_week):
            found.append(day)
    return tuple(found)


def _nearest_weekday(day: int, length: int, first: int) -> int:
    """`nW`: day itself on Monday to Friday; the Friday before a Saturday (the Monday after, if
    the Saturday is the 1st); the Monday after a Sunday (the Friday before, if it is the last
    day). Never outside the month."""
    weekday = (first + day - 1) % 7
    if weekday == 6:
        return day - 1 if day > 1 else day + 2
    if weekday == 0:
        return day + 1 if day < length else day - 2
    return day


# --- matching ------------------------------------------------------------------------------------


def _next_wall(spec: _CronSpec, after: datetime) -> datetime | None:
    """The first naive wall time strictly after `after` that the expression matches; None when
    there is none up to the end of year 9999.

    Skips non-matching months at once and finds days, hours and minutes by bisection: a rare
    expression (29 February on a Sunday) costs one step per month it skips.
    """
    if after >= _LAST_WALL:
        return None
    start = after.replace(second=0, microsecond=0) + _MINUTE_STEP
    year, month, day, hour, minute = start.year, start.month, start.day, start.hour, start.minute
    while year <= 9999:
        if spec.months[month]:
            days = spec.month_days(year, month)
            position = bisect_left(days, day)
            if position < len(days) and days[position] == day:
                time_of_day = _first_time_of_day(spec, hour, minute)
                if time_of_day is not None:
                    return datetime(year, month, day, *time_of_day)
                position += 1
            if position < len(days):
                return datetime(year, month, days[position], spec.hours[0], spec.minutes[0])
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        day, hour, minute = 1, 0, 0
    return None


def _walls(spec: _CronSpec, after: datetime) -> Iterator[datetime]:
    """The matching wall times after `after`, in order, up to the end of year 9999."""
    wall = _next_wall(spec, after)
    while wall is not None:
        yield wall
        wall = _next_wall(spec, wall)


def _first_time_of_day(spec: _CronSpec, hour: int, minute: int) -> tuple[int, int] | None:
    """The first (hour, minute) of the expression at or after hour:minute on the same day."""
    position = bisect_left(spec.hours, hour)
    if position < len(spec.hours) and spec.hours[position] == hour:
        at = bisect_left(spec.minutes, minute)
        if at < len(spec.minutes):
            return hour, spec.minutes[at]
        position += 1
    if position < len(spec.hours):
        return spec.hours[position], spec.minutes[0]
    return None


def _first_cron_instant_after(
    spec: _CronSpec, zone: ZoneInfo, threshold: datetime
) -> datetime | None:
    """The smallest instant > threshold at which the cron job runs under the DST policy.

    Walks candidate wall times in wall-clock order (`_next_wall` on naive datetimes) and maps
    each to its real instants. Around a fall-back transition, wall order is not real-time order,
    so it keeps the minimum and stops only once no later wall time can map below it.
    Internally all instants are naive UTC.
    """
    after = threshold.astimezone(UTC).replace(tzinfo=None)
    # A wall time whose instant is > after is at least after + (the lowest offset soon after).
    lowest = min(_offset(zone, after), _offset(zone, _shifted(after, _SHIFT_WINDOW)))
    start = _shifted(after, lowest).replace(second=0, microsecond=0) - _MINUTE_STEP
    best: datetime | None = None
    highest = timedelta(0)
    for wall in _walls(spec, start):
        # Any instant of `wall` is >= wall - highest offset around `best`.
        if best is not None and _shifted(wall, -highest) >= best:
            break
        for instant in _instants(zone, wall, spec.wildcard):
            if instant > after and (best is None or instant < best):
                best = instant
                highest = max(_offset(zone, best), _offset(zone, _shifted(best, -_SHIFT_WINDOW)))
    return None if best is None else best.replace(tzinfo=UTC)


def _shifted(instant: datetime, delta: timedelta) -> datetime:
    """`instant + delta`, held at the calendar's ends: windows reach past the end of 9999."""
    try:
        return instant + delta
    except OverflowError:
        return datetime.max if delta > timedelta(0) else datetime.min


def _instants(zone: ZoneInfo, wall: datetime, wildcard: bool) -> tuple[datetime, ...]:
    """The naive-UTC instants at which a job due at local `wall` runs (none after 9999)."""
    try:
        return _wall_instants(zone, wall, wildcard)
    except OverflowError:
        return ()


def _wall_instants(zone: ZoneInfo, wall: datetime, wildcard: bool) -> tuple[datetime, ...]:
    first_offset = wall.replace(tzinfo=zone).utcoffset()
    second_offset = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert first_offset is not None
    assert second_offset is not None
    if first_offset == second_offset:
        return (wall - first_offset,)
    fold0 = wall - first_offset
    early, late = sorted((fold0, wall - second_offset))
    if _offset(zone, fold0) == first_offset:
        # Repeated wall time (fall back): wildcard jobs run at both, fixed-time at the first.
        return (early, late) if wildcard else (early,)
    # Nonexistent wall time (spring forward): wildcard jobs skip it, fixed-time jobs run at
    # the first valid instant after the gap.
    return () if wildcard else (_transition(zone, early, late),)


def _transition(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first naive-UTC instant in (before, after] whose offset differs from before's."""
    low = (before - _NAIVE_EPOCH) // timedelta(seconds=1)
    high = -((_NAIVE_EPOCH - after) // timedelta(seconds=1))
    initial = _offset(zone, _NAIVE_EPOCH + timedelta(seconds=low))
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(zone, _NAIVE_EPOCH + timedelta(seconds=middle)) == initial:
            low = middle
        else:
            high = middle
    return _NAIVE_EPOCH + timedelta(seconds=high)


def _offset(zone: ZoneInfo, naive_utc: datetime) -> timedelta:
    try:
        offset = zone.fromutc(naive_utc.replace(tzinfo=zone)).utcoffset()
    except OverflowError:
        # The local time is past the end of 9999 (or before year 1): the offset a day inside.
        inside = _DAY if naive_utc.year == 1 else -_DAY
        offset = zone.fromutc((naive_utc + inside).replace(tzinfo=zone)).utcoffset()
    assert offset is not None
    return offset
