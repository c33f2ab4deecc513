"""Schedules and their occurrences. Pure: every function takes the instants it needs.

Five kinds: `At` (one instant), `Delay` (seconds after creation), `Rate` (a fixed interval),
`Cron` (a 5-field cron expression on the wall clock of an IANA time zone) and `After` (when a run
of another job ends: no occurrence of its own). Every datetime is an aware UTC instant truncated
to milliseconds.

Cron expressions are parsed and matched on wall times, under the Vixie/Debian cron rules and
daylight-saving policy, by `duetime.domain.cron`; this module adds the time zone and the
`start_at`/`end_at` bounds. See docs/schedules.md for the user-facing description.
"""

from __future__ import annotations

import difflib
import functools
import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from duetime.domain.cron import _cron_spec, _first_cron_instant_after
from duetime.domain.errors import ValidationError, unknown_field
from duetime.domain.text import checked_text
from duetime.domain.timeutil import OutOfRange, parse_rfc3339, rfc3339, to_ms, truncate_ms


@dataclass(frozen=True)
class At:
    at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", truncate_ms(self.at))


@dataclass(frozen=True)
class Delay:
    seconds: int


@dataclass(frozen=True)
class Rate:
    seconds: int
    start_at: datetime | None = None
    end_at: datetime | None = None

    def __post_init__(self) -> None:
        _normalise_bounds(self)


@dataclass(frozen=True)
class Cron:
    expression: str
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None

    def __post_init__(self) -> None:
        _normalise_bounds(self)


@dataclass(frozen=True)
class After:
    """Runs when a run of another job of the tenant ends as `on` says: one run per upstream run,
    at the upstream run's scheduled instant (so its run id is `<job id>-<upstream ms>`)."""

    job_id: str
    on: str = "succeeded"


Schedule = At | Delay | Rate | Cron | After

KINDS = ("at", "delay_seconds", "rate_seconds", "cron", "after")
AFTER_OUTCOMES = ("succeeded", "failed", "finished")
MAX_DELAY_SECONDS = 31_536_000  # 365 days
MAX_RATE_SECONDS = 31_622_400  # 366 days

_EXTRA_KEYS: Mapping[str, frozenset[str]] = {
    "at": frozenset(),
    "delay_seconds": frozenset(),
    "rate_seconds": frozenset({"start_at", "end_at"}),
    "cron": frozenset({"timezone", "start_at", "end_at"}),
    "after": frozenset(),
}
_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_EPSILON = timedelta(microseconds=1)
# How far back `previous_occurrence` looks for a cron occurrence. Valid expressions match at
# least once every 40 years: the rarest day is 29 February on a given weekday (`0 0 29 2 */7`
# is both, by the `*` rule), 40 years apart around a century that is not a leap year.
_PREVIOUS_SEARCH_LIMIT = timedelta(days=41 * 366)


# --- parsing -------------------------------------------------------------------------------------

_ONE_KIND = "exactly one of at, delay_seconds, rate_seconds, cron, after"


def parse_schedule(raw: object, path: str = "schedule") -> Schedule:
    """Validate a schedule object from a request; raise ValidationError naming the bad field."""
    if not isinstance(raw, Mapping):
        raise ValidationError(path, "must be an object")
    kinds = [kind for kind in KINDS if kind in raw]
    known = set(KINDS).union(*_EXTRA_KEYS.values())
    if not kinds and (unknown := [key for key in raw if key not in known]):
        # A misspelt kind (`delay`) is named, with the closest (until 2026-11-30 the answer
        # was "exactly one of …" alone; an outside audit).
        key = str(unknown[0])
        close = [k for k in KINDS if key and k.startswith(key)]
        close = close or difflib.get_close_matches(key, KINDS)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValidationError(f"{path}.{key}", f"unknown field{hint} ({_ONE_KIND})")
    if len(kinds) != 1:
        raise ValidationError(path, _ONE_KIND)
    kind = kinds[0]
    allowed = _EXTRA_KEYS[kind] | {kind}
    for key in raw:
        if key not in allowed:
            raise ValidationError(f"{path}.{key}", unknown_field(key, allowed))

    if kind == "at":
        return At(at=_instant(raw["at"], f"{path}.at"))
    if kind == "delay_seconds":
        return Delay(seconds=_integer(raw, path, "delay_seconds", 0, MAX_DELAY_SECONDS))
    if kind == "after":
        return _after(raw["after"], f"{path}.after")

    start_at = _optional_instant(raw, path, "start_at")
    end_at = _optional_instant(raw, path, "end_at")
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise ValidationError(f"{path}.end_at", "must be after start_at")
    if kind == "rate_seconds":
        seconds = _integer(raw, path, "rate_seconds", 1, MAX_RATE_SECONDS)
        return Rate(seconds=seconds, start_at=start_at, end_at=end_at)

    expression = raw["cron"]
    if not isinstance(expression, str):
        raise ValidationError(f"{path}.cron", "must be a cron expression string")
    checked_text(expression, f"{path}.cron")  # fields are separated by spaces, not tabs or lines
    try:
        _cron_spec(expression)
    except ValueError as exc:
        raise ValidationError(f"{path}.cron", str(exc)) from None
    timezone = raw.get("timezone")
    if timezone is None:
        timezone = "UTC"
    elif not _valid_zone(timezone):
        message = "must be an IANA time zone name such as Europe/Berlin"
        raise ValidationError(f"{path}.timezone", message + _zone_hint(timezone))
    return Cron(expression=expression, timezone=timezone, start_at=start_at, end_at=end_at)


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    """The JSON form of a schedule; `parse_schedule` is its inverse."""
    match schedule:
        case At():
            return {"at": rfc3339(schedule.at)}
        case Delay():
            return {"delay_seconds": schedule.seconds}
        case After():
            return {"after": {"job_id": schedule.job_id, "on": schedule.on}}
        case Rate():
            out: dict[str, Any] = {"rate_seconds": schedule.seconds}
        case Cron():
            out = {"cron": schedule.expression, "timezone": schedule.timezone}
    if schedule.start_at is not None:
        out["start_at"] = rfc3339(schedule.start_at)
    if schedule.end_at is not None:
        out["end_at"] = rfc3339(schedule.end_at)
    return out


def is_recurring(schedule: Schedule) -> bool:
    return isinstance(schedule, Rate | Cron)


def is_triggered(schedule: Schedule) -> bool:
    """Runs only when another job's run ends (`after`): no occurrence of its own."""
    return isinstance(schedule, After)


def _after(raw: object, path: str) -> After:
    if not isinstance(raw, Mapping):
        raise ValidationError(path, "must be an object with job_id and on")
    for key in raw:
        if key not in (known := ("job_id", "on")):
            raise ValidationError(f"{path}.{key}", unknown_field(key, known))
    job_id = raw.get("job_id")
    if not isinstance(job_id, str) or not 1 <= len(job_id) <= 64:
        raise ValidationError(f"{path}.job_id", "must be a job id")
    on = raw.get("on", "succeeded")
    if on not in AFTER_OUTCOMES:
        raise ValidationError(f"{path}.on", f"must be one of {', '.join(AFTER_OUTCOMES)}")
    return After(job_id=job_id, on=on)


def _instant(value: object, field: str) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(field, "must be an RFC 3339 timestamp string")
    try:
        instant = parse_rfc3339(value)
    except OutOfRange as exc:  # until 2026-11-30 said "not RFC 3339": it is
        raise ValidationError(field, str(exc)) from None
    except ValueError:
        raise ValidationError(
            field, "must be an RFC 3339 timestamp with an offset or Z, such as 2026-11-21T09:30:00Z"
        ) from None
    if instant < _EARLIEST:
        raise ValidationError(field, "must not be before 1970-01-01T00:00:00Z")
    return instant


def _optional_instant(raw: Mapping[Any, object], path: str, key: str) -> datetime | None:
    value = raw.get(key)
    return None if value is None else _instant(value, f"{path}.{key}")


def whole_number(value: object, low: int, high: int) -> int | None:
    """`value` as an integer from `low` to `high`: a JSON integer, or a number without a
    fraction (`60.0`, an integer to JSON Schema); None for anything else, booleans included."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _integer(raw: Mapping[Any, object], path: str, key: str, low: int, high: int) -> int:
    value = whole_number(raw[key], low, high)
    if value is None:
        raise ValidationError(f"{path}.{key}", f"must be an integer from {low} to {high}")
    return value


def _valid_zone(name: object) -> bool:
    return isinstance(name, str) and name in _zone_names()


def _zone_hint(name: object) -> str:
    """The zone meant by a name written in another case or with spaces around it (`europe/
    berlin`, `"Europe/Berlin "`): until 2026-11-30 they were told Europe/Berlin, as any other."""
    wanted = name.strip().casefold() if isinstance(name, str) else None
    found = [zone for zone in sorted(_zone_names()) if zone.casefold() == wanted]
    return f", not {name!r}: did you mean {found[0]}?" if found and len(str(name)) < 64 else ""


@functools.cache
def _zone_names() -> frozenset[str]:
    """The zones of the pinned tzdata package (pyproject.toml), the same on every host: not the
    host's /usr/share/zoneinfo, which also holds `localtime` (the host's own), `posixrules`,
    `right/` zones (counting leap seconds) and `posix/` copies, and may be another version.
    `Factory` is a placeholder, not a place."""
    listed = importlib.resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(listed.split()) - {"Factory"}


@functools.lru_cache(maxsize=1024)
def zone(name: str) -> ZoneInfo:
    """A zone's rules, from the pinned tzdata package whatever the host has, so a schedule's
    occurrences are the same wherever they are computed. `name` must be a valid zone."""
    if name not in _zone_names():
        raise ValueError(f"not an IANA time zone name: {name!r}")
    data = importlib.resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    with data.open("rb") as rules:
        return ZoneInfo.from_file(rules, key=name)


def _normalise_bounds(schedule: Rate | Cron) -> None:
    for name in ("start_at", "end_at"):
        value = getattr(schedule, name)
        if value is not None:
            object.__setattr__(schedule, name, truncate_ms(value))


# --- occurrences ---------------------------------------------------------------------------------


def next_occurrence(
    schedule: Schedule, *, created_at: datetime, after: datetime | None
) -> datetime | None:
    """The first occurrence strictly after `after`; the first of all when `after` is None.

    None when there is none: a one-off whose instant is not after `after`, or a recurring
    schedule past its `end_at`.
    """
    created_at = truncate_ms(created_at)
    if after is not None:
        # Every occurrence is on a millisecond, so "> floor(after)" is "> after".
        after = truncate_ms(after)
    try:
        match schedule:
            case At():
                return _once(schedule.at, after)
            case Delay():
                return _once(created_at + timedelta(seconds=schedule.seconds), after)
            case Rate():
                return _rate_next(schedule, created_at, after)
            case Cron():
                return _cron_next(schedule, created_at, after)
            case After():
                return None  # triggered by its upstream's runs, never by the clock
    except OverflowError:
        return None  # beyond year 9999


def previous_occurrence(
    schedule: Schedule, *, created_at: datetime, before: datetime
) -> datetime | None:
    """The last occurrence strictly before `before`; None when there is none.

    The mirror of `next_occurrence`, and consistent with it: for the result p,
    `next_occurrence(after=p - 1 ms)` is p and `next_occurrence(after=p)` is >= `before` (or
    None). An occurrence after `end_at` does not exist.
    """
    created_at = truncate_ms(created_at)
    # Every occurrence is on a millisecond: "< before" is "< the first millisecond >= before".
    limit = truncate_ms(before)
    if limit < before:
        limit += timedelta(milliseconds=1)
    try:
        match schedule:
            case At():
                return _once_before(schedule.at, limit)
            case Delay():
                return _once_before(created_at + timedelta(seconds=schedule.seconds), limit)
            case Rate():
                return _rate_previous(schedule, created_at, limit)
            case Cron():
                return _cron_previous(schedule, created_at, limit)
            case After():
                return None
    except OverflowError:
        return None  # before year 1 or beyond year 9999


def _once(instant: datetime, after: datetime | None) -> datetime | None:
    return instant if after is None or instant > after else None


def _rate_next(rate: Rate, created_at: datetime, after: datetime | None) -> datetime | None:
    if rate.seconds <= 0:
        raise ValueError("rate seconds must be positive")
    anchor = (
        rate.start_at if rate.start_at is not None else created_at + timedelta(seconds=rate.seconds)
    )
    if after is None or after < anchor:
        result = anchor
    else:
        period_ms = rate.seconds * 1000
        k = (to_ms(after) - to_ms(anchor)) // period_ms + 1
        result = anchor + timedelta(milliseconds=k * period_ms)
    return result if rate.end_at is None or result <= rate.end_at else None


def _once_before(instant: datetime, before: datetime) -> datetime | None:
    return instant if instant < before else None


def _rate_previous(rate: Rate, created_at: datetime, before: datetime) -> datetime | None:
    if rate.seconds <= 0:
        raise ValueError("rate seconds must be positive")
    anchor = (
        rate.start_at if rate.start_at is not None else created_at + timedelta(seconds=rate.seconds)
    )
    if rate.end_at is not None and before > rate.end_at:
        before = rate.end_at + timedelta(milliseconds=1)
    if before <= anchor:
        return None
    period_ms = rate.seconds * 1000
    k = (to_ms(before) - to_ms(anchor) - 1) // period_ms  # the last k with anchor + k·P < before
    return anchor + timedelta(milliseconds=k * period_ms)


def _cron_next(cron: Cron, created_at: datetime, after: datetime | None) -> datetime | None:
    spec = _cron_spec(cron.expression)
    rules = zone(cron.timezone)
    lower = created_at if cron.start_at is None else max(created_at, cron.start_at)
    # The result must be >= lower and > after: express both as "strictly after threshold".
    threshold = lower - _EPSILON if after is None or after < lower else after
    if cron.end_at is not None and threshold >= cron.end_at:
        return None
    found = _first_cron_instant_after(spec, rules, threshold)
    if found is None or (cron.end_at is not None and found > cron.end_at):
        return None
    return found


def _cron_previous(cron: Cron, created_at: datetime, before: datetime) -> datetime | None:
    """Built on `_cron_next` alone, so it shares its DST policy and bounds exactly.

    Looks back over windows of 1, 2, 4, ... minutes until one holds an occurrence, then finds
    the last occurrence of that window (the half nearest `before` is known to be empty).
    """
    lower = created_at if cron.start_at is None else max(created_at, cron.start_at)
    if cron.end_at is not None and before > cron.end_at:
        before = cron.end_at + timedelta(milliseconds=1)
    if before <= lower:
        return None
    width = timedelta(minutes=1)
    while True:
        probe = before - width
        # At or below the lower bound the window covers every occurrence there is.
        reaches_lower = probe < lower
        found = _cron_next(cron, created_at, None if reaches_lower else probe)
        if found is not None and found < before:
            break
        if reaches_lower or width >= _PREVIOUS_SEARCH_LIMIT:
            return None
        width = min(width * 2, _PREVIOUS_SEARCH_LIMIT)
    # No occurrence lies in (empty_from, before).
    empty_from = before - width / 2 if width > timedelta(minutes=1) else before
    return _last_cron_before(cron, created_at, found, empty_from, before)


def _last_cron_before(
    cron: Cron, created_at: datetime, last: datetime, empty_from: datetime, before: datetime
) -> datetime:
    """The last occurrence < before, given an occurrence `last` < before and that none lies in
    (empty_from, before). Alternates a step forward with a bisection of (last, empty_from], so
    a dense cluster of occurrences (`* 9 * * *`) costs O(log) evaluations, not one each."""
    while True:
        following = _cron_next(cron, created_at, last)
        if following is None or following >= before:
            return last
        last = following
        empty_from = max(empty_from, last)
        middle = truncate_ms(last + (empty_from - last) / 2)
        if middle > last:
            found = _cron_next(cron, created_at, middle)
            if found is not None and found < before:
                last = found
                empty_from = max(empty_from, last)
            else:
                empty_from = middle
