"""Errors raised by the pure core. The API maps them to HTTP responses in one place."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable


class DomainError(Exception):
    """Base class for errors a caller can act on."""

    code = "error"


class ValidationError(DomainError):
    """Bad input. `field` names the offending field with a dotted path (`schedule.cron`)."""

    code = "invalid"

    def __init__(self, field: str, message: str, code: str | None = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        if code is not None:
            self.code = code


class PayloadTooLarge(ValidationError):
    code = "payload_too_large"


# What each refused change is called in its message, and what to do instead where one helps.
_AS_ASKED = {"run": "run now", "scheduled": "resumed"}
_HINTS = {
    ("scheduled", "paused"): " (only recurring and `after` jobs pause: this one runs once)",
    ("paused", "run"): " (resume it first)",
    ("paused", "backfilled"): " (resume it first)",
    ("cancelled", "updated"): " (a cancelled job is final)",
    ("cancelled", "scheduled"): " (a cancelled job is final)",
    ("completed", "updated"): " (its schedule has ended: submit a new job)",
}


class IllegalTransition(DomainError):
    """A job cannot move from its current status to the one asked for."""

    code = "conflict"

    def __init__(self, job_id: str, current: str, wanted: str, *, field: str | None = None) -> None:
        # "is scheduled; it cannot become run" read as no English, and a one-off's refused
        # pause as a contradiction (until 2026-11-30; an outside audit).
        verb = _AS_ASKED.get(str(wanted), str(wanted))
        hint = _HINTS.get((str(current), str(wanted)), "")
        super().__init__(f"job {job_id} is {current}: it cannot be {verb}{hint}")
        self.job_id = job_id
        self.current = current
        self.wanted = wanted
        self.field = field  # the request's field naming the job, when it is not the route's


class NotFound(DomainError):
    """`field`: the request's field that named what is missing (an `after` schedule's
    upstream); None when it is the resource of the route."""

    code = "not_found"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# Where an idempotency key comes from: a request's header, or a batch item's own field.
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_FIELD = "idempotency_key"


class IdempotencyConflict(DomainError):
    """An Idempotency-Key was reused with a different request."""

    code = "idempotency_conflict"

    def __init__(self, key: str, field: str = IDEMPOTENCY_HEADER, *, in_use: bool = False) -> None:
        super().__init__(
            f"{field} {key!r} is in use by a concurrent request: try again"
            if in_use
            else f"{field} {key!r} was already used for a different request"
        )
        self.key = key
        self.field = field


# Retry-After for quotas that time alone does not lift (a count or an interval): a hint, not
# a promise; the same request fails again until jobs end or the quota is raised.
COUNT_QUOTA_RETRY_AFTER_SECONDS = 60


class QuotaExceeded(DomainError):
    """A tenant quota refused the request. `retry_after_seconds` feeds `Retry-After`."""

    code = "quota_exceeded"

    def __init__(self, message: str, retry_after_seconds: int, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_seconds = retry_after_seconds
        self.field = field


class PreconditionFailed(DomainError):
    """An update named a version (If-Match) that is no longer the job's, or one the job has
    (If-None-Match)."""

    code = "precondition_failed"

    def __init__(
        self, job_id: str, expected: Collection[int], current: int, *, none_match: bool = False
    ) -> None:
        # No version named: weak tags, or tags that are no version ("abc"), never match.
        named = " or ".join(map(str, sorted(expected))) or "a version If-Match names"
        super().__init__(
            f"job {job_id} is at version {current}, which If-None-Match names"
            if none_match
            else f"job {job_id} is at version {current}, not {named}: read it again and retry"
        )
        self.job_id = job_id
        self.expected = expected
        self.current = current


# What a body does not carry where a header does (until 2026-12-01 `etag` was answered "did
# you mean tags?", and an `idempotency_key` in a POST /jobs body got no pointer: contract audits).
_HEADERS = {"etag": "If-Match", "if_match": "If-Match", "idempotency_key": "Idempotency-Key"}


def unknown_field(key: object, *known: Iterable[str]) -> str:
    """The refusal of a field a body may not hold, naming the closest known one (`nmae`: did
    you mean name?; since 2026-11-30: a new user's walk, round four), read-only names too
    (`stauts`: status; since 2026-12-01), or the header that carries it (`etag`: If-Match)."""
    name = str(key)
    names = [one for some in known for one in some]
    if name.lower().replace("-", "_") in _HEADERS:
        return f"unknown field; send it as the {_HEADERS[name.lower().replace('-', '_')]} header"
    close = difflib.get_close_matches(name, names, n=1) if len(name) < 64 else []
    return f"unknown field; did you mean {close[0]}?" if close else "unknown field"


def refused_field(
    key: object, read_only: Collection[str], *known: Iterable[str]
) -> ValidationError:
    """A field a body may not hold: a `read-only field` when the server sets it (`status`: a
    POST /jobs answered "unknown field; did you mean tags?" until 2026-12-01), else
    `unknown_field`, the read-only names hinted too."""
    if key in read_only:
        return ValidationError(str(key), "read-only field")
    return ValidationError(str(key), unknown_field(key, *known, read_only))
