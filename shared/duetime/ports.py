"""Every port the services depend on. Each has an AWS adapter and an in-memory twin, and one
contract suite (tests/integration/test_contracts.py, test_contracts_runners.py) runs both: the
stores and queues (DynamoDB, SQS; twins in `duetime.adapters.memory`), `SecretCipher` (KMS),
`SweepLauncher` (Lambda; twin: the coordinator's `InProcessLauncher`), `TargetRunner`
(duetime.targets' executor; twin: `duetime.adapters.memory.targets`) and `SigningSecrets`
(`duetime.services.webhook_secrets`, over either pair of secret store and cipher); not
`FiguresSource` (`duetime.adapters.figures`, `duetime.local.figures`: each tested alone).

Only the Protocols live here, with the types that exist because of them: errors (SDK errors as
`StoreError`, `ConditionFailed`, `QueueError`, `SecretsUnavailable`), a page and its cursor
(`Page`), a received message (`Delivery`, `DeadLetter`). Calls carry duetime.domain's types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from duetime.domain.invocation import Invocation
from duetime.domain.jobs import Job, Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.overlap import Gate
from duetime.domain.runs import ClaimOutcome, Run, RunClaim, RunOutcome
from duetime.domain.signing import SecretRecord
from duetime.domain.targets import Target
from duetime.domain.timers import PartitionState, StuckTimer, SweepState, Timer

T = TypeVar("T")
CounterRead = tuple[int, int]  # a tenant's recurring count as read, and its changes so far
KeyCount = tuple[str, str, int]  # a key carrying a count: its tenant, its job id, its expiry


class StoreError(Exception):
    """A store call failed after the SDK's own retries: `transient` if time may mend it
    (throttling, a 5xx, no answer), not if it needs a person (access denied, a bad request);
    `unknown`: a write that may have been applied (no answer, and none to its read-back)."""

    def __init__(self, message: str = "", *, transient: bool = True, unknown: bool = False):
        super().__init__(message)
        self.transient, self.unknown = transient, unknown


class ConditionFailed(StoreError):
    """A conditional write found the item in another state than expected."""


class QueueError(Exception):
    """Messages could not be sent; `failed` lists what was not accepted."""

    def __init__(self, message: str, failed: Sequence[RunMessage] = ()) -> None:
        super().__init__(message)
        self.failed = list(failed)


class QueueUnavailable(QueueError):
    """SQS took no request at all (no answer, throttled, a 5xx) after the SDK's retries."""


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    cursor: str | None  # opaque; None when there is nothing more


@dataclass(frozen=True)
class KeyHold:
    """A withdrawal's key: a replay may have answered with the job (JobStore.mark_key).
    `token`: the withdrawing request's own mark ("" for a first request: it never marks)."""

    key: str
    token: str = ""


class JobStore(Protocol):
    def create(self, job: Job) -> None:
        """Insert a new job; ConditionFailed if the id exists."""

    def create_many(self, jobs: Sequence[Job]) -> None:
        """Insert new jobs with freshly drawn ids (no stored job has one), unconditionally."""

    def get(self, tenant: str, job_id: str) -> Job | None: ...

    def claim_key(
        self, tenant: str, key: str, job_id: str, fingerprint: str, expires_at: int, now: int
    ) -> tuple[str, str] | None:
        """Record a tenant's idempotency key as naming `job_id` to `expires_at` (s): None if this
        call recorded it (one expired by `now` is free), else the (job id, fingerprint) held."""

    def release_key(self, tenant: str, key: str, job_id: str) -> bool:
        """Forget a key recorded for `job_id` whose request was refused before the job was
        written; False when left as it is (it names another job, or a replay marked it)."""

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        """Jobs by (tenant, id), keyed by id; missing ones are absent."""

    def list(self, tenant: str, limit: int, cursor: str | None) -> Page[Job]:
        """A tenant's jobs, newest first."""

    def replace(
        self,
        job: Job,
        *,
        expected: Job,
        unchanged: Sequence[Job] = (),
        hold: KeyHold | None = None,
        release: bool = False,
    ) -> None:
        """Write `job` if the stored one has `expected`'s status, generation, version and
        creation time, each job of `unchanged` (as read: the `after` chain a new dependency was
        checked against, duetime.services.dependencies) its generation, and, with `hold`, its
        key is unmarked or marked with its token; `release`: count one active recurring job
        fewer in the same write (on DynamoDB one transaction); ConditionFailed otherwise."""

    def mark_key(self, tenant: str, key: str, token: str, job_id: str) -> bool:
        """A replay answers with the job of the request that recorded `key`: from now on only a
        write holding `token` (replace's `hold`) may withdraw it, and release_key leaves the key.
        False if the key does not name `job_id` (or is not kept)."""

    def unmark_key(self, tenant: str, key: str, token: str) -> None:
        """Take back `token`'s mark (its replay failed after all); another's mark stays."""

    def scan_active(
        self,
        segment: int,
        segments: int,
        counters: dict[str, CounterRead] | None = None,
        keys: Callable[[KeyCount], None] | None = None,
    ) -> Iterator[Job]:
        """Every `scheduled` or `paused` job of every tenant, in one segment of a parallel scan
        (0..segments-1), for the daily reconciler. `counters`: filled by the same read with the
        segment's tenants' counts of active recurring jobs (reserve_recurring) and changes;
        `keys`: called with each Idempotency-Key that carries a count (tenant, job id, expiry)."""

    def reserve_recurring(
        self, tenant: str, limit: int, key: tuple[str, str] | None = None
    ) -> bool | None:
        """Count one more active (scheduled or paused) recurring job of the tenant, if it has
        fewer than `limit`: an atomic check and increment. False when at the limit. With `key`
        (an Idempotency-Key and the job id it names) the key is marked counted by the same
        write, once: None, nothing counted, when it already is (one count a key)."""

    def release_recurring(self, tenant: str) -> None:
        """Count one active recurring job fewer (never below zero)."""

    def set_recurring_count(
        self, tenant: str, count: int, *, expected: CounterRead | None = None
    ) -> None:
        """Overwrite the count (the daily recount repairs drift); with `expected` (as read by
        scan_active), only if no reserve or release has changed it since, even back."""

    def gate(self, tenant: str, job_id: str) -> Gate:
        """The job's overlap gate (strongly consistent); `Gate()` (version 0) if none."""

    def put_gate(self, tenant: str, job_id: str, gate: Gate, expires_at: int) -> bool:
        """Write `gate` with version + 1 if the stored gate still has `gate.version` (0: none
        stored); False otherwise. `expires_at`: the record's TTL, epoch seconds."""

    def add_dependent(
        self, tenant: str, upstream_id: str, dependent_id: str, *, at_most: int | None = None
    ) -> None:
        """Record that `dependent_id` runs after `upstream_id` (idempotent); the first marks the
        upstream's job item (`Job.has_dependents`, a new version: reads of jobs without skip the
        dependents' item). ConditionFailed, nothing added, when the upstream has `at_most`."""

    def remove_dependent(self, tenant: str, upstream_id: str, dependent_id: str) -> None:
        """Forget it (idempotent; an entry left behind is harmless: readers check the job)."""

    def dependents(self, tenant: str, upstream_id: str) -> tuple[str, ...]:
        """The ids recorded as running after `upstream_id` (one strongly consistent read)."""

    def get_with_dependents(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[Job, tuple[str, ...]]]:
        """What runs need of their jobs, read together (strongly consistent; on DynamoDB a
        BatchGetItem per 100 jobs, then one for the dependents of those marked as having some):
        each job found by (tenant, id), with the ids recorded as running after it."""


class TimerStore(Protocol):
    """Timers in (bucket minute, shard) partitions, and each shard's sweep progress. `shards`:
    where new timers go; every shard ever used stays swept (`shard_count`), none orphaned."""

    shards: int

    def shard_of(self, job_id: str) -> int:
        """The shard a job's timers are written to."""

    def put(self, timers: Sequence[Timer]) -> None: ...

    def find(self, timers: Sequence[Timer], *, anywhere: bool = False) -> list[Timer]:
        """Those of `timers` stored (by key: bucket, shard, due, job and generation; the
        job's shard under the setting, or `anywhere`: any shard `shard_count` covers)."""

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
        """Some shards' sweep states, strongly consistent (never-swept ones are absent)."""

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
        """Lease a partition; None if another holds a live lease or it is complete. Taking
        over a lease that ran out unreleased (its holder died) is a stall."""

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
        """Record progress under our lease (and the stall count when given); False: lost."""

    # --- stuck timers (hand-over failed on its own), per shard

    def park(self, stuck: StuckTimer, *, replacing: StuckTimer | None = None) -> None:
        """Store a stuck timer (in place of `replacing`, its previous record)."""

    def parked_due(self, shard: int, now_ms: int, limit: int) -> list[StuckTimer]:
        """Stuck timers of a shard due for another attempt (not quarantined), oldest first."""

    def stuck(self, shard: int) -> list[StuckTimer]:
        """Every stuck timer of a shard, quarantined or not."""

    def quarantined(self, shard: int, limit: int) -> int:
        """How many stuck timers of a shard are quarantined, counted up to `limit`."""

    def unpark(self, stuck: StuckTimer) -> None:
        """Forget a stuck timer (it was handed over)."""


class RunStore(Protocol):
    def claim(self, claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        """Apply the claim rule (domain.runs.decide_claim) atomically: the outcome and the run."""

    def record(self, run: Run) -> Run | None:
        """Write an unclaimed run (a `skipped` or `buffered` occurrence) if it has no record yet,
        or only a `buffered` one; None if written, else the stored record (left as it is)."""

    def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
        """Record an attempt's outcome if `run` (as claimed) is still current; None: lost."""

    def withdraw(self, run: Run, reason: str | None) -> bool:
        """Undo `run`'s claim if it is still current (else False): runs.withdrawn's record."""

    def get(self, job_id: str, scheduled_ms: int) -> Run | None: ...

    def get_many(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Run]: ...

    def list(self, job_id: str, limit: int, cursor: str | None) -> Page[Run]:
        """A job's runs, newest scheduled first."""


@dataclass(frozen=True)
class Delivery:
    """A received message, in the form both the Lambda event and a receive call give."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    queue: str  # queue URL


class RunSender(Protocol):
    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        """Send (message, delay 0..900 s) pairs, 10 a batch; QueueError names the unsent."""


class JobQueue(RunSender, Protocol):
    def send_dead(self, message: RunMessage, reason: str, *, signed: bool = True) -> None:
        """Put a message on its queue's dead-letter queue with the reason. `signed=False`
        for a message duetime did not write: its copy stays unsigned (a redrive never runs it)."""

    def receive(
        self,
        runtime: Runtime,
        priority: Priority,
        max_messages: int,
        wait_seconds: int,
        visibility_seconds: int | None = None,
        *,
        lane: int = 0,
    ) -> list[Delivery]:
        """Up to max_messages (≤ 10) visible messages of a lane (Settings.queue(...).lanes; 0:
        the first), long-polling up to wait_seconds, then hidden visibility_seconds (default:
        the queue's visibility timeout)."""

    def delete(self, deliveries: Sequence[Delivery]) -> list[Delivery]:
        """Delete received messages (batched, retried). Returns those not deleted (back later)."""

    def change_visibility(self, delivery: Delivery, seconds: int) -> None: ...


@dataclass(frozen=True)
class DeadLetter:
    """A message on a dead-letter queue, as received (it stays there until deleted)."""

    queue: str  # the queue key of the queue it died on, e.g. lambda/high
    message_id: str
    receipt_handle: str
    body: str
    reason: str | None  # the worker's `duetime-reason`; None when the redrive policy moved it
    sent_ms: int  # when it was sent (to the DLQ by a worker; to the source queue if moved)
    receive_count: int


class DeadLetters(Protocol):
    """The DLQs, one per runtime × priority queue, named by its queue's key (`duetime dlq`:
    duetime.services.dead_letters). SQS cannot peek: a read hides a message for
    `visibility_seconds`, `release` shows it again at once; only `delete` removes it."""

    def approximate_count(self, queue: str) -> int:
        """How many messages are visible on the queue's DLQ (approximate, as SQS counts)."""

    def receive(self, queue: str, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        """Visible messages of the queue's DLQ (at most 10 per call, and max_messages); each
        stays hidden for visibility_seconds."""

    def release(self, letters: Sequence[DeadLetter]) -> None:
        """Make received messages visible again at once."""

    def delete(self, letter: DeadLetter) -> None: ...


class SweepLauncher(Protocol):
    """Starts the shards' sweeps for the coordinator: on AWS an asynchronous invocation of the
    sweeper per shard, event `{"shard": n}` (duetime.adapters.lambda_launcher); in one process,
    `Sweeper.sweep_shard(n)` on threads (duetime.services.coordinator's InProcessLauncher)."""

    def launch(self, shards: Sequence[int]) -> list[int]:
        """Start a sweep of each shard; returns the shards whose sweep could not be started,
        in the order given. A shard that fails does not stop the others."""


class TargetRunner(Protocol):
    """Runs a job's target (duetime.targets.executor.TargetExecutor; in-memory twin:
    duetime.adapters.memory.targets)."""

    def execute(self, target: Target, invocation: Invocation) -> None:
        """Run one invocation against one target: return on success, raise TargetError
        otherwise (`retryable` False: another attempt cannot help, e.g. a refused address), or
        a passing SecretsUnavailable before the target is called (the platform's: no attempt)."""


# --- webhook secrets (duetime.services.webhook_secrets) --------------------------------------


class SecretsUnavailable(Exception):
    """The secrets cannot be read or made: `passing` if time may mend it (KMS or the store
    throttled, a 5xx, no answer), not if it needs a person (no key configured, access denied)."""

    def __init__(self, message: str = "", *, passing: bool = False) -> None:
        super().__init__(message)
        self.passing = passing


class SecretStore(Protocol):
    def get(self, tenant: str) -> SecretRecord | None: ...

    def put(self, record: SecretRecord) -> None:
        """Write `record` if the stored one has version `record.version - 1` (none at all
        for version 1); ConditionFailed otherwise."""


class SecretCipher(Protocol):
    """Makes and opens secret keys. `generate` returns a fresh random key and its
    ciphertext; the tenant is bound to the ciphertext (KMS encryption context), so one
    tenant's ciphertext does not decrypt as another's."""

    def generate(self, tenant: str) -> tuple[bytes, bytes]: ...

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes: ...


class SigningSecrets(Protocol):
    """What an HTTP delivery needs: the secrets that sign a tenant's requests now."""

    def signing_secrets(self, tenant: str) -> tuple[str, ...]: ...


# --- operator figures (duetime.services.operator_stats: GET /admin/stats) --------------------


@dataclass(frozen=True)
class QueueFigures:
    """One run queue as SQS counts it now (approximate), and its dead-letter queue's depth."""

    runtime: Runtime
    priority: Priority
    depth: int  # visible: waiting for a worker
    in_flight: int  # received, not yet deleted
    delayed: int  # sent with a delay that has not passed
    oldest_age_seconds: int | None  # None where it cannot be measured (the local stack)
    dlq_depth: int


@dataclass(frozen=True)
class HourOfRuns:
    """Runs started and failed (for good) over the last hour, and their start lateness."""

    started: int
    failed: int
    lateness_p50_ms: int | None  # None: no run started
    lateness_p99_ms: int | None


@dataclass(frozen=True)
class SystemFigures:
    queues: tuple[QueueFigures, ...]
    runs: HourOfRuns


class FiguresSource(Protocol):
    """What the operators' view reads besides the timers store: SQS and CloudWatch on AWS
    (duetime.adapters.figures), the local stack's counts locally (duetime.local.figures); a
    call per queue and one metrics query, whatever the load."""

    def read(self, now_ms: int) -> SystemFigures:
        """The queues as they are now; the runs of the hour before `now_ms`."""
