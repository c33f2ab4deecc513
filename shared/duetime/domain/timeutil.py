"""Instants are aware UTC datetimes in the core and integer epoch milliseconds in storage."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta


def to_ms(instant: datetime) -> int:
    if instant.tzinfo is None:
        raise ValueError("naive datetime: instants must carry a time zone")
    delta = instant - EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def from_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def rfc3339(instant: datetime) -> str:
    """RFC 3339 in UTC with millisecond precision: 2026-11-21T05:00:00.000Z."""
    utc = instant.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def rfc3339_ms(ms: int) -> str:
    return rfc3339(from_ms(ms))


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 `date-time` (section 5.6), to the millisecond (finer digits are
    dropped). Only that grammar: seconds and an offset (`Z` or `+hh:mm`) required, `T` between
    date and time, nothing around it; ISO 8601's other forms (`2026-W47-6`, `+0100`, no
    seconds) are refused, and so is a leap second (`:60`, which no instant here can hold).
    Raises ValueError (OutOfRange for an instant in no year from 1 to 9999 in UTC, or a leap
    second)."""
    found = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError("expected an RFC 3339 timestamp such as 2026-11-21T09:30:00Z")
    date, time, fraction, offset = found.groups()
    if time.endswith(":60"):  # well-formed: said so (it was "not RFC 3339", until 2026-11-30)
        raise OutOfRange("is a leap second (:60), which no instant here can hold")
    milliseconds = (fraction or "")[:3].ljust(3, "0")
    zone = "+00:00" if offset in ("Z", "z") else offset
    if date.startswith("0000"):
        raise OutOfRange(INSTANT_RANGE)
    try:
        local = datetime.fromisoformat(f"{date}T{time}.{milliseconds}{zone}")
    except ValueError:  # said only "not RFC 3339" until 2026-11-30 (a schedule audit)
        try:
            datetime.fromisoformat(date)
        except ValueError:
            raise OutOfRange(f"names {date}, which is no day of the calendar") from None
        raise OutOfRange(f"names {time}, which is no time of day") from None
    try:
        return local.astimezone(UTC)
    except OverflowError:  # before year 1 or after 9999 in UTC
        raise OutOfRange(INSTANT_RANGE) from None


INSTANT_RANGE = "must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"


class OutOfRange(ValueError):
    """A well-formed RFC 3339 timestamp of an instant outside what duetime holds (or that no
    instant holds: a leap second, a day or a time of day that does not exist)."""


_RFC3339 = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]+))?"
    r"([Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])",  # time-numoffset: 00-23 and 00-59
    re.ASCII,
)


def truncate_ms(instant: datetime) -> datetime:
    return from_ms(to_ms(instant))


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE_MS = 60_000
# The last instant duetime represents (RFC 3339 and datetime stop at year 9999).
LAST_MS = to_ms(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC))
