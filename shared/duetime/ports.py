"""The ports the services depend on. Each has a DynamoDB/SQS adapter and an in-memory twin
(`duetime.adapters.memory`), and one contract test suite runs against both."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from duetime.domain.ids import minute_of, timer_sort_key
from duetime.domain.jobs import Job, Priority, Runtime
from duetime.domain.runs import ClaimOutcome, Run, RunClaim, RunOutcome
from duetime.domain.targets import Target

if TYPE_CHECKING:
    # Only named in annotations: duetime.targets imports webhook_secrets, which imports this
    # module's StoreError and ConditionFailed.
    from duetime.targets.invocation import Invocation

T = TypeVar("T")


class StoreError(Exception):
    """A store call failed after the SDK's own retries."""


class ConditionFailed(StoreError):
    """A conditional write found the item in another state than expected."""


class QueueError(Exception):
    """Messages could not be sent; `failed` lists what was not accepted."""

    def __init__(self, message: str, failed: Sequence[RunMessage] = ()) -> None:
        super().__init__(message)
        self.failed = list(failed)


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    cursor: str | None  # opaque; None when there is nothing more


@dataclass(frozen=True)
class Timer:
    """A pending occurrence, stored in a (bucket minute, shard) partition of the timers table.

    The bucket is the minute the occurrence falls due in, except for a catch-up continuation
    (duetime.domain.planning): an occurrence already in the past, stored in the first bucket
    the next sweep of its shard reads."""

    tenant: str
    job_id: str
    due_ms: int
    generation: int = 0
    bucket_minute: int | None = None  # None: minute_of(due_ms)
    # The size of the job item (bytes) when the timer was written: sweeps cut their pages at
    # a memory budget before reading the jobs. An estimate, not part of the timer's identity.
    job_bytes: int = field(default=0, compare=False)
    # A one-off job's queue: its timer becomes a message without the sweep reading the job
    # (the worker reads it, and drops the run of a cancelled job). None: a recurring job's
    # timer, whose sweep reads the job to plan the chain.
    runtime: Runtime | None = None
    priority: Priority | None = None

    @property
    def sort_key(self) -> str:
        return timer_sort_key(self.due_ms, self.job_id, self.generation)

    @property
    def bucket(self) -> int:
        return minute_of(self.due_ms) if self.bucket_minute is None else self.bucket_minute

    def message(self) -> RunMessage | None:
        """The run message of a one-off timer (None: the job must be read first)."""
        if self.runtime is None or self.priority is None:
            return None
        return RunMessage(
            self.tenant,
            self.job_id,
            self.due_ms,
            1,
            self.due_ms,
            self.runtime,
            self.priority,
            self.generation,
        )


@dataclass(frozen=True)
class PartitionState:
    """Sweep progress of one (bucket minute, shard) partition."""

    minute: int
    shard: int
    watermark: str | None = None  # sort key of the last timer handed to SQS
    complete: bool = False  # the whole minute was swept
    owner: str | None = None
    lease_until_ms: int = 0
    # Holders that died (their lease ran out unreleased) since the partition last made a
    # clean step: a sweep that keeps dying on one timer is found by shrinking its pages.
    stalls: int = 0


@dataclass(frozen=True)
class SweepState:
    """The sweep progress of one shard."""

    cursor_minute: int | None  # oldest bucket minute that may still hold unswept timers
    horizon_minute: int | None  # newest bucket minute any sweep of the shard has started reading


@dataclass(frozen=True)
class StuckTimer:
    """A timer whose hand-over to SQS failed on its own (not with the rest of its page).

    It is moved out of its partition's way (the partition's sweep moves past it) and retried
    by later sweeps of its shard with backoff; after `MAX_HANDOVER_ATTEMPTS` (see
    duetime.services.sweep) it is quarantined: kept, listed by `duetime timers stuck`, retried
    only on request."""

    timer: Timer
    shard: int
    attempts: int
    reason: str
    first_failed_ms: int
    last_failed_ms: int
    next_attempt_ms: int | None  # None: quarantined

    @property
    def quarantined(self) -> bool:
        return self.next_attempt_ms is None


class JobStore(Protocol):
    def create(self, job: Job) -> None:
        """Insert a new job; ConditionFailed if the id exists."""

    def get(self, tenant: str, job_id: str) -> Job | None: ...

    def claim_key(
        self, tenant: str, key: str, job_id: str, fingerprint: str, expires_at: int
    ) -> tuple[str, str] | None:
        """Record that a tenant's idempotency key names `job_id`. None if this call recorded
        it; otherwise the (job id, request fingerprint) recorded first."""

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        """Jobs by (tenant, id), keyed by id; missing ones are absent."""

    def list(self, tenant: str, limit: int, cursor: str | None) -> Page[Job]:
        """A tenant's jobs, newest first."""

    def replace(self, job: Job, *, expected: Job) -> None:
        """Write `job` if the stored one still has `expected`'s status and generation;
        ConditionFailed otherwise."""

    def scan_active(self, segment: int, segments: int) -> Iterator[Job]:
        """Every job of every tenant whose status is `scheduled` or `paused`, in one segment
        of a parallel scan (segment 0..segments-1): a whole-table read, for the daily
        reconciler."""

    def reserve_recurring(self, tenant: str, limit: int) -> bool:
        """Count one more active (scheduled or paused) recurring job of the tenant, if it has
        fewer than `limit`: an atomic check and increment. False when at the limit."""

    def release_recurring(self, tenant: str) -> None:
        """Count one active recurring job fewer (never below zero)."""

    def set_recurring_count(self, tenant: str, count: int) -> None:
        """Overwrite the count (the reconciler's daily recount repairs drift)."""


class TimerStore(Protocol):
    """Timers in (bucket minute, shard) partitions, and the sweep's progress per shard.

    `shards` is the count new timers are spread over (this deployment's setting). Every shard
    ever used stays swept (`shard_count`): lowering the setting orphans no timer."""

    shards: int

    def shard_of(self, job_id: str) -> int:
        """The shard a job's timers are written to."""

    def put(self, timers: Sequence[Timer]) -> None: ...

    def delete(self, timer: Timer) -> None: ...

    def find(self, timers: Sequence[Timer]) -> list[Timer]:
        """Those of `timers` that are stored (found by key: bucket, shard, due, job and
        generation)."""

    def read_due(
        self, minute: int, shard: int, after_key: str | None, before_ms: int, limit: int
    ) -> tuple[list[Timer], bool]:
        """Timers of one partition with sort key > after_key and due < before_ms, in sort-key
        order (strongly consistent); the flag says whether more remain."""

    # --- the sweep's progress, per shard

    def shard_count(self) -> int:
        """How many shards the sweeps cover: the most this store was ever configured with."""

    def raise_shard_count(self, count: int) -> int:
        """Make sure `count` shards are swept; returns the count after the write."""

    def sweep_states(self, shards: Sequence[int]) -> dict[int, SweepState]:
        """Strongly consistent reads of some shards' sweep states (never-swept ones are
        absent)."""

    def raise_horizon(self, shard: int, minute: int) -> SweepState:
        """Set the shard's horizon_minute to max(current, minute); its cursor_minute starts at
        `minute` the first time. Returns the state after the write."""

    def advance_cursor(self, shard: int, expected: int | None, minute: int) -> bool:
        """Move the shard's cursor from `expected` (None: never set) to `minute`."""

    def partition_states(
        self, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], PartitionState]:
        """States of (minute, shard) partitions; never-swept ones are absent."""

    def acquire(
        self, minute: int, shard: int, owner: str, now_ms: int, lease_ms: int
    ) -> PartitionState | None:
        """Lease a partition for sweeping; None if another sweeper holds a live lease or the
        partition is complete. Taking over a lease that ran out unreleased (its holder died)
        counts a stall."""

    def advance(
        self,
        minute: int,
        shard: int,
        owner: str,
        watermark: str | None,
        *,
        complete: bool = False,
        release: bool = False,
        stalls: int | None = None,
    ) -> bool:
        """Record progress under our lease (and reset the stall count when given); False if
        the lease was lost."""

    # --- stuck timers (hand-over failed on its own), per shard

    def park(self, stuck: StuckTimer, *, replacing: StuckTimer | None = None) -> None:
        """Store a stuck timer (in place of `replacing`, its previous record)."""

    def parked_due(self, shard: int, now_ms: int, limit: int) -> list[StuckTimer]:
        """Stuck timers of a shard due for another attempt (not quarantined), oldest first."""

    def stuck(self, shard: int) -> list[StuckTimer]:
        """Every stuck timer of a shard, quarantined or not."""

    def unpark(self, stuck: StuckTimer) -> None:
        """Forget a stuck timer (it was handed over)."""


class RunStore(Protocol):
    def claim(self, claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        """Apply the claim rule (duetime.domain.runs.decide_claim) atomically. Returns the
        outcome and the run: the claimed record, or the existing one."""

    def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
        """Record an attempt's outcome if `run` (as claimed) is still current; None if the
        lease was lost to another holder."""

    def get(self, job_id: str, scheduled_ms: int) -> Run | None: ...

    def get_many(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Run]: ...

    def list(self, job_id: str, limit: int, cursor: str | None) -> Page[Run]:
        """A job's runs, newest scheduled first."""


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
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_json(cls, body: str) -> RunMessage:
        """Raises ValueError (or a subclass) on a malformed body."""
        data = json.loads(body)
        return cls(
            tenant=str(data["tenant"]),
            job_id=str(data["job_id"]),
            scheduled_ms=int(data["scheduled_ms"]),
            attempt=int(data["attempt"]),
            due_ms=int(data["due_ms"]),
            runtime=Runtime(data["runtime"]),
            priority=Priority(data["priority"]),
            generation=None if data.get("generation") is None else int(data["generation"]),
        )


class UnauthenticatedMessage(ValueError):
    """A message body that duetime did not write: no signature, or not one of its keys'.
    `message` is what the body claims to be (to route it to a dead-letter queue)."""

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
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        signature = data.pop(self.FIELD, None)
        message = RunMessage.from_json(json.dumps(data))
        if not isinstance(signature, str):
            raise UnauthenticatedMessage("the run message is not signed", message)
        canonical = message.to_json()
        if not any(hmac.compare_digest(signature, self._mac(k, canonical)) for k in self._keys):
            raise UnauthenticatedMessage("the run message's signature is not duetime's", message)
        return message


@dataclass(frozen=True)
class Delivery:
    """A received message, in the form both the Lambda event and a receive call give."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    queue: str  # queue URL


class JobQueue(Protocol):
    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        """Send (message, delay seconds 0..900) pairs to their runtime×priority queues in
        batches of 10. Raises QueueError naming what was not sent after retries."""

    def send_dead(self, message: RunMessage, reason: str, *, signed: bool = True) -> None:
        """Put a message on its queue's dead-letter queue with the reason. `signed=False`
        for a message duetime did not write: its copy stays unsigned, so a redrive never
        turns it into one a worker runs."""

    def receive(
        self,
        runtime: Runtime,
        priority: Priority,
        max_messages: int,
        wait_seconds: int,
        visibility_seconds: int | None = None,
    ) -> list[Delivery]:
        """Up to max_messages (≤ 10) visible messages, long-polling up to wait_seconds; they
        stay invisible for visibility_seconds (default: the queue's visibility timeout)."""

    def delete(self, deliveries: Sequence[Delivery]) -> None: ...

    def change_visibility(self, delivery: Delivery, seconds: int) -> None: ...


class TargetRunner(Protocol):
    """Runs a job's target (duetime.targets.executor.TargetExecutor)."""

    def execute(self, target: Target, invocation: Invocation) -> None:
        """Run one invocation against one target: return on success, raise
        duetime.targets.TargetError otherwise (`retryable` False: another attempt cannot help,
        e.g. a refused address or an unknown handler)."""
