"""`duetime local`: the whole system on one machine, on a moto server.

moto stores but never runs: nothing invokes a Lambda, fires a schedule or delivers to an
event source mapping. `LocalStack` starts moto on loopback in a child process
(duetime.local.moto_process: the emulator gets a core of its own), creates the tables and queues
from the same definitions as the CDK app (`duetime.resources`), and runs in threads the
small emulators of what AWS would do around the same handlers:

| thread            | stands for                                                       |
|-------------------|------------------------------------------------------------------|
| gateway           | API Gateway HTTP API + JWT authorizer → the API Lambda           |
| tick              | the EventBridge rule rate(1 minute) → the coordinator Lambda,   |
|                   | which sweeps the shards on threads (on AWS: a sweeper per shard) |
| reconciler        | the daily rule → the reconciler Lambda (hourly here)             |
| lambda-<priority> | an SQS event source mapping per lambda queue → the worker Lambda: |
|                   | `lambda_pollers` threads each, as the mapping's concurrent pollers|
| fargate worker    | the Fargate service's `duetime worker --runtime fargate` loop    |
| ttl-reaper        | DynamoDB TTL: deletes expired items (moto never does)            |
| runs-stream       | the runs table stream's event source mapping → the archiver      |
| figures           | a dashboard: runs, lateness, queue depths, every few seconds     |

`stop()` (Ctrl-C, SIGTERM) stops the gateway, lets each thread finish what it holds, joins
them, stops moto and puts the process environment back.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import os
import sys
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import RunStatus
from duetime.local.keys import DEFAULT_STATE_DIR, load_or_create_key, message_key
from duetime.local.lambda_runtime import FakeContext, Handler, SqsEventSource

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from duetime.config import Settings
    from duetime.local.gateway import Gateway
    from duetime.ports import Delivery
    from duetime.services.execute import Result, RunExecutor
    from duetime.services.queue_worker import QueueWorker
    from duetime.wiring import Components

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
PREFIX = "duetime"
# On AWS the queues' visibility timeout is 6 × the worker function's timeout (90 min), so a
# batch never outlives it. Locally a poller thread runs each batch to the end before it
# receives again; the timeout decides how soon a message whose processing crashed comes back:
# a minute. A batch that takes longer (slow targets) lets another poller receive the rest of
# it: the run claims keep such a second delivery from executing a run twice.
LOCAL_VISIBILITY_TIMEOUT_SECONDS = 60
LAMBDA_BATCH_SIZE = 10
LAMBDA_POLL_WAIT_SECONDS = 1
FARGATE_POLL_WAIT_SECONDS = 1
# How long stop() waits for a thread to finish the batch or run it holds.
JOIN_TIMEOUT_SECONDS = 15.0
LATENESS_WINDOW = 1000  # lateness percentiles are over the latest this many runs
# The TTL reaper's period: every second with a hot window of seconds (--hot-ttl-seconds), so
# runs reach the archive promptly; otherwise once a minute (DynamoDB itself may take days).
TTL_REAP_SECONDS_HOT = 1.0
TTL_REAP_SECONDS = 60.0
# A run still running or retrying when it expires is left until it finishes, or until it has
# been expired this long: with a hot window of seconds a run can outlive its record's TTL,
# which the 30-day window on AWS never lets happen.
UNFINISHED_RUN_GRACE_SECONDS = 3600
STREAM_BATCH_SIZE = 100  # Lambda's default for DynamoDB stream event source mappings
STREAM_POLL_SECONDS = 1.0
# Where `duetime local` tells other commands (`duetime history …`) how to reach its moto
# server and bucket: <state dir>/local.json, removed at stop.
ENDPOINT_FILE = "local.json"

_log = logging.getLogger(__name__)


class LocalStackError(RuntimeError):
    """The local stack cannot start as configured (the CLI shows the message)."""


@dataclass(frozen=True)
class LocalOptions:
    port: int = 8080  # the API gateway's port (0: any free port)
    tick_seconds: float = 60.0  # how often the coordinator starts the shard sweeps
    reconcile_seconds: float = 3600.0  # how often the reconciler runs (daily on AWS)
    moto_port: int = 0  # the moto server's port (0: any free port)
    # Concurrent pollers per lambda queue: Lambda's SQS event source mapping starts with five.
    lambda_pollers: int = 5
    allow_private_targets: bool = True  # loopback webhooks are the point of a local stack
    state_dir: Path = DEFAULT_STATE_DIR
    host: str = "127.0.0.1"
    figures_seconds: float = 5.0
    fargate_concurrency: int = 8
    # The run records' hot window (Env.RUN_TTL_SECONDS); None: the default, 30 days.
    hot_ttl_seconds: int | None = None


@dataclass(frozen=True)
class Figures:
    started: int
    succeeded: int
    failed: int
    retried: int
    lateness_p50_ms: int | None
    lateness_p99_ms: int | None
    queued: Mapping[str, int] = field(default_factory=dict)  # by queue key, e.g. lambda/high
    dead: int = 0  # messages in the dead-letter queues

    def line(self) -> str:
        def ms(value: int | None) -> str:
            return "-" if value is None else f"{value} ms"

        busy = [f"{key} {n}" for key, n in self.queued.items() if n]
        queued = f"queued {sum(self.queued.values())}" + (f" ({', '.join(busy)})" if busy else "")
        return (
            f"runs {self.started} started, {self.succeeded} succeeded, {self.failed} failed, "
            f"{self.retried} retrying | lateness p50 {ms(self.lateness_p50_ms)}, "
            f"p99 {ms(self.lateness_p99_ms)} | {queued}, dead {self.dead}"
        )


class RunFigures:
    """Counts the runs this process executes, from the results of the execution core.

    Both workers (the Lambda handler through its event source pollers, and the Fargate loop)
    call `RunExecutor.handle`, so one wrapper around it sees every run; reading the runs
    table instead would cost a scan that grows with history."""

    def __init__(self, window: int = LATENESS_WINDOW) -> None:
        self._lock = threading.Lock()
        self._lateness: deque[int] = deque(maxlen=window)
        self.started = self.succeeded = self.failed = self.retried = 0

    def wrap(self, handle: Callable[..., Result]) -> Callable[..., Result]:
        def observed(delivery: Delivery, **options: Any) -> Result:
            since_ms = time.time_ns() // 1_000_000
            result = handle(delivery, **options)
            self.record(result, since_ms)
            return result

        return observed

    def record(self, result: Result, since_ms: int) -> None:
        """Count `result` if this delivery executed the target: the run's latest attempt
        started during the call and has finished (a duplicate delivery returns the run as
        another delivery left it, started earlier)."""
        run = result.run
        if run is None or not run.attempts:
            return
        attempt = run.attempts[-1]
        if attempt.started_ms < since_ms or attempt.finished_ms is None:
            return
        with self._lock:
            self.started += 1
            self._lateness.append(attempt.lateness_ms)
            if run.status == RunStatus.SUCCEEDED:
                self.succeeded += 1
            elif run.status == RunStatus.FAILED:
                self.failed += 1
            elif run.status == RunStatus.RETRYING:
                self.retried += 1

    def snapshot(self, queued: Mapping[str, int] | None = None, dead: int = 0) -> Figures:
        with self._lock:
            lateness = sorted(self._lateness)
            counts = (self.started, self.succeeded, self.failed, self.retried)
        return Figures(
            *counts,
            lateness_p50_ms=_percentile(lateness, 0.50),
            lateness_p99_ms=_percentile(lateness, 0.99),
            queued=dict(queued or {}),
            dead=dead,
        )


def _percentile(ordered: list[int], q: float) -> int | None:
    """Nearest-rank percentile of an ordered list."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class LocalStack:
    """The local stack; `start()`/`stop()` or a `with` block."""

    def __init__(
        self,
        options: LocalOptions | None = None,
        *,
        api_handler: Handler | None = None,
        on_figures: Callable[[Figures], None] | None = None,
        log_stream: TextIO | None = None,
    ) -> None:
        """`api_handler`: the API Lambda's handler (default: duetime.entrypoints.api.handler,
        imported at start). `on_figures`: called with the live figures every `figures_seconds`.
        `log_stream`: where the functions' logs and EMF metrics go (stdout if None)."""
        self.options = options or LocalOptions()
        self.figures_recorder = RunFigures()
        self._api_handler = api_handler
        self._on_figures = on_figures
        self._log_stream = log_stream
        self._stopping = threading.Event()
        self._cleanup = contextlib.ExitStack()
        self._threads: list[threading.Thread] = []
        self._gateway: Gateway | None = None
        self._fargate: QueueWorker | None = None
        self._settings: Settings | None = None
        self._sqs: SQSClient | None = None
        self.moto_url = ""
        self.key_created = False

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def api_url(self) -> str:
        if self._gateway is None:
            raise RuntimeError("the local stack is not started")
        return self._gateway.url

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            raise RuntimeError("the local stack is not started")
        return self._settings

    def start(self) -> None:
        """Start everything (once per instance); on failure, stop what had started."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop accepting requests, let every thread finish what it holds, stop moto."""
        self._stopping.set()
        if self._gateway is not None:
            self._gateway.stop()
        if self._fargate is not None:
            self._fargate.stop()
        deadline = time.monotonic() + JOIN_TIMEOUT_SECONDS
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                _log.warning("%s did not finish within %s s", thread.name, JOIN_TIMEOUT_SECONDS)
        self._threads.clear()
        self._cleanup.close()

    def _start(self) -> None:
        options = self.options
        key, self.key_created = load_or_create_key(options.state_dir)
        self._set_env(_base_env())
        self._quiet_output()

        api_handler = self._api_handler or _default_api_handler()
        self._gateway = self._bind_gateway(api_handler, key)

        self.moto_url = self._start_moto()
        self._set_env({"AWS_ENDPOINT_URL": self.moto_url})

        import boto3
        from botocore.config import Config

        from duetime.resources import create_resources

        session = boto3.Session(region_name=REGION)
        config = Config(max_pool_connections=50, retries={"mode": "standard"})
        self._sqs = session.client("sqs", config=config)
        dynamodb = session.client("dynamodb", config=config)
        hot: dict[str, int] = (
            {"run_ttl_seconds": options.hot_ttl_seconds} if options.hot_ttl_seconds else {}
        )
        self._settings = create_resources(
            dynamodb,
            self._sqs,
            PREFIX,
            s3=session.client("s3", config=config),
            # The webhook secrets' key, in moto's KMS: the same code path as on AWS.
            kms=session.client("kms", config=config),
            visibility_timeout_seconds=LOCAL_VISIBILITY_TIMEOUT_SECONDS,
            allow_private_targets=options.allow_private_targets,
            require_https=False,
            run_signing_key=message_key(options.state_dir),
            **hot,
        )
        self._set_env(self._settings.to_env())
        self._write_endpoint_file()

        from duetime import wiring
        from duetime.observability import serialized_metrics

        wiring.components.cache_clear()
        self._cleanup.callback(wiring.components.cache_clear)
        parts = wiring.components()
        _observe_runs(parts.executor, self.figures_recorder)
        self._cleanup.enter_context(serialized_metrics())

        self._gateway.start()
        self._spawn("tick", self._tick_loop)
        self._spawn("reconciler", self._reconcile_loop)
        for priority in Priority:
            url = self._settings.queue(Runtime.LAMBDA, priority).url
            for k in range(options.lambda_pollers):
                name = f"lambda-{priority.value}-{k}"
                source = _event_source(self._sqs, url, _worker_function(name))
                self._spawn(name, self._poll_loop, source, priority.value)
        self._start_fargate_worker(parts)
        self._start_history(dynamodb, session.client("dynamodbstreams", config=config))
        if self._on_figures is not None:
            self._spawn("figures", self._figures_loop, self._on_figures)

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _set_env(self, values: Mapping[str, str | None]) -> None:
        """Set (None: unset) environment variables until stop(), which restores them."""
        for name, value in values.items():
            self._cleanup.callback(_restore_env, name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _quiet_output(self) -> None:
        """Keep the terminal for the figures: the functions' JSON logs and EMF metrics (what
        CloudWatch Logs would hold) go to `log_stream`, moto's request log nowhere."""
        werkzeug = logging.getLogger("werkzeug")
        self._cleanup.callback(werkzeug.setLevel, werkzeug.level)
        werkzeug.setLevel(logging.ERROR)
        self._cleanup.enter_context(warnings.catch_warnings())
        # Powertools warns on every invocation that emitted no metric (each idle sweep).
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        if self._log_stream is None:
            return
        console = sys.stdout
        self._cleanup.enter_context(contextlib.redirect_stdout(self._log_stream))
        from duetime.observability import logger

        handler = logger.registered_handler
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(self._log_stream)
            self._cleanup.callback(handler.setStream, console)

    def _bind_gateway(self, api_handler: Handler, key: bytes) -> Gateway:
        from duetime.local.gateway import Gateway

        try:
            gateway = Gateway(api_handler, key, host=self.options.host, port=self.options.port)
        except OSError as exc:
            raise LocalStackError(
                f"cannot listen on {self.options.host}:{self.options.port} ({exc.strerror}): "
                "choose another port with --port"
            ) from None
        self._cleanup.callback(gateway.stop)
        return gateway

    def _start_moto(self) -> str:
        from duetime.local import moto_process

        try:
            process, url = moto_process.start(self.options.host, self.options.moto_port)
        except moto_process.MotoProcessError as exc:
            raise LocalStackError(
                f"{exc}: choose another port with --moto-port (0: any free port)"
            ) from None
        self._cleanup.callback(moto_process.stop, process)
        return url

    def _write_endpoint_file(self) -> None:
        """Tell `duetime history …` (another process) where this stack's archive is."""
        path = self.options.state_dir / ENDPOINT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        endpoint = LocalEndpoint(self.moto_url, REGION, self.settings.history_bucket)
        path.write_text(json.dumps(asdict(endpoint)) + "\n", encoding="utf-8")
        self._cleanup.callback(path.unlink, missing_ok=True)

    def _start_history(self, dynamodb: DynamoDBClient, streams: Any) -> None:
        """The TTL reaper and the runs table's stream event source mapping → the archiver."""
        from duetime.entrypoints import archiver

        # Its S3 and SQS clients are built on the first invocation: a previous stack's are stale.
        archiver.archiver.cache_clear()
        self._cleanup.callback(archiver.archiver.cache_clear)
        settings = self.settings
        marks = TtlDeletes()
        reaper = TtlReaper(
            dynamodb,
            [settings.runs_table, settings.jobs_table, settings.timers_table],
            marks,
            runs_table=settings.runs_table,
            streamed=[settings.runs_table],
        )
        period = TTL_REAP_SECONDS_HOT if self.options.hot_ttl_seconds else TTL_REAP_SECONDS
        self._spawn("ttl-reaper", self._reaper_loop, reaper, period)

        def invoke(event: dict[str, Any], context: Any) -> Any:
            return archiver.handler(event, _context("archiver"))

        source = StreamEventSource(
            dynamodb, streams, settings.runs_table, invoke, marks, region=REGION
        )
        self._spawn("runs-stream", self._stream_loop, source)

    def _start_fargate_worker(self, parts: Components) -> None:
        from duetime.services.queue_worker import QueueWorker

        self._fargate = QueueWorker(
            parts.queue,
            parts.executor,
            Runtime.FARGATE,
            concurrency=self.options.fargate_concurrency,
            wait_seconds=FARGATE_POLL_WAIT_SECONDS,
            visibility_seconds=LOCAL_VISIBILITY_TIMEOUT_SECONDS,
            heartbeat_seconds=LOCAL_VISIBILITY_TIMEOUT_SECONDS / 3,
            # Its pollers take up to wait + 5 s to stop: all within JOIN_TIMEOUT_SECONDS.
            stop_timeout_seconds=JOIN_TIMEOUT_SECONDS - FARGATE_POLL_WAIT_SECONDS - 6,
        )
        self._spawn("fargate", self._fargate.run)

    # --- the emulators -----------------------------------------------------------------------

    def tick(self) -> dict[str, Any] | None:
        """What the EventBridge rule does once a minute: invoke the coordinator with a
        scheduled event. It sweeps the shards here, several at once (on AWS it invokes one
        sweeper per shard). A failed sweep is logged; the next tick resumes from its
        watermarks."""
        from duetime.entrypoints.coordinator import handler as coordinator
        from duetime.observability import logger

        now = datetime.now(UTC)
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT_ID,
            "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{PREFIX}-sweep"],
            "detail": {},
        }
        try:
            result: dict[str, Any] = coordinator(event, _context("coordinator"))
        except Exception:
            logger.exception("sweep failed")
            return None
        return result

    def _tick_loop(self) -> None:
        # Ticks keep a fixed rhythm (like a rate rule); after a sweep that overran its period
        # the next starts at once, and the ticks it overran are skipped, not made up.
        next_at = time.monotonic()
        while not self._stopping.is_set():
            self.tick()
            next_at = max(next_at + self.options.tick_seconds, time.monotonic())
            if self._stopping.wait(max(0.0, next_at - time.monotonic())):
                return

    def _reconcile_loop(self) -> None:
        """The daily rule invoking the reconciler (duetime.services.reconcile)."""
        from duetime.entrypoints.reconciler import handler as reconciler
        from duetime.observability import logger

        while not self._stopping.wait(self.options.reconcile_seconds):
            try:
                reconciler({}, _context("reconciler"))
            except Exception:
                logger.exception("reconciling failed")

    def _poll_loop(self, source: SqsEventSource, priority: str) -> None:
        from duetime.observability import logger

        while not self._stopping.is_set():
            try:
                source.poll_once()
            except Exception:
                logger.exception("event source mapping poll failed", extra={"queue": priority})
                self._stopping.wait(1)

    def _reaper_loop(self, reaper: TtlReaper, period: float) -> None:
        from duetime.observability import logger

        while not self._stopping.wait(period):
            try:
                reaper.reap_once()
            except Exception:
                logger.exception("TTL reaper failed")

    def _stream_loop(self, source: StreamEventSource) -> None:
        from duetime.observability import logger

        while not self._stopping.is_set():
            try:
                delivered = source.poll_once()
            except Exception:
                # As Lambda does, the same batch is delivered again (after a pause).
                logger.exception("runs stream: the archiver failed; retrying the batch")
                delivered = 0
            if not delivered:
                self._stopping.wait(STREAM_POLL_SECONDS)

    def _figures_loop(self, report: Callable[[Figures], None]) -> None:
        from duetime.observability import logger

        while not self._stopping.wait(self.options.figures_seconds):
            try:
                report(self.figures())
            except Exception:
                logger.exception("figures failed")

    def figures(self) -> Figures:
        """Runs executed so far, lateness percentiles and the queues' current depths."""
        queued: dict[str, int] = {}
        dead = 0
        if self._sqs is not None and self._settings is not None:
            for key, urls in self._settings.queues.items():
                queued[key] = _depth(self._sqs, urls.url)
                dead += _depth(self._sqs, urls.dlq_url)
        return self.figures_recorder.snapshot(queued, dead)


@dataclass(frozen=True)
class LocalEndpoint:
    """How to reach a running local stack's moto server and history bucket."""

    endpoint_url: str
    region: str
    history_bucket: str


def read_local_endpoint(state_dir: Path = DEFAULT_STATE_DIR) -> LocalEndpoint | None:
    """What the local stack running with `state_dir` wrote at start (None: none running)."""
    try:
        raw = json.loads((state_dir / ENDPOINT_FILE).read_text(encoding="utf-8"))
        return LocalEndpoint(raw["endpoint_url"], raw["region"], raw["history_bucket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class TtlDeletes:
    """Keys of the items the TTL reaper deleted whose REMOVE record the stream poller has not
    seen yet. DynamoDB marks a TTL delete's stream record with the service's identity; moto's
    REMOVE records carry none, so the poller adds it to these, and only to these."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: set[tuple[str, str]] = set()

    @staticmethod
    def _id(table: str, key: Mapping[str, Any]) -> tuple[str, str]:
        return table, json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)

    def add(self, table: str, key: Mapping[str, Any]) -> None:
        with self._lock:
            self._keys.add(self._id(table, key))

    def discard(self, table: str, key: Mapping[str, Any]) -> None:
        with self._lock:
            self._keys.discard(self._id(table, key))

    def take(self, table: str, key: Mapping[str, Any]) -> bool:
        """Whether `key`'s REMOVE was the reaper's (forgetting it: one REMOVE per delete)."""
        ident = self._id(table, key)
        with self._lock:
            if ident in self._keys:
                self._keys.remove(ident)
                return True
            return False


class TtlReaper:
    """What DynamoDB's TTL process does and moto does not: delete the items whose TTL
    attribute (epoch seconds) has passed. Each delete is conditional on the item still being
    expired, so an item whose TTL was extended meanwhile stays (as with DynamoDB).

    Deletes from tables with a stream are recorded in `marks` *before* they are made, so the
    stream poller can never see the REMOVE first. In the runs table, a run still running or
    retrying is left until it finishes (see UNFINISHED_RUN_GRACE_SECONDS)."""

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        tables: Sequence[str],
        marks: TtlDeletes,
        *,
        runs_table: str | None = None,
        streamed: Collection[str] = (),
        ttl_attribute: str = "expires_at",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._dynamodb = dynamodb
        self._tables = list(tables)
        self._marks = marks
        self._runs_table = runs_table
        self._streamed = set(streamed)
        self._ttl = ttl_attribute
        self._clock = clock
        self._key_names: dict[str, list[str]] = {}

    def reap_once(self) -> int:
        """Delete every expired item now; returns how many were deleted."""
        now = int(self._clock())
        return sum(self._reap(table, now) for table in self._tables)

    def _expired(self, table: str, now: int) -> tuple[str, dict[str, str], dict[str, Any]]:
        condition = "#ttl <= :now"
        names = {"#ttl": self._ttl}
        values: dict[str, Any] = {":now": {"N": str(now)}}
        if table == self._runs_table:
            condition += " AND (#status IN (:succeeded, :failed) OR #ttl <= :stale)"
            names["#status"] = "status"
            values |= {
                ":succeeded": {"S": RunStatus.SUCCEEDED.value},
                ":failed": {"S": RunStatus.FAILED.value},
                ":stale": {"N": str(now - UNFINISHED_RUN_GRACE_SECONDS)},
            }
        return condition, names, values

    def _reap(self, table: str, now: int) -> int:
        keys = self._keys_of(table)
        condition, names, values = self._expired(table, now)
        deleted = 0
        pages = self._dynamodb.get_paginator("scan").paginate(
            TableName=table,
            FilterExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        for page in pages:
            for item in page.get("Items", []):
                key = {name: item[name] for name in keys}
                deleted += self._delete(table, key, condition, names, values)
        return deleted

    def _delete(
        self,
        table: str,
        key: dict[str, Any],
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> int:
        from botocore.exceptions import ClientError

        streamed = table in self._streamed
        if streamed:
            self._marks.add(table, key)
        try:
            self._dynamodb.delete_item(
                TableName=table,
                Key=key,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if streamed:
                self._marks.discard(table, key)
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return 0  # changed since the scan: no longer expired
            raise
        except BaseException:
            if streamed:
                self._marks.discard(table, key)
            raise
        return 1

    def _keys_of(self, table: str) -> list[str]:
        if table not in self._key_names:
            schema = self._dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
            self._key_names[table] = [k["AttributeName"] for k in schema]
        return self._key_names[table]


class StreamEventSource:
    """The Lambda event source mapping of a DynamoDB stream: read each shard from its trim
    horizon with GetRecords, invoke the handler with Lambda's event shape (batches of up to
    `batch_size`), and move on only when the handler returns; a handler that raises gets the
    same batch again at the next poll, as Lambda retries a failed batch. REMOVE records of
    the reaper's deletes get DynamoDB TTL's `userIdentity`."""

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        streams: Any,  # boto3 DynamoDB Streams client
        table: str,
        handler: Handler,
        marks: TtlDeletes,
        *,
        batch_size: int = STREAM_BATCH_SIZE,
        region: str = REGION,
    ) -> None:
        self._streams = streams
        self._table = table
        self._handler = handler
        self._marks = marks
        self._batch_size = batch_size
        self._region = region
        self.arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        shards = streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        self._iterators: dict[str, str | None] = {
            shard["ShardId"]: streams.get_shard_iterator(
                StreamArn=self.arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for shard in shards
        }
        # A batch the handler failed, with the iterator after it: delivered again, unchanged.
        self._pending: dict[str, tuple[dict[str, Any], str | None]] = {}

    def poll_once(self) -> int:
        """One batch per shard at most; returns how many records were delivered."""
        delivered = 0
        for shard, iterator in list(self._iterators.items()):
            pending = self._pending.get(shard)
            if pending is None:
                if iterator is None:  # a closed shard, read to its end
                    continue
                reply = self._streams.get_records(ShardIterator=iterator, Limit=self._batch_size)
                records = reply.get("Records", [])
                following: str | None = reply.get("NextShardIterator")
                if not records:
                    self._iterators[shard] = following
                    continue
                pending = self._pending[shard] = (self.event(records), following)
            event, following = pending
            self._handler(event, FakeContext())
            del self._pending[shard]
            self._iterators[shard] = following
            delivered += len(event["Records"])
        return delivered

    def event(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """GetRecords results in the shape Lambda delivers them."""
        return {"Records": [self._lambda_record(r) for r in records]}

    def _lambda_record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        change = dict(record.get("dynamodb", {}))
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            change["ApproximateCreationDateTime"] = int(created.timestamp())
        shaped: dict[str, Any] = {
            "eventID": record.get("eventID"),
            "eventName": record.get("eventName"),
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion", self._region),
            "dynamodb": change,
            "eventSourceARN": self.arn,
        }
        identity = record.get("userIdentity")
        if isinstance(identity, Mapping):
            shaped["userIdentity"] = {
                "type": identity.get("Type", identity.get("type")),
                "principalId": identity.get("PrincipalId", identity.get("principalId")),
            }
        elif record.get("eventName") == "REMOVE" and self._marks.take(
            self._table, change.get("Keys", {})
        ):
            shaped["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
        return shaped


def _base_env() -> dict[str, str | None]:
    # A profile or a per-service endpoint in the user's environment would send boto3 elsewhere.
    unset: dict[str, str | None] = {
        name: None for name in os.environ if name.startswith("AWS_ENDPOINT_URL_")
    }
    return unset | {
        "AWS_PROFILE": None,
        "AWS_ACCESS_KEY_ID": "duetime-local",
        "AWS_SECRET_ACCESS_KEY": "duetime-local",
        "AWS_SESSION_TOKEN": "duetime-local",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        # Equal to duetime.observability's defaults, so the order of imports does not matter.
        "POWERTOOLS_SERVICE_NAME": "duetime",
        "POWERTOOLS_METRICS_NAMESPACE": "duetime",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def _restore_env(name: str, previous: str | None) -> None:
    if previous is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = previous


def _context(function: str) -> FakeContext:
    return FakeContext(
        function_name=f"{PREFIX}-{function}",
        invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{PREFIX}-{function}",
    )


def _default_api_handler() -> Handler:
    """The API Lambda's handler, imported only now (it is written alongside this stack)."""
    from duetime.entrypoints import api

    # Its resolver is built once per process from the components; a previous stack's is stale.
    with contextlib.suppress(AttributeError):
        api.resolver.cache_clear()
    return api.handler


def _observe_runs(executor: RunExecutor, figures: RunFigures) -> None:
    """Every run of either worker goes through the executor: count them there. The wrapper is
    set on this process's instance (rebuilt by the next stack), not on the class."""
    wrapped = figures.wrap(executor.handle)
    executor.handle = wrapped  # type: ignore[method-assign]


def _worker_function(instance: str) -> Handler:
    """A fresh instance of the worker Lambda's module: one per event source mapping, as each
    invokes its own execution environments. The module's Powertools BatchProcessor holds the
    batch being processed, so two threads must not share one. The copy is found by its module
    name, like any import, but executed into a module of its own (not in sys.modules)."""
    spec = importlib.util.find_spec("duetime.entrypoints.worker")
    if spec is None or spec.loader is None:
        raise LocalStackError(f"duetime.entrypoints.worker is not importable ({instance})")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Handler = module.handler

    def invoke(event: dict[str, Any], context: Any) -> Any:
        return handler(event, _context("worker"))

    return invoke


def _event_source(sqs: SQSClient, url: str, handler: Handler) -> SqsEventSource:
    return SqsEventSource(
        sqs,
        url,
        handler,
        batch_size=LAMBDA_BATCH_SIZE,
        wait_seconds=LAMBDA_POLL_WAIT_SECONDS,
        region=REGION,
    )


def _depth(sqs: SQSClient, url: str) -> int:
    names: Any = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes.get(name, "0")) for name in names)
