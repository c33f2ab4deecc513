"""Cron occurrences checked against references that share no code with duetime's matcher.

duetime matches cron expressions on the wall clock with Vixie/Debian cron's rules: a day matches
when its month matches and, if the day-of-month or the day-of-week field *starts with* `*`
(Vixie's DOM_STAR/DOW_STAR), both day fields match; otherwise either one. Its extensions (`L`,
`nW`, `d#n`, `Ld`/`dL`) are restricted fields. On top of the wall clock sits the daylight-saving
policy of docs/schedules.md. Two references:

**cronsim** (2.8, an outside library; read its source): the same day rule (its `day_and` is
"either day field starts with *"), ranges, steps, names, `7` for Sunday, `L` in day of month,
`dL` and `d#n` in day of week, and it refuses a range whose start is above its end. It does not
take `nW` (only `LW`, which duetime does not), `?`, the `Ld` spelling or `a-b#n`; its `a/n` in
day of week runs to 7 (Sunday), where duetime's stops at Saturday; and it reads `a-a/n` as `a/n`
where Vixie and duetime read the single value `a`. The strategies leave those out when drawing
for cronsim. Its daylight-saving handling
is not duetime's policy: for a fixed-time job it walks naive wall times, so from an instant in
the second pass of a repeated hour it answers the first pass (an instant *before* the one asked
about), and for a wildcard job it ticks through real time with `replace()` on aware datetimes.
So cronsim is compared everywhere in UTC and in zones without daylight saving in 2020-2030
(Asia/Kolkata, Asia/Kathmandu), and in the other zones only between transitions: from at least
3 hours after one, up to the next.

**A simulation of our own** (`Reference` below): the strategies draw each field as its text
*and* the set of values it stands for, computed from the drawn numbers, not by parsing the text;
`Reference.matches` is Vixie's test from cron.c on those sets. Next wall times come from a walk
day by day; the daylight-saving policy from a walk minute by minute through real time, reading
the policy as docs/schedules.md states it (a wildcard job runs at every real minute whose wall
time matches; a fixed-time job at the first pass of a matching wall time, and once at the end of
a gap that swallowed one). This covers what cronsim cannot: `nW`, `?`, `Ld`, `a-b#n`, `a/n` in
day of week, and every instant near a transition.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from duetime.domain.errors import ValidationError
from duetime.domain.schedule import Cron, next_occurrence, parse_schedule

CREATED = datetime(2000, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",  # +5:30
    "Asia/Kathmandu",  # +5:45
    "Australia/Lord_Howe",  # +10:30, a 30-minute daylight-saving shift
    "Australia/Adelaide",  # +9:30 / +10:30
)
DST_ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Australia/Adelaide")
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def examples(count: int) -> settings:
    return settings(max_examples=count, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def duetime_runs(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    cron = Cron(expression, zone)
    runs: list[datetime] = []
    for _ in range(count):
        found = next_occurrence(cron, created_at=CREATED, after=after)
        if found is None:
            break
        runs.append(found)
        after = found
    return runs


# --- the expressions: text and meaning, drawn together -------------------------------------------


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int] = frozenset()
    last_day: bool = False  # `L` in day of month
    nearest: int | None = None  # `nW`
    nth: frozenset[tuple[int, int]] = frozenset()  # `d#n`, weekday 0-6
    last_weekday: frozenset[int] = frozenset()  # `dL` / `Ld`, weekday 0-6

    @property
    def star(self) -> bool:
        return self.text.startswith("*") or self.text == "?"


@dataclass(frozen=True)
class Reference:
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    @property
    def text(self) -> str:
        return " ".join(f.text for f in (self.minute, self.hour, self.dom, self.month, self.dow))

    @property
    def fixed_time(self) -> bool:
        return not self.minute.text.startswith("*") and not self.hour.text.startswith("*")

    def day_matches(self, day: date) -> bool:
        """cron.c: month and ((DOM_STAR || DOW_STAR) ? dom && dow : dom || dow)."""
        if day.month not in self.month.values:
            return False
        length = calendar.monthrange(day.year, day.month)[1]
        weekday = day.isoweekday() % 7
        by_month = (
            day.day in self.dom.values
            or (self.dom.last_day and day.day == length)
            or (self.dom.nearest is not None and day.day == nearest_weekday(day, self.dom.nearest))
        )
        by_week = (
            weekday in self.dow.values
            or (weekday, (day.day - 1) // 7 + 1) in self.dow.nth
            or (weekday in self.dow.last_weekday and day.day + 7 > length)
        )
        if self.dom.star or self.dow.star:
            return by_month and by_week
        return by_month or by_week

    def matches(self, wall: datetime) -> bool:
        return (
            wall.minute in self.minute.values
            and wall.hour in self.hour.values
            and self.day_matches(wall.date())
        )

    def times_of_day(self) -> list[time]:
        return [time(h, m) for h in sorted(self.hour.values) for m in sorted(self.minute.values)]


def nearest_weekday(day: date, target: int) -> int | None:
    """`nW`: the Monday-to-Friday day of the month closest to the target day; None when the
    month has no such day. (Written as a minimum over the month, not as the rule's cases.)"""
    length = calendar.monthrange(day.year, day.month)[1]
    if target > length:
        return None
    weekdays = [d for d in range(1, length + 1) if day.replace(day=d).weekday() < 5]
    return min(weekdays, key=lambda d: abs(d - target))


def _number(value: int, names: tuple[str, ...] | None, first: int) -> st.SearchStrategy[str]:
    plain = st.sampled_from([str(value), f"{value:02d}"])
    if names is None or not 0 <= value - first < len(names):
        return plain
    name = names[value - first]
    return plain | st.sampled_from([name, name.upper(), name.capitalize()])


@st.composite
def plain_item(
    draw: st.DrawFn,
    low: int,
    high: int,
    end: int,
    names: tuple[str, ...] | None = None,
    *,
    extensions: bool,
) -> tuple[str, set[int]]:
    """One list item of a field whose values are low-high; `*` and `a/n` run to `end`.

    Without `extensions`, only what cronsim reads as duetime does: no `a/n` in day of week
    (cronsim runs it to 7), no `a-a/n` (cronsim reads it as `a/n`; it is `a`).
    """
    kinds = ["star", "star_step", "value", "value", "range", "range_step"]
    start_step = extensions or names is not DAY_NAMES
    kind = draw(st.sampled_from([*kinds, "start_step"] if start_step else kinds))
    a, b = sorted(draw(st.lists(st.integers(low, high), min_size=2, max_size=2)))
    step = draw(st.integers(1, max(2, (end - low) // 2 + 2)))
    if kind == "range_step" and a == b and not extensions:
        kind = "value"

    def number(value: int) -> str:
        return draw(_number(value, names, low))

    if kind == "star":
        return "*", set(range(low, end + 1))
    if kind == "star_step":
        return f"*/{step}", set(range(low, end + 1, step))
    if kind == "value":
        return number(a), {a}
    if kind == "range":
        return f"{number(a)}-{number(b)}", set(range(a, b + 1))
    if kind == "range_step":
        return f"{number(a)}-{number(b)}/{step}", set(range(a, b + 1, step))
    return f"{number(a)}/{step}", set(range(a, max(a, end) + 1, step))


@st.composite
def plain_field(
    draw: st.DrawFn,
    low: int,
    high: int,
    end: int,
    names: tuple[str, ...] | None = None,
    *,
    extensions: bool,
) -> Field:
    item = plain_item(low, high, end, names, extensions=extensions)
    items = draw(st.lists(item, min_size=1, max_size=3))
    return Field(",".join(t for t, _ in items), frozenset().union(*(v for _, v in items)))


@st.composite
def day_of_month(draw: st.DrawFn, *, extensions: bool) -> Field:
    """`extensions`: also `nW` and `?`, which cronsim does not take."""
    choice = draw(st.integers(0, 9))
    if extensions and choice in (0, 1):
        # The edges most often: a Saturday 1st, a Sunday on the last day, a day some months lack.
        n = draw(st.sampled_from([1, 2, 28, 29, 30, 31]) | st.integers(1, 31))
        return Field(draw(st.sampled_from([f"{n}W", f"{n}w", f"W{n}"])), nearest=n)
    if extensions and choice == 2:
        return Field("?", frozenset(range(1, 32)))
    items = draw(st.lists(plain_item(1, 31, 31, extensions=extensions), min_size=1, max_size=3))
    last = choice in (3, 4)
    texts = [t for t, _ in items] + (["L"] if last else [])
    texts = draw(st.permutations(texts))
    return Field(",".join(texts), frozenset().union(*(v for _, v in items)), last_day=last)


@st.composite
def day_of_week(draw: st.DrawFn, *, extensions: bool) -> Field:
    """`extensions`: also `?`, `Ld`, names in `dL`, `a-b#n` and `a/n`, which cronsim does not
    take (or, for `a/n`, reads to Sunday)."""
    if extensions and draw(st.integers(0, 9)) == 0:
        return Field("?", frozenset(range(7)))
    texts: list[str] = []
    values: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["plain", "plain", "plain", "nth", "last"]))
        day = draw(st.integers(0, 7))
        if kind == "nth":
            n = draw(st.integers(1, 5))
            if extensions and draw(st.booleans()):
                high = draw(st.integers(day, 7))
                texts.append(f"{day}-{high}#{n}")
                nth.update((d % 7, n) for d in range(day, high + 1))
            else:
                texts.append(f"{draw(_number(day, DAY_NAMES, 0))}#{n}")
                nth.add((day % 7, n))
        elif kind == "last":
            if extensions:
                spelled = draw(_number(day, DAY_NAMES, 0))
                texts.append(draw(st.sampled_from([f"{spelled}L", f"L{spelled}", f"{day}l"])))
            else:
                texts.append(f"{day}L")
            last.add(day % 7)
        else:
            text, plain = draw(plain_item(0, 7, 6, DAY_NAMES, extensions=extensions))
            texts.append(text)
            values.update(v % 7 for v in plain)
    return Field(
        ",".join(texts), frozenset(values), nth=frozenset(nth), last_weekday=frozenset(last)
    )


NIGHT_HOURS = [
    Field(text, frozenset(values))
    for text, values in [
        ("1", {1}),
        ("2", {2}),
        ("3", {3}),
        ("1,2", {1, 2}),
        ("2,3", {2, 3}),
        ("0-3", {0, 1, 2, 3}),
        ("1-3/2", {1, 3}),
        ("*/2", set(range(0, 24, 2))),
    ]
]


@st.composite
def references(draw: st.DrawFn, *, extensions: bool = False, daily: bool = False) -> Reference:
    """`daily`: mostly `*` day fields and often hours around 01:00-03:00, where the clocks
    change, so that runs fall near a transition drawn nearby."""
    if daily and draw(st.integers(0, 3)) > 0:
        dom, dow = Field("*", frozenset(range(1, 32))), Field("*", frozenset(range(7)))
    else:
        dom = draw(day_of_month(extensions=extensions))
        dow = draw(day_of_week(extensions=extensions))
        if draw(st.integers(0, 3)) == 0:  # one day field `*` more often: the rule is AND
            dow = Field("*", frozenset(range(7)))
    if daily and draw(st.booleans()):
        hour = draw(st.sampled_from(NIGHT_HOURS))
    else:
        hour = draw(plain_field(0, 23, 23, extensions=extensions))
    return Reference(
        minute=draw(plain_field(0, 59, 59, extensions=extensions)),
        hour=hour,
        dom=dom,
        month=draw(plain_field(1, 12, 12, MONTH_NAMES, extensions=extensions)),
        dow=dow,
    )


def accepted(reference: Reference) -> bool:
    """Whether duetime takes the expression. The strategies draw only valid syntax, so the one
    reason to refuse is days that never occur (30 February)."""
    message = None
    try:
        parse_schedule({"cron": reference.text})
    except ValidationError as error:
        message = error.message
    assert message is None or "never occur" in message, message
    return message is None


# --- zones and instants --------------------------------------------------------------------------


@cache
def transitions(name: str) -> tuple[datetime, ...]:
    """UTC offset changes from 2019 to 2032, found by scanning the zone, to the second."""
    zone = ZoneInfo(name)
    found = []
    at, step = datetime(2019, 1, 1, tzinfo=UTC), timedelta(hours=6)
    while at < datetime(2032, 1, 1, tzinfo=UTC):
        if at.astimezone(zone).utcoffset() != (at + step).astimezone(zone).utcoffset():
            low, high = int(at.timestamp()), int((at + step).timestamp())
            initial = at.astimezone(zone).utcoffset()
            while high - low > 1:
                middle = (low + high) // 2
                if datetime.fromtimestamp(middle, zone).utcoffset() == initial:
                    low = middle
                else:
                    high = middle
            found.append(datetime.fromtimestamp(high, UTC))
        at += step
    return tuple(found)


def test_the_zones_have_the_transitions_they_are_chosen_for() -> None:
    assert transitions("UTC") == transitions("Asia/Kolkata") == transitions("Asia/Kathmandu") == ()
    for name in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Australia/Adelaide"):
        assert len(transitions(name)) == 26, name
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    shift = transitions("Australia/Lord_Howe")[0]
    offsets = {(shift + d).astimezone(lord_howe).utcoffset() for d in (-MINUTE, timedelta())}
    assert offsets == {timedelta(hours=10, minutes=30), timedelta(hours=11)}


def to_ms(instant: datetime) -> datetime:
    return instant.replace(microsecond=instant.microsecond // 1000 * 1000)


ANY_INSTANT = st.datetimes(datetime(2020, 1, 1), datetime(2030, 12, 31), timezones=st.just(UTC))


@st.composite
def near_transition(draw: st.DrawFn, name: str) -> datetime:
    """An instant within 4 hours of one of the zone's transitions, most often in the 3 hours
    before it (any instant if the zone has none)."""
    near = transitions(name)
    if not near:
        return to_ms(draw(ANY_INSTANT))
    base = draw(st.sampled_from(near))
    seconds = st.integers(-3 * 3600, 0) | st.integers(-4 * 3600, 4 * 3600)
    return to_ms(base + timedelta(seconds=draw(seconds), milliseconds=draw(st.integers(0, 999))))


# --- against cronsim -----------------------------------------------------------------------------


def cronsim_runs(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    runs = []
    # cronsim treats datetime.UTC as UTC, and ZoneInfo("UTC") as a zone with DST handling.
    tz = UTC if zone == "UTC" else ZoneInfo(zone)
    for found in CronSim(expression, after.astimezone(tz)):
        runs.append(found.astimezone(UTC))
        if len(runs) == count:
            break
    return runs


def cronsim_refuses(expression: str, after: datetime) -> bool:
    try:
        next(CronSim(expression, after))
    except (CronSimError, StopIteration):
        return True
    return False


@examples(150)
@given(references(), ANY_INSTANT)
@example(
    Reference(
        Field("0", frozenset({0})),
        Field("0", frozenset({0})),
        Field("30", frozenset({30})),
        Field("2", frozenset({2})),
        Field("*", frozenset(range(7))),
    ),
    datetime(2026, 1, 1, tzinfo=UTC),
)
def test_in_utc_runs_are_cronsims(reference: Reference, after: datetime) -> None:
    after = to_ms(after)
    if not accepted(reference):
        # duetime refuses the days that never occur; cronsim finds none in 50 years either.
        assert cronsim_refuses(reference.text, after), reference.text
        return
    expected = cronsim_runs(reference.text, "UTC", after, 6)
    assert duetime_runs(reference.text, "UTC", after, 6) == expected, reference.text


@examples(150)
@given(references(), st.sampled_from(ZONES[1:]), ANY_INSTANT)
def test_between_transitions_runs_are_cronsims(
    reference: Reference, zone: str, after: datetime
) -> None:
    """cronsim's daylight-saving handling is not duetime's policy: compare from 3 hours after a
    transition (or more) up to the next one."""
    after = to_ms(after)
    assume(accepted(reference))
    changes = transitions(zone)
    assume(not any(after - timedelta(hours=3) <= t <= after for t in changes))
    # Beyond the scanned years (and the last one): as if a transition were there.
    barrier = min((t for t in changes if t > after), default=datetime(2032, 1, 1, tzinfo=UTC))
    ours = [r for r in duetime_runs(reference.text, zone, after, 5) if r < barrier]
    theirs = [r for r in cronsim_runs(reference.text, zone, after, 5) if r < barrier]
    assert ours == theirs, reference.text


@pytest.mark.parametrize(
    "expression",
    [
        "0 9 15 * 1#1",  # audit 9: # next to a restricted day of month is OR
        "0 9 1 * 1#1",
        "0 9 L * 5L",
        "0 9 13 * 5",
        "0 0 */2 * 1",  # audit 10: a day field starting with * makes it AND
        "0 0 1 * */2",
        "0 0 * * 1#5",
        "0 0 L 2 *",
        "0 0 29 2 */7",  # AND: 29 February on a Sunday, 2032 then 2060
        "30 2 1-7 * sun",  # OR: the first seven days, and every Sunday
        "*/20 8-18/3 */5 jan-mar,oct mon-fri",
        "5/20 23 31 * 0-7",
    ],
)
@pytest.mark.parametrize(
    "after",
    [datetime(2026, 7, 1, tzinfo=UTC), datetime(2028, 2, 28, 23, 59, 59, 999000, tzinfo=UTC)],
)
def test_listed_expressions_run_as_cronsim_says(expression: str, after: datetime) -> None:
    assert duetime_runs(expression, "UTC", after, 8) == cronsim_runs(expression, "UTC", after, 8)


# --- against the simulation: wall times ----------------------------------------------------------


def simulated_walls(reference: Reference, after: datetime, count: int) -> list[datetime]:
    """The next matching naive wall times after `after`, day by day."""
    start = after.replace(second=0, microsecond=0) + MINUTE
    times = reference.times_of_day()
    walls: list[datetime] = []
    day, give_up = start.date(), start.year + 45  # 40 years is the longest gap there is
    while len(walls) < count and day.year < give_up:
        if reference.day_matches(day):
            walls.extend(w for at in times if (w := datetime.combine(day, at)) >= start)
            give_up = day.year + 45
        day += timedelta(days=1)
    return walls[:count]


@examples(100)
@given(references(extensions=True), ANY_INSTANT)
def test_in_utc_runs_are_the_simulations_with_every_extension(
    reference: Reference, after: datetime
) -> None:
    """Three runs from `after`, and the first from a month later, two months later, ... a year
    later: expressions with several runs a day would otherwise show only a day or two."""
    assume(accepted(reference))
    for months in range(13):
        start = to_ms(after) + timedelta(days=31 * months)
        count = 3 if months == 0 else 1
        walls = simulated_walls(reference, start.replace(tzinfo=None), count)
        expected = [wall.replace(tzinfo=UTC) for wall in walls]
        assert duetime_runs(reference.text, "UTC", start, count) == expected, reference.text


STAR_DAYS = Field("*", frozenset(range(1, 32)))
STAR_WEEKDAYS = Field("*", frozenset(range(7)))
MIDNIGHT = (Field("0", frozenset({0})), Field("0", frozenset({0})))
EVERY_MONTH = Field("*", frozenset(range(1, 13)))
EACH_DAY_EXTENSION = [
    *(
        Reference(*MIDNIGHT, Field(f"{n}W", nearest=n), EVERY_MONTH, STAR_WEEKDAYS)
        for n in range(1, 32)
    ),
    *(
        Reference(*MIDNIGHT, STAR_DAYS, EVERY_MONTH, Field(f"{d}#{n}", nth=frozenset({(d % 7, n)})))
        for d in range(8)
        for n in range(1, 6)
    ),
    *(
        Reference(
            *MIDNIGHT, STAR_DAYS, EVERY_MONTH, Field(f"{d}L", last_weekday=frozenset({d % 7}))
        )
        for d in range(8)
    ),
    Reference(*MIDNIGHT, Field("L", last_day=True), EVERY_MONTH, STAR_WEEKDAYS),
]


@pytest.mark.parametrize("reference", EACH_DAY_EXTENSION, ids=lambda r: r.text)
def test_each_day_extension_runs_on_the_simulated_days_for_eight_years(
    reference: Reference,
) -> None:
    """Every day of 2026-2033, which has months of every length starting on every weekday."""
    expected = [
        datetime.combine(day, time(), tzinfo=UTC)
        for day in (date(2026, 1, 1) + timedelta(days=n) for n in range(8 * 365 + 2))
        if reference.day_matches(day)
    ]
    after = datetime(2025, 12, 31, 12, tzinfo=UTC)
    assert duetime_runs(reference.text, "UTC", after, len(expected)) == expected


@examples(60)
@given(references(extensions=True))
def test_an_expression_is_refused_exactly_when_no_day_ever_matches(reference: Reference) -> None:
    """The Gregorian calendar repeats every 400 years; 2000-2027 holds every kind of year (leap
    or not, starting on any weekday), so a day that ever matches matches in it."""
    day, matched = date(2000, 1, 1), False
    while day.year < 2028 and not matched:
        matched = reference.day_matches(day)
        day += timedelta(days=1)
    assert accepted(reference) == matched, reference.text


# --- against the simulation: the daylight-saving policy ------------------------------------------


def simulated_runs(reference: Reference, zone_name: str, after: datetime) -> Iterator[datetime]:
    """docs/schedules.md's policy, minute by minute through real time. Far from a transition it
    skips wall days and hours that cannot match (the offset is constant there)."""
    zone = ZoneInfo(zone_name)
    changes = transitions(zone_name)
    instant = after.replace(second=0, microsecond=0) + MINUTE
    previous = (instant - MINUTE).astimezone(zone).utcoffset()
    while True:
        local = instant.astimezone(zone)
        offset, wall = local.utcoffset(), local.replace(tzinfo=None)
        assert offset is not None
        assert previous is not None
        if reference.fixed_time:
            # The first pass of a matching wall time; or the end of a gap that swallowed one.
            first_pass = wall.replace(tzinfo=zone, fold=0).astimezone(UTC) == instant
            due = reference.matches(wall) and first_pass
            if offset > previous:
                missing = wall - (offset - previous)
                while missing < wall and not due:
                    due = reference.matches(missing)
                    missing += MINUTE
        else:
            due = reference.matches(wall)
        if due:
            yield instant
        previous = offset
        quiet = not any(
            instant - timedelta(hours=3) <= t <= instant + timedelta(days=2) for t in changes
        )
        if quiet and not reference.day_matches(wall.date()):
            instant += datetime.combine(wall.date() + timedelta(days=1), time()) - wall
        elif quiet and wall.hour not in reference.hour.values:
            instant += timedelta(minutes=60 - wall.minute)
        else:
            instant += MINUTE


@examples(200)
@given(references(extensions=True, daily=True), st.data())
def test_near_transitions_runs_follow_the_documented_policy(
    reference: Reference, data: st.DataObject
) -> None:
    """Every run in the 6 hours after `after` (at least 3 runs, at most 400)."""
    zone = data.draw(st.sampled_from(ZONES) | st.sampled_from(DST_ZONES))
    after = data.draw(near_transition(zone))
    assume(accepted(reference))
    expected: list[datetime] = []
    for found in simulated_runs(reference, zone, after):
        if len(expected) >= 3 and found > after + timedelta(hours=6):
            break
        expected.append(found)
        if len(expected) == 400:
            break
    assert duetime_runs(reference.text, zone, after, len(expected)) == expected, reference.text


# --- the table in docs/schedules.md --------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schedules.md"


def documented_vectors() -> list[tuple[str, str, str, list[str]]]:
    """The rows of the day-rule table: expression, zone, after, runs (local times)."""
    text = DOCS.read_text()
    table = text[text.index("<!-- day-rule-vectors") :].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[3:]:
        cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        rows.append((cells[0], cells[1], cells[2], [r.strip() for r in cells[3].split(",")]))
    return rows


def shown(run: datetime, zone: str) -> str:
    """As the table shows a run: local time, with the offset outside UTC."""
    local = run.astimezone(ZoneInfo(zone))
    text = f"{local:%a %d %b %Y %H:%M}"
    if zone == "UTC":
        return text
    offset = f"{local:%z}"
    return f"{text} {offset[:3]}:{offset[3:]}"


def test_the_documented_day_rule_vectors_are_what_duetime_does() -> None:
    vectors = documented_vectors()
    assert len(vectors) >= 15
    for expression, zone, after, runs in vectors:
        start = datetime.fromisoformat(after).replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
        found = duetime_runs(expression, zone, start, len(runs))
        assert [shown(run, zone) for run in found] == runs, expression
