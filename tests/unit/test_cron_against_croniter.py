"""Cron occurrences compared with croniter, on standard 5-field expressions in UTC.

duetime matches cron expressions with a matcher of its own (`duetime.domain.cron`) under
Vixie/Debian cron's rules. croniter (7.0) is the outside world's most used Python
implementation, and shares no code with it: an answer the two agree on is one neither got
wrong alone. The property draws an expression from the
grammar every cron shares (per field a comma-separated list of `*`, `a`, `a-b` with a < b,
each optionally with `/n`, and `a/n`; month and weekday names in any case; leading zeros;
`7` for Sunday) and a start instant in 2020-2035, minute-aligned or not, and checks that the
next five occurrences from `next_occurrence` (what the sweeper, `next_run_at` and
`POST /schedules/preview` call) are croniter's `get_next`. An expression duetime refuses as
never occurring (`0 0 30 2 *`) must be one croniter finds no date for.

croniter is called with `implement_cron_bug=True`, its switch for Vixie's day rule: when the
day-of-month or the day-of-week field starts with `*` (DOM_STAR/DOW_STAR), a day must match
both fields, otherwise either one. Without it croniter ORs `*/2` with a restricted weekday.
croniter still departs from Vixie in three ways, which the property works around and the
tests at the end pin down (each asserts duetime's Vixie answer next to croniter's):

- an equal range `a-a` is the single value `a` in Vixie; croniter widens it to the whole field
  ("Jan-Jan" is the whole year, by design). The property draws ranges with a < b only;
- croniter decides "star" on its expansion, not on the first character: a day field with a `*`
  item after the first (`15,*`), or one covering its whole range (`0-6`) while the other
  field's text holds a `*` anywhere (`1,*/10`), counts as `*`, so it ANDs the day fields where
  Vixie ORs them. For exactly these pairs (`croniter_sees_a_star`) the property asks croniter
  for each day field alone (the other `*`) and merges the two: Vixie's OR, spelled so that
  croniter cannot misread it;
- `7/n` in day of week: croniter turns 7 into 0 before it steps, so `7/2` is Sunday, Tuesday,
  Thursday, Saturday; from Sunday (7) to the field's end is Sunday alone. The property draws
  `a/n` in day of week with a from 0 to 6.

Out of scope, as not common to both: croniter's `L`, `W`, `#`, `?`, `H`, `R` and its seconds
and year fields (duetime's own extensions are checked in test_cron_reference.py), ranges that
wrap around (`5-2`: duetime refuses them as Vixie does, croniter wraps; pinned below), and time
zones and daylight saving (test_cron_reference.py and test_dst_vectors.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from croniter import CroniterBadDateError, croniter
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from duetime.domain.errors import ValidationError
from duetime.domain.schedule import next_occurrence, parse_schedule

CREATED = datetime(2000, 1, 1, tzinfo=UTC)  # created_at: long before every start drawn
COUNT = 5
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def duetime_runs(expression: str, after: datetime, count: int = COUNT) -> list[datetime]:
    """The next `count` occurrences after `after`, as the sweeper lists them."""
    schedule = parse_schedule({"cron": expression})
    runs: list[datetime] = []
    for _ in range(count):
        found = next_occurrence(schedule, created_at=CREATED, after=after)
        if found is None:
            break
        runs.append(found)
        after = found
    return runs


def refusal(expression: str) -> str | None:
    """Why duetime refuses the expression; None when it accepts it."""
    try:
        parse_schedule({"cron": expression})
    except ValidationError as error:
        return error.message
    return None


def croniter_runs(
    expression: str, after: datetime, count: int = COUNT, *, vixie_day_rule: bool = True
) -> list[datetime]:
    """croniter's next `count` occurrences strictly after `after`."""
    found = croniter(expression, after, datetime, implement_cron_bug=vixie_day_rule)
    return [found.get_next() for _ in range(count)]


# --- the expressions: text and the values it stands for, drawn together --------------------------


@dataclass(frozen=True)
class Rule:
    """A field: values `low`-`high` may be written, `*` and `a/n` run from `low` to `end`."""

    low: int
    high: int
    end: int
    names: tuple[str, ...] = ()
    first_name: int = 0  # the value of names[0]


MINUTE = Rule(0, 59, 59)
HOUR = Rule(0, 23, 23)
DAY_OF_MONTH = Rule(1, 31, 31)
MONTH = Rule(1, 12, 12, MONTH_NAMES, 1)
DAY_OF_WEEK = Rule(0, 7, 6, DAY_NAMES, 0)  # 7 is Sunday; `*` and `a/n` stop at Saturday
LATE_DAYS = Rule(28, 31, 31)  # days of month 28-31, written without `*`
EVERY_DAY = frozenset(range(1, 32))
EVERY_WEEKDAY = frozenset(range(7))


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]  # day of week: 0-6, Sunday 0


@dataclass(frozen=True)
class Expression:
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    @property
    def text(self) -> str:
        return " ".join(f.text for f in (self.minute, self.hour, self.dom, self.month, self.dow))

    @classmethod
    def of(cls, text: str) -> Expression:
        """An explicit example: its text alone. Its values stay empty (only the strategies
        draw them), so its day fields must not be ones croniter misreads."""
        minute, hour, dom, month, dow = (Field(part, frozenset()) for part in text.split())
        return cls(minute, hour, dom, month, dow)


def croniter_sees_a_star(expression: Expression) -> bool:
    """Where croniter ANDs the day fields and Vixie ORs them (see the module docstring).

    Vixie ANDs when either field's text starts with `*`. croniter also ANDs when its expansion
    of a field starts with `*`: the field has a bare `*` item anywhere, or lists every value
    while the other field's text contains a `*`."""
    dom, dow = expression.dom, expression.dow
    if dom.text.startswith("*") or dow.text.startswith("*"):
        return False  # both AND

    def starred(field: Field, every: frozenset[int], other: Field) -> bool:
        return "*" in field.text.split(",") or (field.values == every and "*" in other.text)

    return starred(dom, EVERY_DAY, dow) or starred(dow, EVERY_WEEKDAY, dom)


@st.composite
def numbers(draw: st.DrawFn, rule: Rule, value: int) -> str:
    """`value` as written: plain, with a leading zero, or as a name in any case."""
    index = value - rule.first_name
    if rule.names and 0 <= index < len(rule.names) and draw(st.booleans()):
        name = rule.names[index]
        return draw(st.sampled_from([name, name.upper(), name.capitalize()]))
    return draw(st.sampled_from([str(value), f"{value:02d}"]))


@st.composite
def items(draw: st.DrawFn, rule: Rule, *, stars: bool = True) -> tuple[str, range]:
    """One list item and the values it stands for (computed from the numbers, not parsed).

    Without `stars`, no `*` or `*/n`: for a rule narrower than its field."""
    kinds = ["a", "a", "a-b", "a-b/n", "a/n"]
    kind = draw(st.sampled_from(["*", "*/n", *kinds] if stars else kinds))
    step = draw(st.integers(1, rule.end - rule.low + 1))
    if kind == "*":
        return "*", range(rule.low, rule.end + 1)
    if kind == "*/n":
        return f"*/{step}", range(rule.low, rule.end + 1, step)
    if kind == "a":
        value = draw(st.integers(rule.low, rule.high))
        return draw(numbers(rule, value)), range(value, value + 1)
    if kind == "a/n":  # up to `end`: never `7/n` in day of week
        start = draw(st.integers(rule.low, rule.end))
        return f"{draw(numbers(rule, start))}/{step}", range(start, rule.end + 1, step)
    low = draw(st.integers(rule.low, rule.high - 1))
    high = draw(st.integers(low + 1, rule.high))  # a < b: croniter widens `a-a`
    text = f"{draw(numbers(rule, low))}-{draw(numbers(rule, high))}"
    if kind == "a-b":
        return text, range(low, high + 1)
    return f"{text}/{step}", range(low, high + 1, step)


@st.composite
def fields(draw: st.DrawFn, rule: Rule, *, weekday: bool = False, stars: bool = True) -> Field:
    drawn = draw(st.lists(items(rule, stars=stars), min_size=1, max_size=3))
    values = frozenset(value % 7 if weekday else value for _, span in drawn for value in span)
    return Field(",".join(text for text, _ in drawn), values)


@st.composite
def short_months(draw: st.DrawFn) -> Field:
    """A month without a 31st, February (no 30th) most often."""
    month = draw(st.sampled_from([2, 2, 4, 6, 9, 11]))
    return Field(draw(numbers(MONTH, month)), frozenset({month}))


@st.composite
def expressions(draw: st.DrawFn) -> Expression:
    """Day of month is often `*` alone, so that day of week decides, and often among the last
    days of a month, to meet short months (and, with February, days that never occur)."""
    return Expression(
        minute=draw(fields(MINUTE)),
        hour=draw(fields(HOUR)),
        dom=draw(
            st.just(Field("*", EVERY_DAY)) | fields(DAY_OF_MONTH) | fields(LATE_DAYS, stars=False)
        ),
        month=draw(fields(MONTH) | short_months()),
        dow=draw(fields(DAY_OF_WEEK, weekday=True)),
    )


@st.composite
def starts(draw: st.DrawFn) -> datetime:
    """An instant in 2020-2035: on a minute (so often on an occurrence) or anywhere in it."""
    instant = draw(
        st.datetimes(
            min_value=datetime(2020, 1, 1),
            max_value=datetime(2035, 12, 31, 23, 59, 59, 999_999),
            timezones=st.just(UTC),
        )
    )
    if draw(st.booleans()):
        instant = instant.replace(second=0, microsecond=0)
    return instant


# --- the property --------------------------------------------------------------------------------


def croniter_either_day(expression: Expression, after: datetime) -> list[datetime]:
    """croniter's runs of Vixie's OR: those of day of month alone merged with those of day of
    week alone (either can have none: the 31st in February)."""
    time = f"{expression.minute.text} {expression.hour.text}"
    month = expression.month.text
    merged: set[datetime] = set()
    for days in (f"{expression.dom.text} {month} *", f"* {month} {expression.dow.text}"):
        with contextlib.suppress(CroniterBadDateError):
            merged.update(croniter_runs(f"{time} {days}", after))
    return sorted(merged)[:COUNT]


def day_rule(expression: Expression) -> str:
    if expression.dom.text == "*" or expression.dow.text == "*":
        return "one day field is `*`"
    if expression.dom.text.startswith("*") or expression.dow.text.startswith("*"):
        return "both day fields restricted, one starting with `*`: both must match"
    if croniter_sees_a_star(expression):
        return "both day fields restricted: either matches (croniter asked for each alone)"
    return "both day fields restricted: either matches"


@settings(
    max_examples=500,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(expression=expressions(), start=starts())
@example(expression=Expression.of("0 0 30,31 FEB *"), start=utc(2026, 1, 1))
@example(expression=Expression.of("0 12 29 2 */7"), start=utc(2032, 2, 29, 12))
@example(expression=Expression.of("59 23 31 dec,2 *"), start=utc(2035, 12, 31, 23, 59))
def test_the_next_five_occurrences_are_croniters(expression: Expression, start: datetime) -> None:
    text = expression.text
    message = refusal(text)
    if message is not None:
        # The only refusal in this grammar: days that never occur in the months (30 February).
        event("refused: its days never occur")
        assert "never occur" in message, (text, message)
        with pytest.raises(CroniterBadDateError):
            croniter_runs(text, start, 1)
        return
    event(day_rule(expression))
    if croniter_sees_a_star(expression):
        expected = croniter_either_day(expression, start)
    else:
        expected = croniter_runs(text, start)
    assert duetime_runs(text, start) == expected, text


# --- examples: leap years, month lengths and the day rule ----------------------------------------


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # 29 February: only in leap years, and 2100 is not one.
        ("0 0 29 2 *", utc(2026, 1, 1), [utc(2028, 2, 29), utc(2032, 2, 29), utc(2036, 2, 29)]),
        ("0 0 29 2 *", utc(2096, 3, 1), [utc(2104, 2, 29), utc(2108, 2, 29)]),
        ("0 0 29 feb *", utc(2028, 2, 29), [utc(2032, 2, 29)]),  # strictly after
        # The 31st: only in the months that have one.
        (
            "0 0 31 * *",
            utc(2026, 1, 31),
            [utc(2026, 3, 31), utc(2026, 5, 31), utc(2026, 7, 31), utc(2026, 8, 31)],
        ),
        ("59 23 31 12 *", utc(2026, 12, 31, 23, 59), [utc(2027, 12, 31, 23, 59)]),
        # Both day fields restricted: the 1st, the 15th (Saturday 15 August) and every weekday.
        (
            "0 12 1,15 * 1-5",
            utc(2026, 8, 14, 13),
            [utc(2026, 8, 15, 12), utc(2026, 8, 17, 12), utc(2026, 8, 18, 12)],
        ),
        # Friday the 13th is not the rule: the 13th and every Friday.
        ("0 0 13 * 5", utc(2026, 2, 1), [utc(2026, 2, 6), utc(2026, 2, 13), utc(2026, 2, 20)]),
        # February's Mondays, and 29 February 2028, a Tuesday.
        (
            "0 12 29 2 1",
            utc(2028, 2, 20),
            [utc(2028, 2, 21, 12), utc(2028, 2, 28, 12), utc(2028, 2, 29, 12), utc(2029, 2, 5, 12)],
        ),
        # A day field starting with `*`: both fields. Mondays on an odd day of the month.
        (
            "0 0 */2 * 1",
            utc(2026, 7, 1),
            [utc(2026, 7, 13), utc(2026, 7, 27), utc(2026, 8, 3), utc(2026, 8, 17)],
        ),
        ("0 0 *,15 * mon", utc(2026, 7, 1), [utc(2026, 7, 6), utc(2026, 7, 13)]),  # Mondays
        # The same days written without `*`: either field, every odd day and every Monday.
        (
            "0 0 1-31/2 * 1",
            utc(2026, 6, 30, 12),
            [utc(2026, 7, 1), utc(2026, 7, 3), utc(2026, 7, 5), utc(2026, 7, 6)],
        ),
        # 29 February on a Sunday (`*/7` is Sunday and starts with `*`): 28 years apart.
        ("0 12 29 2 */7", utc(2026, 1, 1), [utc(2032, 2, 29, 12), utc(2060, 2, 29, 12)]),
        # 7 is Sunday, like 0.
        ("0 0 * * 7", utc(2026, 5, 1), [utc(2026, 5, 3), utc(2026, 5, 10), utc(2026, 5, 17)]),
        ("0 0 * * 5-7", utc(2026, 5, 1), [utc(2026, 5, 2), utc(2026, 5, 3), utc(2026, 5, 8)]),
        # Every quarter of an hour in office hours, Monday to Friday: Friday evening to Monday.
        (
            "*/15 9-17 * * mon-fri",
            utc(2026, 5, 1, 17, 40),
            [utc(2026, 5, 1, 17, 45), utc(2026, 5, 4, 9), utc(2026, 5, 4, 9, 15)],
        ),
        # Every third month from January; `a/n` runs to the field's end.
        (
            "0 0 1 */3 *",
            utc(2026, 2, 15),
            [utc(2026, 4, 1), utc(2026, 7, 1), utc(2026, 10, 1), utc(2027, 1, 1)],
        ),
        ("5/20 0 1 1 *", utc(2026, 1, 1), [utc(2026, 1, 1, 0, 5), utc(2026, 1, 1, 0, 25)]),
        ("0 0 1 dec/3 *", utc(2026, 1, 1), [utc(2026, 12, 1), utc(2027, 12, 1)]),
    ],
)
def test_interesting_days_are_the_same_for_croniter_and_by_hand(
    expression: str, after: datetime, expected: list[datetime]
) -> None:
    assert duetime_runs(expression, after, len(expected)) == expected
    assert croniter_runs(expression, after, len(expected)) == expected


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 feb *"])
def test_days_that_never_occur_are_refused_where_croniter_finds_no_date(expression: str) -> None:
    with pytest.raises(ValidationError, match="never occur"):
        parse_schedule({"cron": expression})
    with pytest.raises(CroniterBadDateError):
        croniter_runs(expression, utc(2026, 1, 1), 1)


# --- where croniter departs from Vixie: left out of the property, pinned here --------------------


def test_croniter_applies_the_vixie_day_rule_only_when_asked() -> None:
    """By default croniter ORs `*/2` with Monday (its expansion is not `*`); Vixie ANDs it."""
    after = utc(2026, 7, 1)
    mondays_on_odd_days = [utc(2026, 7, 13), utc(2026, 7, 27)]
    assert duetime_runs("0 0 */2 * 1", after, 2) == mondays_on_odd_days
    assert croniter_runs("0 0 */2 * 1", after, 2) == mondays_on_odd_days
    odd_days_or_mondays = [utc(2026, 7, 3), utc(2026, 7, 5), utc(2026, 7, 6)]
    assert croniter_runs("0 0 */2 * 1", after, 3, vixie_day_rule=False) == odd_days_or_mondays


@pytest.mark.parametrize(
    ("expression", "vixie", "croniter_reading"),
    [
        # Minute 5 of each hour; croniter: every minute.
        ("5-5 * * * *", [utc(2026, 5, 1, 11, 5)], [utc(2026, 5, 1, 10, 31)]),
        # Sunday; croniter: every day.
        ("0 0 * * 7-7", [utc(2026, 5, 3)], [utc(2026, 5, 2)]),
        ("0 0 * * sun-sun", [utc(2026, 5, 3)], [utc(2026, 5, 2)]),
    ],
)
def test_croniter_widens_an_equal_range_to_the_whole_field(
    expression: str, vixie: list[datetime], croniter_reading: list[datetime]
) -> None:
    after = utc(2026, 5, 1, 10, 30)
    assert duetime_runs(expression, after, 1) == vixie
    assert croniter_runs(expression, after, 1) == croniter_reading


@pytest.mark.parametrize(
    ("expression", "vixie", "croniter_reading"),
    [
        # Neither field starts with `*`: either one, and `15,*` is every day. croniter sees a
        # star in `15,*` and ANDs: Fridays only.
        ("0 0 15,* * 5", [utc(2026, 7, 2), utc(2026, 7, 3)], [utc(2026, 7, 3), utc(2026, 7, 10)]),
        # `0-6` is every day, so either field is every day. croniter replaces `0-6` by `*`
        # because the other field's text holds a `*`, and ANDs: the 1st, 11th, 21st, 31st.
        (
            "0 0 1,*/10 * 0-6",
            [utc(2026, 7, 2), utc(2026, 7, 3)],
            [utc(2026, 7, 11), utc(2026, 7, 21)],
        ),
    ],
)
def test_croniter_reads_a_star_where_vixie_reads_only_the_first_character(
    expression: str, vixie: list[datetime], croniter_reading: list[datetime]
) -> None:
    after = utc(2026, 7, 1)
    assert duetime_runs(expression, after, 2) == vixie
    assert croniter_runs(expression, after, 2) == croniter_reading


def test_croniter_reads_7_with_a_step_in_day_of_week_as_0() -> None:
    """`7/2`: from Sunday (7) to the field's end is Sunday alone; croniter steps from 0."""
    after = utc(2026, 5, 1)  # a Friday
    assert duetime_runs("0 0 * * 7/2", after, 2) == [utc(2026, 5, 3), utc(2026, 5, 10)]
    assert croniter_runs("0 0 * * 7/2", after, 2) == [utc(2026, 5, 2), utc(2026, 5, 3)]


def test_ranges_that_wrap_around_are_refused_where_croniter_wraps_them() -> None:
    with pytest.raises(ValidationError, match="starts above its end"):
        parse_schedule({"cron": "0 0 * * 5-2"})
    friday_to_tuesday = [utc(2026, 5, 1), utc(2026, 5, 2), utc(2026, 5, 3), utc(2026, 5, 4)]
    assert croniter_runs("0 0 * * 5-2", utc(2026, 4, 30), 4) == friday_to_tuesday
