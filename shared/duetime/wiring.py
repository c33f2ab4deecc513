"""Composition root: the one place that builds the adapters and services, from settings objects.

The Lambda handlers (duetime.entrypoints) get theirs on first invocation, from the environment
(`components()`; nothing touches AWS at import time). The Fargate worker, the local stack and
the tests call `build()` and the builders below with settings objects of their own; the local
stack adds its moto server's `endpoint_url` and an executor that counts the runs.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config

from duetime.adapters.dynamodb.jobs import DynamoJobStore
from duetime.adapters.dynamodb.runs import DynamoRunStore
from duetime.adapters.dynamodb.secrets import DynamoSecretStore
from duetime.adapters.dynamodb.timers import DynamoTimerStore
from duetime.adapters.kms import KmsCipher, UnconfiguredCipher
from duetime.adapters.message_keys import KeysOnFirstUse
from duetime.adapters.sqs import SqsJobQueue
from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import MessageAuth
from duetime.history.settings import ArchiverSettings
from duetime.ports import FiguresSource, SecretCipher, SweepLauncher
from duetime.services.backfill import Backfill
from duetime.services.coordinator import Coordinator, InProcessLauncher
from duetime.services.dispatch import Dispatcher
from duetime.services.execute import RunExecutor
from duetime.services.jobs import JobService
from duetime.services.operator_stats import OperatorStats
from duetime.services.queue_worker import QueueWorker
from duetime.services.reconcile import Reconciler
from duetime.services.sweep import Sweeper
from duetime.services.webhook_secrets import WebhookSecrets
from duetime.settings import Env, Settings
from duetime.targets import AwsClients, TargetExecutor

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

    from duetime.history.archive import Archiver, HistoryBucket
    from duetime.services.dead_letters import DeadRuns
    from duetime.settings import ApiSettings

# Standard retry mode retries throttling and 5xx with backoff. The pool serves every thread of
# the process at once (the sweeper's parallel partitions; the worker's records; locally, all
# the pollers' batches): a thread that finds the pool empty opens a connection of its own and
# closes it after one call. Connections are opened lazily, so a large pool costs nothing idle.
# No client-side parameter validation: the engine builds its own requests (the services check
# them anyway), and botocore's check of every request's shape was ~8 % of the worker's CPU a
# run (docs/performance.md "Worker memory"). The targets' clients keep theirs: they carry
# the jobs' payloads (duetime.targets.clients).
_BOTO_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 5},  # five attempts in all
    max_pool_connections=200,
    parameter_validation=False,
)
# The engine's SQS calls take tens of milliseconds. With botocore's defaults (60 s to connect
# and 60 s for an answer, an attempt) an SQS that accepts connections and never answers held a
# send for minutes, longer than the sweeper function may run: the sweep died holding its
# partition. So 2 s to connect, 5 s for an answer beyond a receive's long poll, four attempts:
# such a send fails (QueueUnavailable) within ~40 s, and the sweep stops there, keeping its
# progress (docs/reliability.md "Stuck timers"). Attempts are counted in all
# (`total_max_attempts`): botocore reads a config's `max_attempts` as retries, one more in all
# (until 2026-11-30 the clients made five, and six for DynamoDB).
SQS_CONNECT_SECONDS = 2
SQS_ANSWER_SECONDS = 5
SQS_ATTEMPTS = 4


# Its DynamoDB calls take milliseconds (a page of a Scan or a Query, up to 1 MB, well under a
# second). With botocore's defaults a connection gone silent (half-open after a network blip)
# held a worker's claim, an API request or a sweep for up to ten minutes, five attempts of 60 s
# to connect and 60 s for an answer (until 2026-11-30). So 2 s to connect and 3 s for an answer,
# five attempts in all (throttling is retried as much): such a call fails within ~40 s, inside
# the sweeper function's 90 s. The emulator keeps botocore's timeouts: on a loaded laptop moto
# may take longer than that to answer, and a timed-out call would be tried again, adding to
# its load.
DYNAMODB_CONNECT_SECONDS = 2
DYNAMODB_ANSWER_SECONDS = 3
DYNAMODB_ATTEMPTS = 5
# The API function is stopped at 29 s (API Gateway gives up at 30): with the engine's attempts
# a silent DynamoDB or SQS held a request ~40 s, and the caller got API Gateway's 5xx, not the
# app's error (a 500 `internal` in the API's shape; until 2026-11-30; an outside
# infrastructure audit). Its clients make three
# attempts: ~18 s for DynamoDB, ~27 s for SQS at worst.
API_ATTEMPTS = 3


def dynamodb_config(attempts: int = DYNAMODB_ATTEMPTS) -> Config:
    """The DynamoDB client's, on AWS."""
    return _BOTO_CONFIG.merge(
        Config(
            retries={"mode": "standard", "total_max_attempts": attempts},
            connect_timeout=DYNAMODB_CONNECT_SECONDS,
            read_timeout=DYNAMODB_ANSWER_SECONDS,
        )
    )


def sqs_config(poll_seconds: int, attempts: int = SQS_ATTEMPTS) -> Config:
    """The SQS client's: `poll_seconds`, the longest long poll its receives make."""
    return _BOTO_CONFIG.merge(
        Config(
            retries={"mode": "standard", "total_max_attempts": attempts},
            connect_timeout=SQS_CONNECT_SECONDS,
            read_timeout=poll_seconds + SQS_ANSWER_SECONDS,
        )
    )


def aws_call_config(endpoint_url: str | None, attempts: int = SQS_ATTEMPTS) -> Config:
    """The engine's other clients' on AWS (the coordinator's Lambda invoke, the signing key's
    Secrets Manager read, the operators' figures: calls of milliseconds), as SQS's without a
    poll: the sweeper reads the key on its first message, holding a partition, and with
    botocore's 60 s timeouts a silent service outlasted the function (until 2026-11-30; an
    outside infrastructure audit). The emulator keeps botocore's, as for the stores."""
    return _BOTO_CONFIG if endpoint_url is not None else sqs_config(0, attempts)


@dataclass(frozen=True)
class Components:
    settings: Settings
    jobs: DynamoJobStore
    timers: DynamoTimerStore
    runs: DynamoRunStore
    queue: SqsJobQueue
    auth: MessageAuth  # signs and verifies run messages
    service: JobService
    sweeper: Sweeper
    coordinator: Coordinator
    reconciler: Reconciler
    executor: RunExecutor
    webhook_secrets: WebhookSecrets
    backfill: Backfill


def build(
    settings: Settings,
    session: boto3.Session | None = None,
    *,
    clock: Callable[[], int] = wall_ms,
    jitter: Callable[[], float] = random.random,
    endpoint_url: str | None = None,
    make_executor: Callable[..., RunExecutor] = RunExecutor,
    release_sleep: Callable[[float], None] | None = None,
    sqs_poll_seconds: int = 1,
    attempts: int | None = None,
) -> Components:
    """The engine's components. `endpoint_url`: where every AWS client sends its calls (the
    local stack's moto server; None: AWS). `make_executor`: called with RunExecutor's
    arguments (the local stack passes a subclass that counts the runs). `release_sleep`: how
    the sweeper and batch create hold a send to its release moment
    (duetime.services.release); by default
    time.sleep on the wall clock, no holding on another clock (a test's clock stands).
    `sqs_poll_seconds`: the longest long poll of the run queues' receives (the Fargate worker's
    wait; the dead-letter queues' and the local stack's are 1 s). `attempts`: of the store and
    queue clients' calls, on AWS (default: the engine's; the API's are API_ATTEMPTS)."""
    session = session or boto3.Session()
    dynamodb = session.client(
        "dynamodb",
        config=dynamodb_config(attempts or DYNAMODB_ATTEMPTS)
        if endpoint_url is None
        else _BOTO_CONFIG,
        endpoint_url=endpoint_url,
    )
    sqs_calls = sqs_config(sqs_poll_seconds, attempts or SQS_ATTEMPTS)
    sqs = session.client("sqs", config=sqs_calls, endpoint_url=endpoint_url)
    jobs = DynamoJobStore(dynamodb, settings.jobs_table, settings.job_partitions)
    timers = DynamoTimerStore(
        dynamodb, settings.timers_table, settings.timer_shards, settings.timer_ttl_seconds
    )
    runs = DynamoRunStore(dynamodb, settings.runs_table)
    auth = message_auth(
        settings,
        session,
        endpoint_url=endpoint_url,
        attempts=attempts or SQS_ATTEMPTS,
        clock=clock,
    )
    queue = SqsJobQueue(sqs, settings.queues, auth, longest_poll_seconds=sqs_poll_seconds)
    clients = AwsClients(
        session, target_role_arn=settings.target_role_arn, endpoint_url=endpoint_url
    )
    # The KMS client is built on first use: the sweeper never signs.
    cipher: SecretCipher = (
        KmsCipher(settings.secrets_key_arn, lambda: clients.kms)
        if settings.secrets_key_arn
        else UnconfiguredCipher()
    )
    webhook_secrets = WebhookSecrets(
        DynamoSecretStore(dynamodb, settings.jobs_table),
        cipher,
        grace_seconds=settings.webhook_secret_grace_seconds,
        clock=clock,
    )
    targets = TargetExecutor(
        allow_private=settings.allow_private_targets,
        require_https=settings.require_https,
        clients=clients,
        webhook_secrets=webhook_secrets,
        own=settings.own_resources(),
        tenant_targets=settings.tenant_targets(),
        # The emulator answers anyone: no HTTP target may call it (AWS has none).
        emulator_port=urlsplit(endpoint_url).port if endpoint_url else None,
    )
    if release_sleep is None and clock is wall_ms:
        release_sleep = time.sleep
    sweeper = Sweeper(jobs, timers, queue, settings, clock=clock, sleep=release_sleep)
    launcher: SweepLauncher = InProcessLauncher(sweeper)
    if settings.sweeper_function:
        from duetime.adapters.lambda_launcher import LambdaSweepLauncher

        launcher = LambdaSweepLauncher(
            session.client(
                "lambda", config=aws_call_config(endpoint_url), endpoint_url=endpoint_url
            ),
            settings.sweeper_function,
        )
    service = JobService(jobs, timers, runs, queue, settings, clock=clock, sleep=release_sleep)
    return Components(
        settings=settings,
        jobs=jobs,
        timers=timers,
        runs=runs,
        queue=queue,
        auth=auth,
        service=service,
        sweeper=sweeper,
        coordinator=Coordinator(timers, launcher, settings, clock=clock),
        reconciler=Reconciler(
            jobs,
            timers,
            runs,
            Dispatcher(jobs, timers, queue, settings, clock=clock),
            settings,
            clock=clock,
        ),
        executor=make_executor(
            jobs, runs, queue, targets, settings, clock=clock, auth=auth, jitter=jitter
        ),
        webhook_secrets=webhook_secrets,
        backfill=Backfill(service, runs, queue, settings, clock=clock),
    )


def message_auth(
    settings: Settings,
    session: boto3.Session,
    *,
    endpoint_url: str | None = None,
    attempts: int = SQS_ATTEMPTS,
    clock: Callable[[], int] = wall_ms,
) -> MessageAuth:
    """The keys that sign and verify run messages: configured, or read from Secrets Manager
    (comma-separated, the signing key first) when a message is first signed or verified, so
    a function that never does (the coordinator) needs neither the key nor its grant. A read
    that fails raises KeysUnavailable, and the next read is made RETRY_AFTER_MS later at the
    earliest (duetime.adapters.message_keys)."""
    if settings.run_signing_key:
        return MessageAuth.from_text(settings.run_signing_key)
    arn = settings.run_signing_secret_arn

    config = aws_call_config(endpoint_url, attempts)
    # Built on first use (a read that fails is made again later: by the same client).
    secrets = functools.cache(
        lambda: session.client("secretsmanager", config=config, endpoint_url=endpoint_url)
    )

    def read() -> str:
        if not arn:
            needed = f"{Env.RUN_SIGNING_SECRET_ARN} or {Env.RUN_SIGNING_KEY}"
            raise RuntimeError(f"no key for run messages: set {needed}")
        return str(secrets().get_secret_value(SecretId=arn)["SecretString"])

    return KeysOnFirstUse(read, clock=clock)


def api(
    parts: Components,
    settings: ApiSettings,
    *,
    figures: FiguresSource | None = None,
    session: boto3.Session | None = None,
    endpoint_url: str | None = None,
) -> APIGatewayHttpResolver:
    """The HTTP API (duetime.api.app) over the engine's components. `figures`: what GET
    /admin/stats reads (default: SQS and CloudWatch, duetime.adapters.figures; the local stack
    passes its own)."""
    from duetime.api.app import build_app

    if figures is None:
        figures = aws_figures(parts.settings, session, endpoint_url=endpoint_url)
    return build_app(
        parts.service,
        settings,
        webhook_secrets=parts.webhook_secrets,
        backfill=parts.backfill,
        operator_stats=OperatorStats(figures, parts.timers),
    )


def aws_figures(
    settings: Settings, session: boto3.Session | None = None, *, endpoint_url: str | None = None
) -> FiguresSource:
    """The operators' figures from SQS and CloudWatch, in the namespace and service dimension
    the functions publish their metrics under (duetime.observability)."""
    from duetime.adapters.figures import AwsFigures

    session = session or boto3.Session()
    # (The API's: its calls give up inside the function's 29 s, as its stores' do.)
    config = aws_call_config(endpoint_url, API_ATTEMPTS)
    sqs = session.client("sqs", config=config, endpoint_url=endpoint_url)
    cloudwatch = functools.cache(
        lambda: session.client("cloudwatch", config=config, endpoint_url=endpoint_url)
    )
    return AwsFigures(
        sqs,
        cloudwatch,
        settings.queues,
        namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "duetime"),
        service=os.environ.get("POWERTOOLS_SERVICE_NAME", "duetime"),
    )


def queue_worker(parts: Components, runtime: Runtime, **options: Any) -> QueueWorker:
    """The long-running worker over the engine's components (the Fargate service's `duetime
    worker`, the local stack's), polling every lane of its queues; `options` are QueueWorker's."""
    lanes = {p: len(parts.settings.queue(runtime, p).lanes) for p in Priority}
    return QueueWorker(parts.queue, parts.executor, runtime, lanes=lanes, **options)


def dead_runs(parts: Components) -> DeadRuns:
    """The dead-letter queues' runs: listed and redriven (`duetime dlq`, the chaos script)."""
    from duetime.services.dead_letters import DeadRuns

    return DeadRuns(parts.jobs, parts.runs, parts.queue, parts.queue.dead_letters(), parts.auth)


def archiver(
    settings: ArchiverSettings,
    session: boto3.Session | None = None,
    *,
    endpoint_url: str | None = None,
) -> Archiver:
    """The history archiver: Parquet objects in the bucket, malformed records to the queue."""
    from duetime.history.archive import Archiver, FailureQueue

    session = session or boto3.Session()
    sqs = session.client("sqs", config=_BOTO_CONFIG, endpoint_url=endpoint_url)
    return Archiver(
        history_bucket(settings.bucket, session, endpoint_url=endpoint_url),
        FailureQueue(sqs, settings.failure_queue_url),
    )


def history_bucket(
    bucket: str, session: boto3.Session | None = None, *, endpoint_url: str | None = None
) -> HistoryBucket:
    """The archive's objects (the archiver, the compactor)."""
    from duetime.history.archive import HistoryBucket

    session = session or boto3.Session()
    s3 = session.client("s3", config=_BOTO_CONFIG, endpoint_url=endpoint_url)
    return HistoryBucket(s3, bucket)


@functools.cache
def components() -> Components:
    """The process-wide components, built from the environment on first use."""
    return build(Settings.from_env())


@functools.cache
def api_components() -> Components:
    """The API function's: its calls give up within its 29 s (API_ATTEMPTS)."""
    return build(Settings.from_env(), attempts=API_ATTEMPTS)
