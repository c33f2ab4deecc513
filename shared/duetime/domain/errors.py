"""Errors raised by the pure core. The API maps them to HTTP responses in one place."""

from __future__ import annotations


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


class IllegalTransition(DomainError):
    """A job cannot move from its current status to the one asked for."""

    code = "conflict"

    def __init__(self, job_id: str, current: str, wanted: str) -> None:
        super().__init__(f"job {job_id} is {current}; it cannot become {wanted}")
        self.job_id = job_id
        self.current = current
        self.wanted = wanted


class NotFound(DomainError):
    code = "not_found"


class IdempotencyConflict(DomainError):
    """An Idempotency-Key was reused with a different request."""

    code = "idempotency_conflict"

    def __init__(self, key: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} was already used for a different request")
        self.key = key
