"""`duetime local`: the whole system on one machine, on a moto server.

moto stores but never runs: nothing invokes a Lambda, fires a schedule or delivers to an
event source mapping. `LocalStack` starts moto in a child process (duetime.local.moto_process),
creates the tables and queues from the same definitions as the CDK app (`duetime.resources`),
and runs in threads the small emulators of what AWS would do around the same handlers:

| thread            | stands for                                                       |
|-------------------|------------------------------------------------------------------|
| gateway           | API Gateway HTTP API + JWT authorizer → the API Lambda           |
| tick              | the EventBridge rule rate(1 minute) → the coordinator Lambda,   |
|                   | which sweeps the shards on threads (on AWS: a sweeper per shard) |
| reconciler        | the daily rule → the reconciler Lambda (hourly here)             |
| lambda-<priority> | an SQS event source mapping per lambda queue (lane) → the worker  |
|                   | Lambda: up to `lambda_pollers` threads each (its pollers)         |
| fargate worker    | the Fargate service's `duetime worker --runtime fargate` loop    |
| ttl-reaper        | DynamoDB TTL: deletes expired items (moto never does)            |
| runs-stream       | the runs table stream's event source mapping → the archiver      |
| figures           | a dashboard: runs, lateness, queue depths, every few seconds     |

The functions are wired as on AWS, through duetime.wiring, but from objects rather than an
environment: the settings of the resources just created, a boto3 session with moto's
credentials and endpoint, and an executor that counts the runs (duetime.local.figures); each
function's handler is made over those components (`make_handler`); the environment is left.

`stop()` (Ctrl-C, SIGTERM) stops the gateway, joins the threads as they finish what they hold
(`unfinished`: those busy at its deadline), stops moto. A moto that exits sets `broken`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.timeutil import from_ms
from duetime.local import lambda_runtime
from duetime.local.endpoint import LocalEndpoint, moto_session, write_endpoint_file
from duetime.local.figures import Figures, LocalFigures, ObservedExecutor, RunFigures, queue_depth
from duetime.local.gc_pauses import freeze_long_lived
from duetime.local.keys import DEFAULT_STATE_DIR, load_or_create_key, message_key
from duetime.local.lambda_runtime import FakeContext, Handler, ScalingPollers, scheduled_event
from duetime.local.streams import StreamEventSource
from duetime.local.ttl import TTL_REAP_SECONDS, TTL_REAP_SECONDS_HOT, TtlDeletes, TtlReaper

if TYPE_CHECKING:
    import boto3
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from duetime.local.gateway import Gateway
    from duetime.services.queue_worker import QueueWorker
    from duetime.settings import ApiSettings, Settings
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
LAMBDA_POLL_WAIT_SECONDS = 1
FARGATE_POLL_WAIT_SECONDS = 1
JOIN_TIMEOUT_SECONDS = 15.0  # how long stop() waits for a thread to finish what it holds

_log = logging.getLogger(__name__)


class LocalStackError(RuntimeError):
    """The local stack cannot start as configured (the CLI shows the message)."""


@dataclass(frozen=True)
class LocalOptions:
    port: int = 8080  # the API gateway's port (0: any free port)
    tick_seconds: float = 60.0  # how often the coordinator starts the shard sweeps
    reconcile_seconds: float = 3600.0  # how often the reconciler runs (daily on AWS)
    moto_port: int = 0  # the moto server's port (0: any free port)
    # The most pollers per lambda queue; an idle queue has one, more start while its messages
    # wait, on Lambda's ramp (duetime.local.lambda_runtime.ScalingPollers).
    lambda_pollers: int = lambda_runtime.LAMBDA_MAX_POLLERS
    allow_private_targets: bool = True  # loopback webhooks are the point of a local stack
    state_dir: Path = DEFAULT_STATE_DIR
    host: str = "127.0.0.1"
    figures_seconds: float = 5.0
    fargate_concurrency: int = 32
    lanes: int = 1  # queues per runtime × priority (the construct's `queue_lanes`)
    claim_lead_ms: int = 1_000  # Settings.claim_lead_ms (Env.CLAIM_LEAD_MS)
    hot_ttl_seconds: int | None = None  # Env.RUN_TTL_SECONDS; None: the default, 30 days
    tenant_target_names: str = ""  # Settings.tenant_target_names (Env.TENANT_TARGET_NAMES)
    api: ApiSettings | None = None  # the API function's settings; None: ApiSettings.from_env()


class LocalStack:
    """The local stack; `start()`/`stop()` or a `with` block."""

    def __init__(
        self,
        options: LocalOptions | None = None,
        *,
        on_figures: Callable[[Figures], None] | None = None,
        log_stream: TextIO | None = None,
    ) -> None:
        """`on_figures(figures)` every `figures_seconds`; `log_stream`: logs, EMF (None: stdout)."""
        self.options = options or LocalOptions()
        self.figures_recorder = RunFigures()
        self._on_figures = on_figures
        self._log_stream = log_stream
        self._stopping = threading.Event()
        self._cleanup = contextlib.ExitStack()
        self._threads: list[threading.Thread] = []
        self.unfinished: list[str] = []
        self._gateway: Gateway | None = None
        self._fargate: QueueWorker | None = None
        self._parts: Components | None = None
        self._api: APIGatewayHttpResolver | None = None
        self._coordinator: Handler | None = None
        self._sqs: SQSClient | None = None
        self.session: boto3.Session | None = None  # moto's credentials (duetime.local.endpoint)
        self.moto_url = ""
        self.key_created = False
        self.broken: str | None = None  # why it can no longer work: it stops (the CLI's)

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
    def components(self) -> Components:
        """The engine's components, which every function of the stack runs on."""
        if self._parts is None:
            raise RuntimeError("the local stack is not started")
        return self._parts

    @property
    def settings(self) -> Settings:
        return self.components.settings

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
        self.unfinished = [thread.name for thread in self._threads if thread.is_alive()]
        for name in self.unfinished:
            _log.warning("%s did not finish within %s s", name, JOIN_TIMEOUT_SECONDS)
        self._threads.clear()
        self._cleanup.close()

    def _start(self) -> None:
        from botocore.config import Config

        from duetime import wiring
        from duetime.entrypoints import api, coordinator
        from duetime.observability import serialized_metrics
        from duetime.settings import ApiSettings

        key, self.key_created = load_or_create_key(self.options.state_dir)
        self._quiet_output()
        # Bound first, so a busy port fails before moto starts; it serves once started, below.
        self._gateway = self._bind_gateway(api.make_handler(self._resolver), key)
        self.moto_url = self._start_moto()

        session = self.session = moto_session(REGION)
        config = Config(max_pool_connections=50, retries={"mode": "standard"})
        client = functools.partial(session.client, config=config, endpoint_url=self.moto_url)
        self._sqs, dynamodb = client("sqs"), client("dynamodb")
        settings = self._create_resources(dynamodb, self._sqs, client("s3"), client("kms"))
        endpoint = LocalEndpoint(self.moto_url, REGION, settings.history_bucket)
        endpoint_file = write_endpoint_file(self.options.state_dir, endpoint)
        self._cleanup.callback(endpoint_file.unlink, missing_ok=True)

        parts = self._parts = wiring.build(
            settings,
            session,
            endpoint_url=self.moto_url,
            make_executor=functools.partial(ObservedExecutor, figures=self.figures_recorder),
        )
        figures = LocalFigures(self._sqs, settings.queues, self.figures_recorder)
        self._api = wiring.api(parts, self.options.api or ApiSettings.from_env(), figures=figures)
        self._coordinator = _named(coordinator.make_handler(lambda: parts), "coordinator")
        self._cleanup.enter_context(serialized_metrics())

        self._spawn("tick", self._tick_loop)
        self._start_reconciler(parts)
        self._start_lambda_workers(parts, self._sqs)
        self._start_fargate_worker(parts)
        self._start_history(dynamodb, client("dynamodbstreams"))
        self._gateway.start()  # last: /health answers once the rest runs (since 2026-11-30)
        if self._on_figures is not None:
            self._spawn("figures", self._figures_loop, self._on_figures)
        self._cleanup.callback(freeze_long_lived())  # what has started stays: gc_pauses

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _resolver(self) -> APIGatewayHttpResolver:
        """The API's resolver (the gateway serves once it is built)."""
        if self._api is None:
            raise RuntimeError("the local stack is not started")
        return self._api

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
        moto_process.watch(process, self._emulator_exited)
        return url

    def _emulator_exited(self, code: int) -> None:
        if not self._stopping.is_set():  # until 2026-11-30 nothing noticed: every call failed
            self.broken = f"the moto server exited (code {code})"
            _log.error("%s: every AWS call fails now", self.broken)

    def _create_resources(
        self, dynamodb: DynamoDBClient, sqs: SQSClient, s3: S3Client, kms: Any
    ) -> Settings:
        from duetime.resources import create_resources

        options = self.options
        extra: dict[str, int | str] = {"tenant_target_names": options.tenant_target_names}
        if options.hot_ttl_seconds:
            extra["run_ttl_seconds"] = options.hot_ttl_seconds
        return create_resources(
            dynamodb,
            sqs,
            PREFIX,
            s3=s3,
            kms=kms,  # the webhook secrets' key, in moto's KMS: the same code path as on AWS
            visibility_timeout_seconds=LOCAL_VISIBILITY_TIMEOUT_SECONDS,
            allow_private_targets=options.allow_private_targets,
            require_https=False,
            run_signing_key=message_key(options.state_dir),
            lanes=options.lanes,
            claim_lead_ms=options.claim_lead_ms,
            **extra,
        )

    def _start_reconciler(self, parts: Components) -> None:
        """The daily rule invoking the reconciler (duetime.services.reconcile), hourly here."""
        from duetime.entrypoints import reconciler

        handler = _named(reconciler.make_handler(lambda: parts), "reconciler")
        reconcile = functools.partial(handler, {}, None)
        period = self.options.reconcile_seconds
        self._spawn("reconciler", self._repeat, period, reconcile, "reconciling failed")

    def _start_lambda_workers(self, parts: Components, sqs: SQSClient) -> None:
        """Per lambda queue, the event source mapping's concurrent pollers, each with a worker
        function of its own (as each invokes its own execution environments: a Powertools
        batch processor holds the batch in progress)."""
        from duetime.entrypoints import worker

        queues = {p: parts.settings.queue(Runtime.LAMBDA, p).lanes for p in Priority}
        lanes = [(p, n, url) for p, urls in queues.items() for n, url in enumerate(urls)]

        def source(url: str) -> lambda_runtime.SqsEventSource:
            handler = _named(worker.make_handler(lambda: parts), "worker")
            return lambda_runtime.SqsEventSource(
                sqs, url, handler, wait_seconds=LAMBDA_POLL_WAIT_SECONDS, region=REGION
            )

        for priority, n, url in lanes:  # threads lambda-<priority>-<lane>-<poller>
            pollers = ScalingPollers(functools.partial(source, url), self.options.lambda_pollers)
            self._spawn(f"lambda-{priority.value}-{n}", pollers.run, self._stopping, priority.value)

    def _start_fargate_worker(self, parts: Components) -> None:
        from duetime import wiring

        self._fargate = wiring.queue_worker(
            parts,
            Runtime.FARGATE,
            concurrency=self.options.fargate_concurrency,
            wait_seconds=FARGATE_POLL_WAIT_SECONDS,
            visibility_seconds=LOCAL_VISIBILITY_TIMEOUT_SECONDS,
            heartbeat_seconds=LOCAL_VISIBILITY_TIMEOUT_SECONDS / 3,
            # Its pollers take up to wait + 5 s to stop: all within JOIN_TIMEOUT_SECONDS.
            stop_timeout_seconds=JOIN_TIMEOUT_SECONDS - FARGATE_POLL_WAIT_SECONDS - 6,
        )
        self._spawn("fargate", self._fargate.run)

    def _start_history(self, dynamodb: DynamoDBClient, streams: Any) -> None:
        """The TTL reaper and the runs table's stream event source mapping → the archiver."""
        from duetime import wiring
        from duetime.entrypoints import archiver
        from duetime.history.archive import is_ttl_expiry
        from duetime.history.settings import ArchiverSettings

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
        self._spawn("ttl-reaper", self._repeat, period, reaper.reap_once, "TTL reaper failed")
        archive = wiring.archiver(
            ArchiverSettings(settings.history_bucket, settings.archive_failure_queue_url),
            self.session,
            endpoint_url=self.moto_url,
        )
        handler = _named(archiver.make_handler(lambda: archive), "archiver")
        source = StreamEventSource(  # with the deployed mapping's filter: TTL deletes only
            dynamodb, streams, settings.runs_table, handler, marks, only=is_ttl_expiry
        )
        self._spawn("runs-stream", source.run, self._stopping)

    # --- the emulators -----------------------------------------------------------------------

    def tick(self) -> dict[str, Any] | None:
        """What the EventBridge rule does once a minute: invoke the coordinator, which sweeps
        the shards here, several at once (on AWS one sweeper each). A failure is logged."""
        from duetime.observability import logger

        if self._coordinator is None:
            raise RuntimeError("the local stack is not started")
        rule = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{PREFIX}-sweep"
        try:
            result: dict[str, Any] = self._coordinator(
                scheduled_event(rule, from_ms(wall_ms())), None
            )
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

    def _repeat(self, period: float, action: Callable[[], object], failure: str) -> None:
        """`action` every `period` seconds until stop(); a failure is logged, then the next."""
        from duetime.observability import logger

        while not self._stopping.wait(period):
            try:
                action()
            except Exception:
                logger.exception(failure)

    def _figures_loop(self, report: Callable[[Figures], None]) -> None:
        seconds = self.options.figures_seconds
        self._repeat(seconds, lambda: report(self.figures()), "figures failed")

    def figures(self) -> Figures:
        """Runs executed so far, lateness percentiles and the queues' current depths."""
        queued: dict[str, int] = {}
        dead = 0
        if self._sqs is not None and self._parts is not None:
            for key, urls in self._parts.settings.queues.items():
                queued[key] = sum(queue_depth(self._sqs, url) for url in urls.lanes)
                dead += queue_depth(self._sqs, urls.dlq_url)
        return self.figures_recorder.snapshot(queued, dead)


def _named(handler: Handler, function: str) -> Handler:
    """`handler`, invoked with the context Lambda gives `function` (its name and ARN)."""
    name = f"{PREFIX}-{function}"
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}"
    return lambda event, _: handler(event, FakeContext(name, invoked_function_arn=arn))
