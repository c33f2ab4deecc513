"""Backfill (`POST /jobs/{id}/backfill`): the body's range and the occurrences it holds.

A range is [from, to): `from` inclusive, `to` exclusive, both in the past (`to` at most now)
and within the run records' hot window (older occurrences may have lost the record that says
they ran). Its occurrences are those of the job's current schedule, from the job's creation
on (occurrences before the job existed are not its own), at most MAX_BACKFILL_OCCURRENCES.

Cost: one schedule evaluation per occurrence listed; a range that holds too many is counted
exactly for a rate (arithmetic), and for a cron expression on from where the listing stopped,
up to COUNT_LIMIT occurrences in all (a refusal costs at most twice an accepted backfill).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from duetime.domain.errors import ValidationError, unknown_field
from duetime.domain.planning import rate_count_between
from duetime.domain.schedule import Rate, Schedule, next_occurrence
from duetime.domain.timeutil import OutOfRange, from_ms, parse_rfc3339, rfc3339_ms, to_ms

MAX_BACKFILL_OCCURRENCES = 1000
# A cron range's occurrences are counted this far for the error message.
COUNT_LIMIT = 2 * MAX_BACKFILL_OCCURRENCES
_FIELDS = ("from", "to")


@dataclass(frozen=True)
class BackfillRange:
    start_ms: int  # inclusive
    end_ms: int  # exclusive


def parse_backfill_range(raw: object, *, now_ms: int, earliest_ms: int) -> BackfillRange:
    """The body `{"from": <RFC 3339>, "to": <RFC 3339>}`; ValidationError naming the field.
    `earliest_ms`: where the hot window of run records begins (`from` may not be older)."""
    if not isinstance(raw, Mapping):
        raise ValidationError("body", "must be a JSON object with from and to")
    for key in raw:
        if key not in _FIELDS:
            raise ValidationError(str(key), unknown_field(key, _FIELDS))
    start, end = (_instant(raw, name) for name in _FIELDS)
    if end > now_ms:
        raise ValidationError("to", f"must not be in the future (now is {rfc3339_ms(now_ms)})")
    if start >= end:
        raise ValidationError("from", "must be before to")
    if start < earliest_ms:
        raise ValidationError(
            "from",
            f"must not be before {rfc3339_ms(earliest_ms)}: run records are kept for the hot "
            "window only, so older occurrences cannot be told from ones that already ran",
        )
    return BackfillRange(start, end)


def _instant(raw: Mapping[object, object], name: str) -> int:
    value = raw.get(name)
    if value is None:
        raise ValidationError(name, "required: an RFC 3339 timestamp")
    if not isinstance(value, str):
        raise ValidationError(name, "must be an RFC 3339 timestamp string")
    try:
        instant = to_ms(parse_rfc3339(value))
    except OutOfRange as exc:
        raise ValidationError(name, str(exc)) from None
    except ValueError:
        raise ValidationError(
            name, "must be an RFC 3339 timestamp with an offset or Z, such as 2026-11-21T09:30:00Z"
        ) from None
    if instant < 0:
        raise ValidationError(name, "must not be before 1970-01-01T00:00:00Z")
    return instant


def backfill_occurrences(
    schedule: Schedule,
    *,
    created_at: datetime,
    span: BackfillRange,
    limit: int = MAX_BACKFILL_OCCURRENCES,
) -> tuple[int, ...]:
    """The occurrences (ms, ascending) of `schedule` in [max(span.start, created_at), span.end).
    More than `limit`: ValidationError on `to`, with how many the range holds."""
    start = max(span.start_ms, to_ms(created_at))
    found: list[int] = []
    occurrence = _next(schedule, created_at, start - 1)
    while occurrence is not None and occurrence < span.end_ms:
        if len(found) == limit:
            raise ValidationError(
                "to",
                f"the range holds {_count(schedule, created_at, start, span, limit, occurrence)} "
                f"occurrences; at most {limit} per backfill (to={rfc3339_ms(occurrence)} "
                f"holds the first {limit})",
            )
        found.append(occurrence)
        occurrence = _next(schedule, created_at, occurrence)
    return tuple(found)


def _count(
    schedule: Schedule,
    created_at: datetime,
    start_ms: int,
    span: BackfillRange,
    listed: int,
    beyond: int,
) -> str:
    """How many occurrences lie in [start_ms, span.end_ms), as the error message says it. A
    cron count goes on from `beyond`, the occurrence after the `listed` first ones."""
    if isinstance(schedule, Rate):
        return f"{rate_count_between(schedule, created_at, start_ms, span.end_ms):,}"
    seen = listed
    occurrence: int | None = beyond
    while occurrence is not None and occurrence < span.end_ms:
        if seen == COUNT_LIMIT:
            return f"more than {COUNT_LIMIT:,}"
        seen += 1
        occurrence = _next(schedule, created_at, occurrence)
    return f"{seen:,}"


def _next(schedule: Schedule, created_at: datetime, after_ms: int) -> int | None:
    found = next_occurrence(schedule, created_at=created_at, after=from_ms(after_ms))
    return to_ms(found) if found is not None else None
