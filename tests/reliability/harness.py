"""A duetime deployment on moto, driven like AWS drives it, with faults injected.

Shared by the reliability tests and `scripts/chaos.py`:

- `open_cluster()` starts an in-process moto account with duetime's tables and queues, a clock
  moved with time-machine (SQS delays and visibility timeouts follow it), and wires the real
  sweeper and worker Lambda handlers to the cluster's current `Components`.
- `Cluster.tick()` is the EventBridge rule invoking the sweeper; `Cluster.drain()` is the SQS
  event source mapping invoking the worker with batches of up to 10 records.
- A fault "kills the process" by raising `Crash` (a BaseException: nothing in duetime catches
  it) at a crash point; the cluster then throws its components away and builds fresh ones
  (`restart()`), as a new Lambda container would. Messages the dead invocation held come back
  after the queue's visibility timeout; sweep leases expire after two minutes.
- `submit_mix()` submits one-offs and bounded recurring jobs with the recording target and
  returns what each job should run; `account()` compares that with what the target saw.
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import time_machine
from botocore.awsrequest import AWSResponse
from botocore.retries import standard
from moto import mock_aws

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.runs import ClaimOutcome
from duetime.domain.timeutil import from_ms, rfc3339_ms
from duetime.entrypoints import sweeper as sweeper_handler
from duetime.entrypoints import worker as worker_handler
from duetime.local.lambda_runtime import FakeContext, SqsEventSource
from duetime.local.moto_fixes import make_dynamodb_writes_atomic, make_sqs_strict
from duetime.resources import create_resources
from duetime.services.sweep import Sweeper
from duetime.settings import Settings
from duetime.targets import DEFAULT_HANDLERS, Invocation
from duetime.wiring import Components, build
from tests.reliability.accounting import Accounting, Execution, account, expected_occurrences

START = datetime(2026, 11, 21, 10, 0, 5, tzinfo=UTC)
RECORD_TARGET = "reliability.record"
# Short enough that a crashed worker's messages come back within a couple of ticks; longer
# than a run's lease (timeout 30 s + 30 s margin), as the 6 × function timeout is on AWS.
VISIBILITY_SECONDS = 120
TIMER_SHARDS = 4
# botocore's standard retry mode sleeps up to a second (throttling) between attempts; the
# cluster's clock is virtual, so the tests compress the backoff instead of waiting it out.
BACKOFF_SCALE = 0.01
# After the faults heal, the system runs on this long before the accounting: longer than
# every recovery path put together (visibility 2 min, a sweep lease 2 min, a tick, a backoff).
RECOVERY_MINUTES = 4
EXTRA_RECOVERY_MINUTES = 6

make_dynamodb_writes_atomic()
make_sqs_strict()


class Crash(BaseException):
    """The process dies at this point. A BaseException: no `except Exception` stops it."""


@dataclass
class Recorder:
    """The recording target: every execution, as the outside world saw it."""

    executions: list[Execution] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    hook: Callable[[Invocation], None] | None = None  # runs before the execution is recorded

    def __call__(self, invocation: Invocation) -> None:
        if self.hook is not None:
            self.hook(invocation)
        with self.lock:
            self.executions.append(
                Execution(invocation.job_id, invocation.scheduled_ms, invocation.attempt)
            )


RECORDER = Recorder()
DEFAULT_HANDLERS.register(RECORD_TARGET, RECORDER)


@dataclass
class CrashPoint:
    """Raises Crash on every `every`-th hit (at most `limit` times) where `when` holds."""

    name: str
    every: int = 1
    limit: int | None = None
    when: Callable[[Any], bool] = lambda _: True
    enabled: bool = True  # False: the fault is healed
    hits: int = 0
    crashes: int = 0
    # Deaths after the target ran and before its outcome was recorded: the crash itself, when
    # the point is there, and the dead process's other threads reaching that point.
    window_deaths: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fires(self, subject: Any) -> bool:
        if not self.enabled or not self.when(subject):
            return False
        with self.lock:
            self.hits += 1
            if self.hits % self.every or (self.limit is not None and self.crashes >= self.limit):
                return False
            self.crashes += 1
            return True

    def died_in_window(self) -> None:
        with self.lock:
            self.window_deaths += 1


Installer = Callable[[Components], None]
# Components whose process died, by id (kept referenced, so an id is never reused): a dead
# process's other threads die too when they reach a crash point's method.
DEAD: dict[int, Components] = {}


def _crash_wrapper(
    part: Callable[[Components], object],
    method: str,
    point: CrashPoint,
    *,
    before: bool,
    window: bool,
) -> Installer:
    """`window`: dying before the original method returns leaves an executed run unrecorded."""

    def install(parts: Components) -> None:
        target = part(parts)
        original = getattr(target, method)

        def die(in_window: bool) -> Crash:
            DEAD[id(parts)] = parts
            if in_window:
                point.died_in_window()
            return Crash(point.name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if id(parts) in DEAD:
                raise die(window)
            if before and point.fires(args[0] if args else None):
                raise die(window)
            result = original(*args, **kwargs)
            if not before and point.fires(result):
                raise die(False)
            return result

        setattr(target, method, wrapper)

    return install


def crash_after(
    part: Callable[[Components], object], method: str, point: CrashPoint, *, window: bool = False
) -> Installer:
    """Crash right after `part(components).method` returned (its effects are done)."""
    return _crash_wrapper(part, method, point, before=False, window=window)


def crash_before(
    part: Callable[[Components], object], method: str, point: CrashPoint, *, window: bool = False
) -> Installer:
    """Crash when `part(components).method` is called, before it does anything."""
    return _crash_wrapper(part, method, point, before=True, window=window)


def claimed(result: Any) -> bool:
    outcome, _ = result
    return bool(outcome == ClaimOutcome.CLAIMED)


# The crash points of the issue, by name: where the process dies, and how to put it there.
def sweeper_crash_points(every: int, limit: int | None) -> dict[str, tuple[CrashPoint, Installer]]:
    page = CrashPoint("sweeper: after reading a bucket page", every, limit)
    sent = CrashPoint("sweeper: after sending a page, before recording progress", every, limit)
    shard = CrashPoint("sweeper: after recording a partition's progress", every, limit)
    return {
        "after-read": (page, crash_after(lambda p: p.timers, "read_due", page)),
        "after-send": (sent, crash_after(lambda p: p.sweeper._handover, "hand_over", sent)),
        "between-shards": (shard, crash_after(lambda p: p.timers, "advance", shard)),
    }


def worker_crash_points(every: int, limit: int | None) -> dict[str, tuple[CrashPoint, Installer]]:
    claim = CrashPoint("worker: after claim, before executing", every, limit, when=claimed)
    executed = CrashPoint("worker: after executing, before recording", every, limit)
    recorded = CrashPoint("worker: after recording, before deleting the message", every, limit)
    return {
        "after-claim": (claim, crash_after(lambda p: p.runs, "claim", claim)),
        "after-execute": (
            executed,
            crash_before(lambda p: p.runs, "finish", executed, window=True),
        ),
        "after-record": (
            recorded,
            crash_after(lambda p: p.runs, "finish", recorded, window=True),
        ),
    }


# --- transient AWS errors ------------------------------------------------------------------------


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


ERRORS: dict[str, list[tuple[int, str]]] = {
    "dynamodb": [
        (400, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"),
        (400, "com.amazonaws.dynamodb.v20120810#ThrottlingException"),
        (500, "com.amazonaws.dynamodb.v20120810#InternalServerError"),
    ],
    "sqs": [
        (400, "com.amazonaws.sqs#ThrottlingException"),
        (500, "com.amazonaws.sqs#InternalError"),
    ],
}


@dataclass
class TransientErrors:
    """Answers a share of DynamoDB and SQS calls with throttling or a 500, through botocore's
    `before-send` event: the SDK's standard retry mode sees the error as if AWS had sent it.

    `rate`: the request is refused (nothing happens); `ambiguous_rate`: the request takes
    effect but the client sees a 500 (the answer was lost), so the SDK's retry repeats it."""

    rate: float
    ambiguous_rate: float = 0.0
    seed: int = 1
    injected: Counter[str] = field(default_factory=Counter)
    window_failures: int = 0  # outcome recordings that failed after the SDK's retries
    enabled: bool = True  # False: the fault is healed
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def install(self, parts: Components) -> None:
        for client, service in ((parts.jobs._client, "dynamodb"), (parts.queue._client, "sqs")):
            # Handlers of a more specific event run first: ours, then moto's (registered for
            # every "before-send"; it applies the request unless we pointed it nowhere), then
            # one that points it back, as the SDK retries the same request object.
            client.meta.events.register_first(f"before-send.{service}", self._maybe_fail)
            client.meta.events.register_last("before-send", _restore_url)
        original = parts.runs.finish

        def finish(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except Exception:
                with self.lock:
                    self.window_failures += 1  # executed, outcome not recorded
                raise

        parts.runs.finish = finish  # type: ignore[method-assign]

    def _maybe_fail(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        if not self.enabled:
            return None
        service, operation = event_name.split(".")[1:3]
        with self.lock:
            draw = self._random.random()
            refused = draw < self.rate
            lost = not refused and draw < self.rate + self.ambiguous_rate
            if not (refused or lost):
                return None
            status, code = self._random.choice(
                [e for e in ERRORS[service] if lost is False or e[0] == 500]
            )
            applied = " (applied)" if lost else ""
            self.injected[f"{operation} {code.rsplit('#', 1)[-1]}{applied}"] += 1
        if refused:
            # Point the request nowhere, so moto's own before-send handler does not apply it.
            request.duetime_url = request.url
            request.url = "http://fault-injected.invalid/"
        body = json.dumps({"__type": code, "message": "injected by the reliability harness"})
        return AWSResponse(
            "http://fault-injected.invalid/",
            status,
            {"x-amzn-RequestId": "fault", "Content-Type": "application/x-amz-json-1.0"},
            _Body(body.encode()),  # type: ignore[arg-type]
        )


def _restore_url(request: Any, **_: Any) -> None:
    url = getattr(request, "duetime_url", None)
    if url is not None:
        request.url = url
        del request.duetime_url


@contextmanager
def compressed_sdk_backoff(scale: float = BACKOFF_SCALE) -> Iterator[None]:
    original = standard.ExponentialBackoff.delay_amount

    def delay_amount(self: Any, context: Any) -> float:
        return float(original(self, context)) * scale

    standard.ExponentialBackoff.delay_amount = delay_amount  # type: ignore[method-assign]
    try:
        yield
    finally:
        standard.ExponentialBackoff.delay_amount = original  # type: ignore[method-assign]


# --- the cluster ---------------------------------------------------------------------------------


@dataclass
class Cluster:
    session: boto3.Session
    sqs: Any  # the "AWS side" client (event source mappings): no faults injected here
    settings: Settings
    clock: Any  # time_machine.Coordinates
    recorder: Recorder
    installers: list[Installer] = field(default_factory=list)
    batch_size: int = 10
    restarts: int = 0
    crashes: Counter[str] = field(default_factory=Counter)
    failed_ticks: int = 0
    failed_batches: int = 0
    duplicate_sends: bool = False  # every message reaches SQS twice
    lose_deletes: float = 0.0  # share of processed messages whose delete is lost
    _random: random.Random = field(default_factory=lambda: random.Random(7))
    _sources: list[SqsEventSource] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.parts = self._boot()

    # lifecycle ---------------------------------------------------------------------------------

    def _boot(self) -> Components:
        parts = build(self.settings, self.session, jitter=lambda: 0.5)
        for install in self.installers:
            install(parts)
        if self.duplicate_sends:
            send = parts.queue.send

            def send_twice(messages: Any) -> None:
                send(messages)
                send(messages)

            parts.queue.send = send_twice  # type: ignore[method-assign]
        return parts

    def restart(self) -> None:
        """The process died: its in-memory state is gone; a fresh one starts."""
        self.restarts += 1
        self.parts = self._boot()

    def add(self, install: Installer) -> None:
        self.installers.append(install)
        install(self.parts)

    # what AWS does -----------------------------------------------------------------------------

    def submit(self, body: dict[str, Any], tenant: str = "tenant-a") -> str:
        body.setdefault("target", {"type": "handler", "name": RECORD_TARGET})
        return self.parts.service.create(tenant, parse_job_spec(body)).id

    def tick(self, offset_ms: int = 0) -> None:
        """The EventBridge rule invokes the coordinator, which invokes the sweeper once per
        shard: each shard's sweep is an invocation of its own, which can die or fail alone.
        `offset_ms` ≠ 0: invocations whose clock reads `offset_ms` off (a stale tick
        delivered late, or one running early)."""
        for shard in range(self.parts.timers.shard_count()):
            try:
                if offset_ms == 0:
                    sweeper_handler.handler({"shard": shard}, FakeContext())
                else:
                    parts = self.parts
                    Sweeper(
                        parts.jobs,
                        parts.timers,
                        parts.queue,
                        self.settings,
                        clock=lambda: wall_ms() + offset_ms,
                    ).sweep_shard(shard)
            except Crash as crash:
                self.crashes[str(crash)] += 1
                self.restart()
            except Exception:
                self.failed_ticks += 1  # a failed invocation; the next tick resumes

    def drain(self) -> int:
        """Event source mappings poll until no Lambda queue has a visible message."""
        if not self._sources:
            self._sources = [
                SqsEventSource(
                    _LosingDeletes(self) if self.lose_deletes else self.sqs,
                    self.settings.queue(Runtime.LAMBDA, p).url,
                    worker_handler.handler,
                    batch_size=self.batch_size,
                    wait_seconds=0,
                )
                for p in Priority
            ]
        delivered = 0
        for _ in range(10_000):
            polled = 0
            for source in self._sources:
                try:
                    polled += source.poll_once()
                except Crash as crash:
                    self.crashes[str(crash)] += 1
                    self.restart()
                    polled += 1
                except Exception:
                    self.failed_batches += 1  # the whole batch comes back after visibility
                    polled += 1
            if polled == 0:
                return delivered
            delivered += polled
        raise AssertionError("the queues never drained")

    def advance(self, seconds: float) -> None:
        self.clock.shift(seconds)

    def run(
        self,
        minutes: int,
        *,
        ticks: Callable[[int], Sequence[int]] = lambda _: (0,),
        step_seconds: int = 20,
    ) -> None:
        """Run for `minutes`: at the start of each the rule ticks (`ticks(i)` gives the clock
        offsets of that minute's invocations: () missed, (0, 0) duplicated, ...), and the event
        source mappings drain the queues every `step_seconds`."""
        for minute in range(minutes):
            for offset in ticks(minute):
                self.tick(offset)
            for _ in range(60 // step_seconds):
                self.drain()
                self.advance(step_seconds)
        self.drain()

    def settle(self, until_ms: int, max_minutes: int = 60) -> None:
        """Run until `until_ms` has passed, the sweep cursor is past its minute (every timer
        through it handed over) and every queue is empty (nothing delayed or in flight): for
        workloads whose jobs all end."""
        for _ in range(max_minutes):
            timers = self.parts.timers
            states = timers.sweep_states(range(timers.shard_count())).values()
            cursor = min((s.cursor_minute or 0 for s in states), default=0)
            swept = cursor > until_ms // 60_000  # every bucket through until_ms is complete
            if wall_ms() >= until_ms and swept and self.pending_messages() == 0:
                return
            self.run(1)
        raise AssertionError(f"still {self.pending_messages()} message(s) queued")

    def recover(self, workload: Workload, minutes: int = RECOVERY_MINUTES) -> None:
        """Run on normally past the workload's last run: `minutes` past its cutoff for
        recurring jobs that never end (their queues never empty), else until quiet."""
        if workload.cutoff_ms is None:
            self.settle(workload.last_due_ms + 60_000)
            return
        while wall_ms() < workload.cutoff_ms + minutes * 60_000:
            self.run(1)
        # The slowest recovery path: a second message of a run whose holder died is put back
        # until the holder's lease plus the clock-skew allowance (duetime.domain.runs) has
        # passed. Give a run still on its way that long, and stop as soon as none is missing.
        for _ in range(EXTRA_RECOVERY_MINUTES):
            if not workload.account(self.recorder).totals.lost:
                return
            self.run(1)

    def pending_messages(self) -> int:
        total = 0
        for priority in Priority:
            attrs = self.sqs.get_queue_attributes(
                QueueUrl=self.settings.queue(Runtime.LAMBDA, priority).url,
                AttributeNames=["All"],
            )["Attributes"]
            total += sum(
                int(attrs[a])
                for a in (
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesDelayed",
                    "ApproximateNumberOfMessagesNotVisible",
                )
            )
        return total

    def dead_messages(self, runtime: Runtime = Runtime.LAMBDA) -> list[dict[str, Any]]:
        """Everything on the DLQs (received with a short visibility, then released)."""
        found: list[dict[str, Any]] = []
        for priority in Priority:
            url = self.settings.queue(runtime, priority).dlq_url
            held: list[dict[str, Any]] = []
            while got := self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", []):
                held += got
            for message in held:
                self.sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            found += held
        return found


class _LosingDeletes:
    """The event source's SQS client, losing a share of DeleteMessageBatch entries (the
    message is delivered again after its visibility timeout: at-least-once delivery)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster.sqs, name)

    def delete_message_batch(self, QueueUrl: str, Entries: list[Any]) -> Any:
        kept = [e for e in Entries if self._cluster._random.random() >= self._cluster.lose_deletes]
        if kept:
            return self._cluster.sqs.delete_message_batch(QueueUrl=QueueUrl, Entries=kept)
        return {"Successful": [], "Failed": []}


AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "duetime-reliability",
    "POWERTOOLS_METRICS_NAMESPACE": "duetime-reliability",
    "POWERTOOLS_TRACE_DISABLED": "true",
}


@contextmanager
def open_cluster(**options: Any) -> Iterator[Cluster]:
    """A fresh moto account and clock, the handlers wired to the cluster; restores all after."""
    saved = dict(os.environ)
    os.environ.update(AWS_ENV)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        os.environ.pop(name, None)
    saved_components = (sweeper_handler.components, worker_handler.components)
    RECORDER.executions.clear()
    RECORDER.hook = None
    DEAD.clear()
    try:
        with mock_aws(), compressed_sdk_backoff(), time_machine.travel(START, tick=True) as clock:
            session = boto3.Session(region_name="us-east-1")
            sqs = session.client("sqs")
            settings = create_resources(
                session.client("dynamodb"),
                sqs,
                visibility_timeout_seconds=VISIBILITY_SECONDS,
                timer_shards=TIMER_SHARDS,
            )
            os.environ.update(settings.to_env())
            cluster = Cluster(session, sqs, settings, clock, RECORDER, **options)
            sweeper_handler.components = lambda: cluster.parts  # type: ignore[assignment]
            worker_handler.components = lambda: cluster.parts  # type: ignore[assignment]
            yield cluster
    finally:
        sweeper_handler.components, worker_handler.components = saved_components  # type: ignore[assignment]
        RECORDER.hook = None
        DEAD.clear()
        os.environ.clear()
        os.environ.update(saved)


# --- the workload --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    expected: dict[str, list[int]]  # job id -> scheduled instants (ms) it should run
    kinds: dict[str, str]
    cutoff_ms: int | None  # runs scheduled later are outside the experiment (None: bounded)

    @property
    def last_due_ms(self) -> int:
        return max((max(s) for s in self.expected.values() if s), default=0)

    def account(self, recorder: Recorder) -> Accounting:
        with recorder.lock:
            executions = list(recorder.executions)
        return account(self.expected, executions, self.kinds, until_ms=self.cutoff_ms)


RATES = (20, 30, 45, 60, 90)


def submit_mix(
    cluster: Cluster,
    jobs: int,
    *,
    window_seconds: int = 300,
    recurring_share: float = 0.4,
    seed: int = 1,
    tenants: int = 3,
    bounded: bool = False,
) -> Workload:
    """Submit `jobs` jobs, due within `window_seconds` from now: one-offs (`at` beyond the
    sweep horizon, or a short `delay_seconds` on the fast path) and recurring ones (a rate or a
    per-minute cron, catch-up `all`, so every occurrence is expected).

    Recurring jobs run on past the window; their runs scheduled after it are not counted
    (`Workload.cutoff_ms`). With `bounded`, they end at the window's end instead (`end_at`)."""
    rng = random.Random(seed)
    now = wall_ms()
    cutoff = now + window_seconds * 1000
    end = {"end_at": rfc3339_ms(cutoff)} if bounded else {}
    expected: dict[str, list[int]] = {}
    kinds: dict[str, str] = {}
    for i in range(jobs):
        body: dict[str, Any]
        if rng.random() < recurring_share:
            if rng.random() < 0.8:
                rate = rng.choice(RATES)
                body = {"schedule": {"rate_seconds": rate, **end}}
                kind = f"rate {rate}s"
            else:
                body = {"schedule": {"cron": "* * * * *", **end}}
                kind = "cron * * * * *"
            body["catchup"] = {"mode": "all"}
        elif rng.random() < 0.25:
            body = {"schedule": {"delay_seconds": rng.randint(0, 60)}}
            kind = "delay"
        else:
            body = {"schedule": {"at": rfc3339_ms(now + rng.randint(5, window_seconds) * 1000)}}
            kind = "at"
        body["priority"] = rng.choice(["high", "normal", "normal", "low"])
        tenant = f"tenant-{i % tenants}"
        job_id = cluster.submit(body, tenant=tenant)
        job = cluster.parts.jobs.get(tenant, job_id)
        assert job is not None
        expected[job_id] = expected_occurrences(
            job.spec.schedule, created_at=from_ms(job.created_ms), until_ms=cutoff
        )
        kinds[job_id] = kind
    return Workload(expected, kinds, None if bounded else cutoff)
