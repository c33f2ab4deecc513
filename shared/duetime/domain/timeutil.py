"""Instants are aware UTC datetimes in the core and integer epoch milliseconds in storage."""

from __future__ import annotations

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
    """Parse an RFC 3339 instant; an offset (or Z) is required. Raises ValueError."""
    if not isinstance(text, str) or "T" not in text.upper():
        raise ValueError("expected an RFC 3339 timestamp such as 2026-11-21T09:30:00Z")
    value = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if value.tzinfo is None:
        raise ValueError("timestamp needs a UTC offset or Z")
    utc = value.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


def truncate_ms(instant: datetime) -> datetime:
    return from_ms(to_ms(instant))


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE_MS = 60_000
