"""Jobs: what a client submits (JobSpec), what duetime stores (Job), and their validation."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from functools import cached_property
from typing import Any, TypeVar

from duetime.domain import errors
from duetime.domain.errors import IllegalTransition, PayloadTooLarge, ValidationError, unknown_field
from duetime.domain.overlap import Overlap
from duetime.domain.schedule import (
    Schedule,
    is_recurring,
    is_triggered,
    parse_schedule,
    schedule_to_dict,
    whole_number,
)
from duetime.domain.targets import Target, parse_target, target_to_dict
from duetime.domain.text import blank, checked_text
from duetime.domain.timeutil import LAST_MS

E = TypeVar("E", bound=StrEnum)

MAX_PAYLOAD_BYTES = 64 * 1024
MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 1024
MAX_TAGS = 20
MAX_TAG_KEY_CHARS = 64
MAX_TAG_VALUE_CHARS = 256
# Tag keys: letters, digits, _ . / + - @ (no `:`, split by `?tag=k:v`; no `=`, by `--tag k=v`).
TAG_KEY = re.compile(r"[A-Za-z0-9_./+@-]{1," + str(MAX_TAG_KEY_CHARS) + "}")
MAX_TIMEOUT_SECONDS = 900
# Occurrences may start up to this long after their instant (jitter_seconds): SQS's longest delay.
MAX_JITTER_SECONDS = 900
# A run may be handed to a worker this long before its instant (stage_seconds; docs/performance.md).
MAX_STAGE_SECONDS = 10
# A Lambda invocation keeps this long past a job's timeout to record the outcome and send the
# retry: a lambda-runtime job's timeout is at most the worker's timeout minus this. Up to
# PRE_START_ALLOWANCE_MS of it may go to the wait before the instant (duetime.services.execute).
RECORDING_MARGIN_SECONDS = 60
JOB_OVERHEAD_BYTES = 200  # status, instants, generation and attribute names of a stored job
# Why a job whose submission failed is cancelled (a replay with its Idempotency-Key revives it).
SUBMISSION_FAILED = "submission_failed"


class Priority(StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class Runtime(StrEnum):
    LAMBDA = "lambda"
    FARGATE = "fargate"


class JobStatus(StrEnum):
    SCHEDULED = "scheduled"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    COMPLETED = "completed"  # a recurring job past its end


class CatchupMode(StrEnum):
    LATEST = "latest"  # after downtime, run the most recent missed occurrence once
    ALL = "all"  # run every missed occurrence inside the window
    NONE = "none"  # skip missed occurrences


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_seconds: float = 2.0
    max_backoff_seconds: float = 300.0


@dataclass(frozen=True)
class Catchup:
    mode: CatchupMode = CatchupMode.LATEST
    window_seconds: int = 3600


@dataclass(frozen=True)
class JobSpec:
    """The validated body of a job submission. Nothing here is set by the server."""

    schedule: Schedule
    target: Target
    payload: Any = None
    name: str | None = None
    priority: Priority = Priority.NORMAL
    runtime: Runtime = Runtime.LAMBDA
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: int = 30
    catchup: Catchup = field(default_factory=Catchup)
    # Each occurrence starts up to this long after its instant (jitter_offset_ms).
    jitter_seconds: int = 0
    # Each run is handed to a worker this long before the second it is due in (staged), so its job
    # read and claim are done when the instant comes (docs/performance.md, "Staged runs").
    stage_seconds: int = 0
    overlap: Overlap = Overlap.ALLOW
    description: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def recurring(self) -> bool:
        return is_recurring(self.schedule)

    @property
    def triggered(self) -> bool:
        """An `after` job: it runs once per matching run of its upstream job."""
        return is_triggered(self.schedule)

    @cached_property
    def text(self) -> str:
        """The spec as JSON, where `true` is not `1` nor `2.0` `2` (to Python's `==` they are:
        a PATCH of `payload` from 1 to true was taken for no change until 2026-12-01)."""
        return json.dumps(spec_to_dict(self), separators=(",", ":"))

    @cached_property
    def size_bytes(self) -> int:
        """The size of the spec as JSON: about what the job takes in the table and in memory
        once read (sweeps budget their pages with it)."""
        return len(self.text.encode())


@dataclass(frozen=True)
class Job:
    tenant: str
    id: str
    spec: JobSpec
    status: JobStatus
    created_ms: int
    updated_ms: int
    # Bumped by a pause, a resume and a re-arming change: a timer or a message written for an
    # older generation belongs to a stale chain. When it began: None, stored before it was kept.
    generation: int = 0
    generation_ms: int | None = None
    # The pending timer's or message's instant: a one-off's, or a recurring job's next planned.
    next_due_ms: int | None = None
    # DynamoDB TTL (epoch seconds) once the job is finished and only history remains.
    expires_at: int | None = None
    # Why a cancelled job was cancelled, when not by its owner: SUBMISSION_FAILED.
    cancel_reason: str | None = None
    # +1 per write of the job item (an update, pause, resume, cancel, completion): the API's
    # ETag, and a condition of every replace, so no write overwrites another it did not see.
    version: int = 1
    # Whether `after` jobs name this one (its runs then read their ids: services.dependencies):
    # set, with a version, by the first, never cleared. None: stored before the mark (read).
    has_dependents: bool | None = False
    # When an `after` job was linked to its upstream (created, or PATCHed onto it): a run-now's
    # or a backfill's runs trigger only those linked by then (charged). None: its created_ms.
    linked_ms: int | None = None
    # When it was last resumed: a run of its upstream that ended before (while it was paused)
    # does not trigger it, not even when that run's message comes again (services.dependencies).
    resumed_ms: int | None = None

    def due_ms(self, scheduled_ms: int) -> int:
        """When the occurrence at `scheduled_ms` starts: its instant plus the job's jitter, up
        to the last instant of year 9999 (an occurrence at its end is not jittered past it)."""
        offset = jitter_offset_ms(self.id, scheduled_ms, self.spec.jitter_seconds)
        return max(scheduled_ms, min(scheduled_ms + offset, LAST_MS))

    @property
    def size_bytes(self) -> int:
        """About the size of the job item as stored: the spec plus the ids and bookkeeping."""
        return self.spec.size_bytes + JOB_OVERHEAD_BYTES + len(self.tenant) + len(self.id)

    def transition(self, wanted: JobStatus, now_ms: int) -> Job:
        """The job after a user-requested status change; raises IllegalTransition."""
        if wanted == self.status and wanted in (
            JobStatus.CANCELLED,
            JobStatus.PAUSED,
            JobStatus.SCHEDULED,
        ):
            return self  # idempotent (resuming a scheduled job re-arms it: JobService)
        allowed = _TRANSITIONS.get((self.status, wanted), False)
        if wanted in (JobStatus.PAUSED,) and not (self.spec.recurring or self.spec.triggered):
            allowed = False
        if not allowed:
            raise IllegalTransition(self.id, self.status, wanted)
        generation = self.generation + (1 if wanted != JobStatus.CANCELLED else 0)
        resumed = (self.status, wanted) == (JobStatus.PAUSED, JobStatus.SCHEDULED)
        return replace(
            self,
            status=wanted,
            updated_ms=now_ms,
            generation=generation,
            generation_ms=now_ms if generation != self.generation else self.generation_ms,
            version=self.version + 1,
            resumed_ms=now_ms if resumed else self.resumed_ms,
        )


def jitter_offset_ms(job_id: str, scheduled_ms: int, jitter_seconds: int) -> int:
    """How long after its instant the occurrence of `job_id` at `scheduled_ms` starts: whole
    milliseconds in [0, jitter_seconds * 1000), uniform over the window, and a pure function of
    the job and the occurrence, so every delivery, retry, redrive or duplicate of one run
    agrees on it. (The first 8 bytes of SHA-256 of "<job id>#<ms>", modulo the window: the
    modulo's bias is below 1e-13 for a 900 s window.)"""
    window = jitter_seconds * 1000
    if window <= 0:
        return 0
    digest = hashlib.sha256(f"{job_id}#{scheduled_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % window


_TRANSITIONS = {
    (JobStatus.SCHEDULED, JobStatus.CANCELLED): True,
    (JobStatus.PAUSED, JobStatus.CANCELLED): True,
    (JobStatus.SCHEDULED, JobStatus.PAUSED): True,
    (JobStatus.PAUSED, JobStatus.SCHEDULED): True,
}

_SPEC_FIELDS = frozenset(f.name for f in fields(JobSpec))  # what a submission may hold


def parse_job_spec(raw: object, also: tuple[str, ...] = ()) -> JobSpec:
    """Validate a submission. Unknown fields (including server-owned ones such as `id`,
    `status` or `tenant`) are refused, not ignored (no mass assignment); `also`: hint only."""
    if not isinstance(raw, Mapping):
        raise ValidationError("body", "must be a JSON object")
    for key in raw:
        if key not in _SPEC_FIELDS:
            raise errors.refused_field(key, READ_ONLY_FIELDS, _SPEC_FIELDS, also)
    if "schedule" not in raw:
        raise ValidationError("schedule", "required")
    if "target" not in raw:
        raise ValidationError("target", "required")
    payload = raw.get("payload")
    if len(json.dumps(payload, separators=(",", ":")).encode()) > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge("payload", f"at most {MAX_PAYLOAD_BYTES} bytes of JSON")
    runtime = _enum(raw, "runtime", Runtime, Runtime.LAMBDA)
    schedule = parse_schedule(raw["schedule"])
    overlap = _enum(raw, "overlap", Overlap, Overlap.ALLOW)
    if overlap != Overlap.ALLOW and not is_recurring(schedule):
        # One run (a one-off), or its upstream's runs (`after`): nothing to overlap.
        raise ValidationError("overlap", "must be allow for a one-off or an `after` job")
    return JobSpec(
        schedule=schedule,
        target=parse_target(raw["target"]),
        payload=payload,
        name=_name(raw.get("name")),
        priority=_enum(raw, "priority", Priority, Priority.NORMAL),
        runtime=runtime,
        retry=_retry(raw.get("retry")),
        timeout_seconds=_int(raw, "timeout_seconds", 30, 1, MAX_TIMEOUT_SECONDS),
        catchup=_catchup(raw.get("catchup")),
        jitter_seconds=_int(raw, "jitter_seconds", 0, 0, MAX_JITTER_SECONDS),
        stage_seconds=_int(raw, "stage_seconds", 0, 0, MAX_STAGE_SECONDS),
        overlap=overlap,
        description=_description(raw.get("description")),
        tags=_tags(raw.get("tags")),
    )


# The fields `PATCH /jobs/{id}` may change (any other key is refused: unknown or read-only).
PATCHABLE_FIELDS: tuple[str, ...] = (
    "name",
    "description",
    "tags",
    "schedule",
    "target",
    "payload",
    "priority",
    "runtime",
    "retry",
    "timeout_seconds",
    "catchup",
    "overlap",
    "jitter_seconds",
    "stage_seconds",
)
# Fields of a job as shown that no request sets (hinted too: `stauts` is status, read-only).
READ_ONLY_FIELDS = frozenset(
    {"id", "status", "version", "next_run_at", "created_at", "updated_at", "last_run"}
)


def updated_spec(spec: JobSpec, raw: object) -> JobSpec:
    """The spec after a PATCH body: its fields replace the current ones (a whole `schedule`,
    `target`, `retry` or `tags` map, not a merge; null, where a submission accepts it, resets
    a field to its default), and the result is validated as a submission is. A schedule made
    one-off drops the overlap policy it no longer needs, unless the body sets one."""
    if not isinstance(raw, Mapping):
        raise ValidationError("body", "must be a JSON object")
    for key in raw:
        if key not in PATCHABLE_FIELDS:
            raise errors.refused_field(key, READ_ONLY_FIELDS, PATCHABLE_FIELDS)
    one_off = "schedule" in raw and not is_recurring(parse_schedule(raw["schedule"]))
    merged = spec_to_dict(spec) | ({"overlap": Overlap.ALLOW.value} if one_off else {}) | dict(raw)
    return parse_job_spec(merged)


def rearms(before: JobSpec, after: JobSpec) -> bool:
    """Whether an update re-arms the job: a new schedule, a new queue (priority, runtime) for
    its runs, a new jitter (it moves every due instant) or staging (it moves when each run is
    handed over). Other fields, the overlap policy among them, are read by the worker when it
    claims a run."""

    def arming(spec: JobSpec) -> tuple[object, ...]:
        return (spec.schedule, spec.priority, spec.runtime, spec.jitter_seconds, spec.stage_seconds)

    return arming(before) != arming(after)


@dataclass(frozen=True)
class JobFilter:
    """`GET /jobs?tag=k:v&name_prefix=p`: every tag (AND) and the name prefix must match."""

    tags: tuple[tuple[str, str], ...] = ()
    name_prefix: str | None = None

    def matches(self, spec: JobSpec) -> bool:
        if self.name_prefix is not None and not (spec.name or "").startswith(self.name_prefix):
            return False
        return all(spec.tags.get(key) == value for key, value in self.tags)


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "schedule": schedule_to_dict(spec.schedule),
        "target": target_to_dict(spec.target),
        "payload": spec.payload,
        "priority": spec.priority.value,
        "runtime": spec.runtime.value,
        "retry": {
            "max_attempts": spec.retry.max_attempts,
            "backoff_seconds": spec.retry.backoff_seconds,
            "max_backoff_seconds": spec.retry.max_backoff_seconds,
        },
        "timeout_seconds": spec.timeout_seconds,
        "catchup": {"mode": spec.catchup.mode.value, "window_seconds": spec.catchup.window_seconds},
        "jitter_seconds": spec.jitter_seconds,
        "stage_seconds": spec.stage_seconds,
        "overlap": spec.overlap.value,
        "description": spec.description,
        "tags": dict(spec.tags),
    }


def _name(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or blank(value) or len(value) > MAX_NAME_CHARS:
        raise ValidationError("name", f"must be a visible string of at most {MAX_NAME_CHARS} chars")
    return checked_text(value, "name")


def _description(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION_CHARS:
        raise ValidationError("description", f"must be text, at most {MAX_DESCRIPTION_CHARS} chars")
    return checked_text(value, "description", multiline=True)


def _tags(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("tags", "must be an object of string values")
    if len(value) > MAX_TAGS:
        raise ValidationError("tags", f"at most {MAX_TAGS} tags")
    for key, tag in value.items():
        if not isinstance(key, str) or not TAG_KEY.fullmatch(key):
            raise ValidationError(
                f"tags.{key}", f"a key is 1 to {MAX_TAG_KEY_CHARS} letters, digits or _ . / + - @"
            )
        if not isinstance(tag, str) or len(tag) > MAX_TAG_VALUE_CHARS:
            raise ValidationError(
                f"tags.{key}", f"a value is a string of at most {MAX_TAG_VALUE_CHARS} chars"
            )
    return {key: checked_text(tag, f"tags.{key}") for key, tag in value.items()}


def _enum(raw: Mapping[str, object], key: str, kind: type[E], default: E) -> E:
    value = raw.get(key, default.value)
    for member in kind:
        if member.value == value:
            return member
    choices = "|".join(member.value for member in kind)
    raise ValidationError(key, f"must be one of {choices}")


def _int(
    raw: Mapping[str, object], key: str, default: int, low: int, high: int, path: str = ""
) -> int:
    value = whole_number(raw.get(key, default), low, high)
    if value is None:
        raise ValidationError(path + key, f"must be an integer from {low} to {high}")
    return value


def _number(raw: Mapping[str, object], path: str, key: str, default: float, high: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
        raise ValidationError(f"{path}.{key}", f"must be a number from 0 to {high}")
    return float(value) + 0.0  # -0.0 is 0.0


def _retry(raw: object) -> RetryPolicy:
    if raw is None:
        return RetryPolicy()
    if not isinstance(raw, Mapping):
        raise ValidationError("retry", "must be an object")
    for key in raw:
        if key not in (known := ("max_attempts", "backoff_seconds", "max_backoff_seconds")):
            raise ValidationError(f"retry.{key}", unknown_field(key, known))
    attempts = _int(raw, "max_attempts", 3, 1, 20, "retry.")
    # Retries travel as SQS messages with DelaySeconds, hence the 900 s ceiling.
    backoff = _number(raw, "retry", "backoff_seconds", 2.0, 900)
    ceiling = _number(raw, "retry", "max_backoff_seconds", max(300.0, backoff), 900)
    if ceiling < backoff:
        raise ValidationError("retry.max_backoff_seconds", "must be at least backoff_seconds")
    return RetryPolicy(attempts, backoff, ceiling)


def _catchup(raw: object) -> Catchup:
    if raw is None:
        return Catchup()
    where = "catchup" if isinstance(raw, str) else "catchup.mode"  # the body's field at fault
    if isinstance(raw, str):
        raw = {"mode": raw}
    if not isinstance(raw, Mapping):
        raise ValidationError("catchup", "must be latest|all|none or an object")
    for key in raw:
        if key not in (known := ("mode", "window_seconds")):
            raise ValidationError(f"catchup.{key}", unknown_field(key, known))
    try:
        mode = CatchupMode(raw.get("mode", CatchupMode.LATEST.value))
    except ValueError:
        raise ValidationError(where, "must be one of latest|all|none") from None
    return Catchup(mode, _int(raw, "window_seconds", 3600, 0, 604_800, "catchup."))
