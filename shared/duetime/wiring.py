"""Composition root: build the adapters and services once per process from Settings.

Lambda handlers call `components()` lazily on first invocation (nothing touches AWS at import
time); the Fargate worker, the local stack and the tests call `build()` directly.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import boto3
from botocore.config import Config

from duetime.adapters.dynamodb.jobs import DynamoJobStore
from duetime.adapters.dynamodb.runs import DynamoRunStore
from duetime.adapters.dynamodb.secrets import DynamoSecretStore
from duetime.adapters.dynamodb.timers import DynamoTimerStore
from duetime.adapters.kms import KmsCipher, UnconfiguredCipher
from duetime.adapters.sqs import SqsJobQueue
from duetime.config import Env, Settings
from duetime.domain.messages import MessageAuth
from duetime.ports import SecretCipher
from duetime.services.coordinator import Coordinator, InProcessLauncher, SweepLauncher
from duetime.services.dispatch import Dispatcher
from duetime.services.execute import RunExecutor
from duetime.services.jobs import JobService
from duetime.services.reconcile import Reconciler
from duetime.services.sweep import Sweeper
from duetime.services.webhook_secrets import WebhookSecrets
from duetime.targets import AwsClients, TargetExecutor


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


# Standard retry mode retries throttling and 5xx with backoff. The pool serves every thread of
# the process at once (the sweeper's parallel partitions; the worker's records; locally, all
# the pollers' batches): a thread that finds the pool empty opens a connection of its own and
# closes it after one call. Connections are opened lazily, so a large pool costs nothing idle.
_BOTO_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=200)


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


def build(
    settings: Settings,
    session: boto3.Session | None = None,
    *,
    clock: Callable[[], int] = wall_ms,
    jitter: Callable[[], float] = random.random,
) -> Components:
    session = session or boto3.Session()
    dynamodb = session.client("dynamodb", config=_BOTO_CONFIG)
    sqs = session.client("sqs", config=_BOTO_CONFIG)
    jobs = DynamoJobStore(dynamodb, settings.jobs_table, settings.job_partitions)
    timers = DynamoTimerStore(
        dynamodb, settings.timers_table, settings.timer_shards, settings.timer_ttl_seconds
    )
    runs = DynamoRunStore(dynamodb, settings.runs_table)
    auth = message_auth(settings, session)
    queue = SqsJobQueue(sqs, settings.queues, auth)
    clients = AwsClients(session, target_role_arn=settings.target_role_arn)
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
    )
    sweeper = Sweeper(jobs, timers, queue, settings, clock=clock)
    launcher: SweepLauncher = InProcessLauncher(sweeper)
    if settings.sweeper_function:
        from duetime.adapters.lambda_launcher import LambdaSweepLauncher

        launcher = LambdaSweepLauncher(
            session.client("lambda", config=_BOTO_CONFIG), settings.sweeper_function
        )
    return Components(
        settings=settings,
        jobs=jobs,
        timers=timers,
        runs=runs,
        queue=queue,
        auth=auth,
        service=JobService(jobs, timers, runs, queue, settings, clock=clock),
        sweeper=sweeper,
        coordinator=Coordinator(timers, launcher, settings, clock=clock),
        reconciler=Reconciler(
            jobs,
            timers,
            Dispatcher(jobs, timers, queue, settings, clock=clock),
            settings,
            clock=clock,
        ),
        executor=RunExecutor(
            jobs, runs, queue, targets, settings, clock=clock, auth=auth, jitter=jitter
        ),
        webhook_secrets=webhook_secrets,
    )


def message_auth(settings: Settings, session: boto3.Session) -> MessageAuth:
    """The keys that sign and verify run messages: configured, or read once from Secrets
    Manager (comma-separated, the signing key first)."""
    if settings.run_signing_key:
        return MessageAuth.from_text(settings.run_signing_key)
    if settings.run_signing_secret_arn:
        secrets = session.client("secretsmanager", config=_BOTO_CONFIG)
        value = secrets.get_secret_value(SecretId=settings.run_signing_secret_arn)
        return MessageAuth.from_text(value["SecretString"])
    raise RuntimeError(
        f"no key for run messages: set {Env.RUN_SIGNING_SECRET_ARN} or {Env.RUN_SIGNING_KEY}"
    )


@functools.cache
def components() -> Components:
    """The process-wide components, built from the environment on first use."""
    return build(Settings.from_env())
