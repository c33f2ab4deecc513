"""Run messages: what travels on the queues, from the dispatcher and the sweeper to a worker.

A run message names one attempt of one run (a job's occurrence): `RunMessage` and its JSON wire
format, signed by `MessageAuth` so a worker runs only what duetime wrote. `run_message` is the
first attempt of an occurrence (due at its jittered instant), `delay_seconds` the SQS delay that
releases it on time, `release_window` the moments that release it just before its instant.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from duetime.domain.jobs import Job, Priority, Runtime


@dataclass(frozen=True)
class RunMessage:
    """The body of a queue message: one attempt of one run."""

    tenant: str
    job_id: str
    scheduled_ms: int
    attempt: int
    due_ms: int  # when this attempt may start (the occurrence, or the retry's backoff end)
    runtime: Runtime = Runtime.LAMBDA
    priority: Priority = Priority.NORMAL
    # The job's generation when the run was handed over: a pause (and its resume) bumps it,
    # and a worker drops a message of an older generation. None: a message written before
    # messages carried it (runs as before).
    generation: int | None = None
    # The run of the upstream job that triggered this one (an `after` job's run), else None.
    upstream_run_id: str | None = None
    # How long before `due_ms` the message is handed to a worker (its job's stage_seconds).
    stage_ms: int = 0
    # When a run-now or a backfill asked for this run, or for the run whose `after` job this
    # one is: the run triggers only the `after` jobs linked by then, those its ask was
    # charged for (duetime.services.dependencies). None: a run of the schedule.
    asked_ms: int | None = None
    # Sent back by `duetime dlq redrive`: it goes on beside an overlap gate's holder, as a
    # retry does (duetime.services.overlap).
    redriven: bool = False

    @property
    def visible_ms(self) -> int:
        """When the message should become visible to the workers: its due instant; a staged
        one's, the start of the second `stage_ms` before its instant's second (a worker reads
        the job and claims the run then, and starts it on the instant). Staged runs due in one
        second become visible together, so pollers take them in full batches."""
        if not self.stage_ms:
            return self.due_ms
        return self.due_ms // 1000 * 1000 - self.stage_ms

    def to_json(self) -> str:
        body: dict[str, object] = {
            "tenant": self.tenant,
            "job_id": self.job_id,
            "scheduled_ms": self.scheduled_ms,
            "attempt": self.attempt,
            "due_ms": self.due_ms,
            "runtime": self.runtime.value,
            "priority": self.priority.value,
        }
        if self.generation is not None:
            body["generation"] = self.generation
        if self.upstream_run_id is not None:
            body["upstream_run_id"] = self.upstream_run_id
        if self.stage_ms:
            body["stage_ms"] = self.stage_ms
        if self.asked_ms is not None:
            body["asked_ms"] = self.asked_ms
        if self.redriven:
            body["redriven"] = True
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_json(cls, body: str) -> RunMessage:
        """Raises ValueError (or a subclass) on a malformed body: any (a missing field, a
        number too large for an int, nesting too deep: what anyone who may send to a queue can
        put there must not stop a worker or a DLQ listing; found by an outside audit)."""
        try:
            return cls._parsed(json.loads(body))
        except ValueError:
            raise
        except (KeyError, TypeError, AttributeError, ArithmeticError, RecursionError) as exc:
            raise ValueError(f"not a run message: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _parsed(cls, data: Any) -> RunMessage:
        return cls(
            tenant=str(data["tenant"]),
            job_id=str(data["job_id"]),
            scheduled_ms=int(data["scheduled_ms"]),
            attempt=int(data["attempt"]),
            due_ms=int(data["due_ms"]),
            runtime=Runtime(data["runtime"]),
            priority=Priority(data["priority"]),
            generation=None if data.get("generation") is None else int(data["generation"]),
            upstream_run_id=None
            if data.get("upstream_run_id") is None
            else str(data["upstream_run_id"]),
            stage_ms=int(data.get("stage_ms", 0)),
            asked_ms=None if data.get("asked_ms") is None else int(data["asked_ms"]),
            redriven=data.get("redriven") is True,
        )


class UnauthenticatedMessage(ValueError):
    """A message body that duetime did not write: no signature, or not one of its keys'
    (`signed`). `message` is what the body claims to be (to route it to a dead-letter queue)."""

    def __init__(self, reason: str, message: RunMessage, *, signed: bool = False) -> None:
        super().__init__(reason)
        self.message, self.signed = message, signed


class KeysUnavailable(RuntimeError):
    """The run messages' keys could not be read (throttling, a 5xx, no answer, a refusal, or
    no key configured): no message can be sealed or opened, whichever it is (duetime.adapters.
    message_keys reads them)."""


class UnverifiedSignature(KeysUnavailable):
    """A signature none of the keys in hand made, while they cannot be read again (a read under
    way, or failing): neither opened nor refused yet. `message`: what the body claims to be."""

    def __init__(self, reason: str, message: RunMessage) -> None:
        super().__init__(reason)
        self.message = message


class MessageAuth:
    """Run messages are signed: HMAC-SHA256 over the message's canonical JSON, with a key only
    duetime's functions hold (AWS: a Secrets Manager secret; locally: a key file). A worker
    runs only a message it can verify, so a tenant's target pointed at duetime's own queue (or
    anyone who may send to it) cannot make it run another tenant's job.

    The first key signs; every key verifies (a rotation lists the new key first, then the old
    one, until no message signed with the old one is left)."""

    FIELD = "sig"

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys or not all(keys):
            raise ValueError("a message key is needed")
        self._keys = tuple(keys)

    @classmethod
    def from_text(cls, text: str) -> MessageAuth:
        """Keys as configured: comma-separated, first the one that signs."""
        return cls([k.strip().encode() for k in text.split(",") if k.strip()])

    @classmethod
    def ephemeral(cls) -> MessageAuth:
        """A key of this process only: for in-memory twins and tests, never a deployment."""
        return cls([base64.urlsafe_b64encode(os.urandom(32))])

    def _mac(self, key: bytes, canonical: str) -> str:
        digest = hmac.new(key, canonical.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def seal(self, message: RunMessage) -> str:
        canonical = message.to_json()
        return canonical[:-1] + f',"{self.FIELD}":"{self._mac(self._keys[0], canonical)}"}}'

    def open(self, body: str) -> RunMessage:
        """The message of a sealed body. ValueError (or a subclass) on a malformed body,
        UnauthenticatedMessage on a missing or wrong signature."""
        try:
            data = json.loads(body)
        except RecursionError:
            raise ValueError("not a run message: nested too deep") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        signature = data.pop(self.FIELD, None)
        message = RunMessage.from_json(json.dumps(data))
        if not isinstance(signature, str) or not signature.isascii():
            raise UnauthenticatedMessage("the run message is not signed", message)
        # The message as written, its signature taken off as `seal` put it on: fields a newer
        # duetime writes, unknown here, are signed too (until 2026-11-30 only the fields this
        # code knows were: a rolling deploy or a rollback refused a new field's messages).
        suffix = f',"{self.FIELD}":"{signature}"}}'
        signed = [message.to_json()] + (
            [body[: -len(suffix)] + "}"] if body.endswith(suffix) else []
        )
        if not any(
            hmac.compare_digest(signature, self._mac(k, text))
            for k in self._keys
            for text in signed
        ):
            raise UnauthenticatedMessage(
                "the run message's signature is not duetime's", message, signed=True
            )
        return message


def run_message(job: Job, scheduled_ms: int, *, jittered: bool = True) -> RunMessage:
    """The first attempt of `job`'s occurrence at `scheduled_ms`, in the job's queue and of its
    current generation, due at the occurrence's jittered instant (`Job.due_ms`); `jittered`
    False: due at `scheduled_ms` itself (a run-now starts now). A one-off armed after its
    instant (an `at` in the past, a resume or a change after it) is due when it was armed, its
    `updated_ms`: it runs now, and is late from then, not from an instant it was never meant
    to keep."""
    due = job.due_ms(scheduled_ms) if jittered else scheduled_ms
    return RunMessage(
        tenant=job.tenant,
        job_id=job.id,
        scheduled_ms=scheduled_ms,
        attempt=1,
        due_ms=due if job.spec.recurring else max(due, job.updated_ms),
        runtime=job.spec.runtime,
        priority=job.spec.priority,
        generation=job.generation,
        stage_ms=job.spec.stage_seconds * 1000,
    )


# A message sent ahead of its due instant becomes visible `delay_seconds` (whole seconds) after
# it is sent, so up to a second early: the worker waits out the rest (paid time on Lambda). A
# sender that can choose its moment (the sweeper) holds a send until the message would become
# visible between these two leads before its instant: no later than RELEASE_LEAD_MS early,
# and at least RELEASE_MARGIN_MS early so the send request's own latency never makes it late.
RELEASE_LEAD_MS = 150
RELEASE_MARGIN_MS = 40


def release_window(due_ms: int, now_ms: int) -> tuple[int, int] | None:
    """When to send a message due at `due_ms`, as (earliest, latest) ms from `now_ms`, so that
    it becomes visible between RELEASE_LEAD_MS and RELEASE_MARGIN_MS before its instant; the
    earliest is negative when that window is already open. None: due too soon for any delay
    to do better than releasing it at once."""
    ahead = due_ms - now_ms
    if ahead < RELEASE_LEAD_MS:
        return None
    early = ahead % 1000  # how early it would become visible if sent now
    earliest, latest = early - RELEASE_LEAD_MS, early - RELEASE_MARGIN_MS
    if latest < 0:  # this second's window has passed: the next second's
        earliest, latest = earliest + 1000, latest + 1000
    return earliest, latest


# A message sent unheld (a single submission, a retry, a put-back) whose delay would make it
# visible in the last LATE_SEND_MS of the second before its instant is sent with the next whole
# second instead: visible at most LATE_SEND_MS late, not nearly a second early. The common case
# is a `delay_seconds` job: its instant is whole seconds after the API read the clock, and the
# send comes a few milliseconds later.
LATE_SEND_MS = 100


def delay_seconds(due_ms: int, now_ms: int) -> int:
    """The SQS delay of a message due at `due_ms` sent at `now_ms`: the whole seconds before
    its instant (the worker waits out the remaining fraction), or one more when that fraction
    is over a second minus LATE_SEND_MS (visible that little late rather than ~1 s early);
    never beyond SQS's 900 s."""
    ahead = due_ms - now_ms
    if ahead <= 0:
        return 0
    return min(900, (ahead + LATE_SEND_MS) // 1000)
