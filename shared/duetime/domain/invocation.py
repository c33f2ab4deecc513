"""What every target shares: the invocation, the one error type, and the documents a delivery
carries (its metadata, the envelope of header-less targets, compact JSON).

Pure, so the ports (duetime.ports.TargetRunner) and the services name them without knowing
any target; the delivery modules of duetime.targets (http, aws, handlers) raise and read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from duetime.domain.timeutil import rfc3339_ms

# Error messages end up in run records and API responses: keep them bounded.
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class Invocation:
    """One attempt at running one occurrence of a job."""

    tenant: str
    job_id: str
    run_id: str
    scheduled_ms: int  # the occurrence's due instant, epoch ms
    attempt: int  # 1-based
    payload: Any  # JSON value
    timeout_seconds: float
    upstream_run_id: str | None = None  # an `after` job's run: the run that triggered it


class TargetError(Exception):
    """The target failed. `retryable` False means retrying cannot help (e.g. refused address,
    unknown handler); `retry_after_seconds`: how long the target asked to be left alone (an
    HTTP Retry-After), or None."""

    def __init__(
        self, message: str, *, retryable: bool = True, retry_after_seconds: float | None = None
    ) -> None:
        message = truncate(message)
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after_seconds = retry_after_seconds

    def __repr__(self) -> str:
        return f"TargetError({self.message!r}, retryable={self.retryable})"


def truncate(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def delivery_metadata(invocation: Invocation) -> dict[str, str]:
    """The identifying values sent with every delivery: HTTP headers, SQS/SNS attributes."""
    metadata = {
        # Whose job it is, percent-encoded UTF-8 (a header carries no other text): a receiver
        # that several tenants may target tells theirs apart (since 2026-11-30: docs/security.md).
        "duetime-tenant": quote(invocation.tenant, safe=""),
        "duetime-job-id": invocation.job_id,
        "duetime-run-id": invocation.run_id,
        "duetime-scheduled-for": rfc3339_ms(invocation.scheduled_ms),
        "duetime-attempt": str(invocation.attempt),
    }
    if invocation.upstream_run_id is not None:
        metadata["duetime-upstream-run-id"] = invocation.upstream_run_id
    return metadata


def envelope(invocation: Invocation) -> dict[str, Any]:
    """The JSON document for targets that carry no headers (EventBridge detail, Lambda event)."""
    document = {
        "tenant": invocation.tenant,
        "job_id": invocation.job_id,
        "run_id": invocation.run_id,
        "scheduled_for": rfc3339_ms(invocation.scheduled_ms),
        "attempt": invocation.attempt,
        "payload": invocation.payload,
    }
    if invocation.upstream_run_id is not None:
        document["upstream_run_id"] = invocation.upstream_run_id
    return document


def to_json(value: Any) -> str:
    """Compact JSON, keeping non-ASCII text readable.

    A payload parsed from JSON may hold a lone surrogate (`"\\ud800"`), which has no UTF-8
    encoding; such a document is written with ASCII escapes instead, exactly as it arrived.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"payload is not JSON: {exc}", retryable=False) from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text
