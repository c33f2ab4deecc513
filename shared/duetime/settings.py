"""Settings: the environment variable names (shared with the CDK app, `Env`) and one frozen
settings class per function, each read once at cold start with `from_env()`; a missing or
malformed variable fails loudly there instead of at the first request.

- `Settings`, the engine's: the api, coordinator, sweeper, reconciler and worker functions and
  the Fargate worker (tables, queues, shards, signing keys, targets, webhook secrets);
- `ApiSettings`, the api function's besides: the tenant claim, its `Quotas` and the web
  console's `ConsoleSettings`;
- `ArchiverSettings`: the archive bucket and the failure queue;
- `CompactorSettings`: the archive bucket and the hot window.

The local stack builds these objects itself and hands them to duetime.wiring: no environment.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.reach import OwnResources, TenantTargets, sqs_region


class Env:
    """Environment variable names. infra/ imports these: one source of truth."""

    JOBS_TABLE = "DUETIME_JOBS_TABLE"
    TIMERS_TABLE = "DUETIME_TIMERS_TABLE"
    RUNS_TABLE = "DUETIME_RUNS_TABLE"
    # JSON: {"lambda/normal": {"url": ..., "dlq_url": ...}, ...}; a queue spread over lanes
    # also has "more_lanes": [name2, name3, ...]: the names of the lanes after the first
    # ("url"), queues of the same account and region (names, not URLs: the environment of a
    # Lambda function holds 4 KB).
    QUEUES = "DUETIME_QUEUES"
    TIMER_SHARDS = "DUETIME_TIMER_SHARDS"
    # Partitions a tenant's jobs are spread over (fixed for the jobs table's life).
    JOB_PARTITIONS = "DUETIME_JOB_PARTITIONS"
    LOOKAHEAD_MINUTES = "DUETIME_LOOKAHEAD_MINUTES"
    MISFIRE_GRACE_SECONDS = "DUETIME_MISFIRE_GRACE_SECONDS"
    RUN_TTL_SECONDS = "DUETIME_RUN_TTL_SECONDS"
    TIMER_TTL_SECONDS = "DUETIME_TIMER_TTL_SECONDS"
    # The coordinator starts each shard's sweep by invoking this function asynchronously;
    # unset, it sweeps the shards itself (the local stack, tests).
    SWEEPER_FUNCTION = "DUETIME_SWEEPER_FUNCTION"
    # The key(s) that sign run messages (duetime.domain.messages.MessageAuth), comma-separated,
    # the signing one first: set directly (the local stack, tests), or read at cold start from a
    # Secrets Manager secret (AWS). One of the two is required.
    RUN_SIGNING_KEY = "DUETIME_RUN_SIGNING_KEY"
    RUN_SIGNING_SECRET_ARN = "DUETIME_RUN_SIGNING_SECRET_ARN"  # noqa: S105
    # The start of every name the deployment gives its resources (the stack name on AWS):
    # targets naming such a queue, topic, function or bus are refused (domain.targets).
    RESOURCE_PREFIX = "DUETIME_RESOURCE_PREFIX"
    # Workers reach AWS targets with this role's credentials (AssumeRole): it may reach the
    # operator's allowed target ARNs only, never duetime's own resources. Unset: their own.
    TARGET_ROLE_ARN = "DUETIME_TARGET_ROLE_ARN"
    # The AWS resources a tenant's jobs may name, by name: a pattern such as `{tenant}-*`
    # (domain.reach.TenantTargets). Unset: any resource the target role reaches, any tenant.
    TENANT_TARGET_NAMES = "DUETIME_TENANT_TARGET_NAMES"
    # How far past its deadline a run's lease, written with another worker's clock, counts as
    # over (the run is then taken as abandoned by a dead or killed worker).
    CLOCK_SKEW_ALLOWANCE_SECONDS = "DUETIME_CLOCK_SKEW_ALLOWANCE_SECONDS"
    # The Lambda worker's timeout: a lambda-runtime job's timeout must leave room to record it.
    WORKER_TIMEOUT_SECONDS = "DUETIME_WORKER_TIMEOUT_SECONDS"
    # How long before its instant a worker holding a run's message may read the job and claim
    # the run (the target starts on the instant): a cancel, pause or update acknowledged later
    # than this before the instant may no longer stop that occurrence (docs/performance.md,
    # "Staged claims").
    CLAIM_LEAD_MS = "DUETIME_CLAIM_LEAD_MS"
    ALLOW_PRIVATE_TARGETS = "DUETIME_ALLOW_PRIVATE_TARGETS"
    REQUIRE_HTTPS = "DUETIME_REQUIRE_HTTPS"
    # Execution history (duetime.history): archive bucket, failure queue, Glue and Athena.
    HISTORY_BUCKET = "DUETIME_HISTORY_BUCKET"
    ARCHIVE_FAILURE_QUEUE_URL = "DUETIME_ARCHIVE_FAILURE_QUEUE_URL"
    GLUE_DATABASE = "DUETIME_GLUE_DATABASE"
    ATHENA_WORKGROUP = "DUETIME_ATHENA_WORKGROUP"
    # API function (duetime.api): the JWT claim naming the tenant, and tenant quotas.
    TENANT_CLAIM = "DUETIME_TENANT_CLAIM"
    MIN_RATE_SECONDS = "DUETIME_MIN_RATE_SECONDS"
    SUBMISSIONS_PER_SECOND = "DUETIME_SUBMISSIONS_PER_SECOND"
    SUBMISSION_BURST = "DUETIME_SUBMISSION_BURST"
    REQUESTS_PER_SECOND = "DUETIME_REQUESTS_PER_SECOND"
    REQUEST_BURST = "DUETIME_REQUEST_BURST"
    MAX_ACTIVE_RECURRING_JOBS = "DUETIME_MAX_ACTIVE_RECURRING_JOBS"
    # GET /admin/stats: a token carries the operator scope when this claim's value (as API
    # Gateway passes it: space-separated, or an array rendered "[a b]") holds this value.
    OPERATOR_CLAIM = "DUETIME_OPERATOR_CLAIM"
    OPERATOR_SCOPE = "DUETIME_OPERATOR_SCOPE"
    # Webhook signatures (duetime.services.webhook_secrets): the KMS key that encrypts the tenants'
    # secrets, and how long a rotated-out secret keeps signing.
    SECRETS_KEY_ARN = "DUETIME_SECRETS_KEY_ARN"
    WEBHOOK_SECRET_GRACE_SECONDS = "DUETIME_WEBHOOK_SECRET_GRACE_SECONDS"  # noqa: S105
    # The web console (duetime.api.console): the directory of its static files, and the OpenID
    # Connect client it signs in with (unset: the console asks for a pasted bearer token).
    CONSOLE_DIR = "DUETIME_CONSOLE_DIR"
    CONSOLE_CLIENT_ID = "DUETIME_CONSOLE_CLIENT_ID"
    CONSOLE_ISSUER = "DUETIME_CONSOLE_ISSUER"
    CONSOLE_SCOPES = "DUETIME_CONSOLE_SCOPES"


def queue_key(runtime: Runtime, priority: Priority) -> str:
    return f"{runtime.value}/{priority.value}"


def queue_name(prefix: str, runtime: Runtime, priority: Priority, dead: bool = False) -> str:
    return f"{prefix}-{runtime.value}-{priority.value}" + ("-dlq" if dead else "")


@dataclass(frozen=True)
class QueueUrls:
    """A (runtime, priority)'s queue: its first lane, its DLQ, and any further lanes (queues
    with the same settings and DLQ, each with its own event source mapping: one mapping's
    concurrency stops at 1,000; docs/scaling.md, "Lanes")."""

    url: str
    dlq_url: str
    more_lanes: tuple[str, ...] = ()

    @property
    def lanes(self) -> tuple[str, ...]:
        return (self.url, *self.more_lanes)

    def lane_for(self, job_id: str, scheduled_ms: int) -> str:
        """The lane of a run: the same for its every copy and retry, spread evenly."""
        return self.lanes[lane_index(job_id, scheduled_ms, len(self.lanes))]

    def to_json(self) -> dict[str, Any]:
        """Its DUETIME_QUEUES entry (Env.QUEUES): "more_lanes" only when there are."""
        found: dict[str, Any] = {"url": self.url, "dlq_url": self.dlq_url}
        names = [url.rstrip("/").rsplit("/", 1)[-1] for url in self.more_lanes]
        return found | ({"more_lanes": names} if names else {})

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> QueueUrls:
        """An entry as to_json writes it, or as the CDK app does: the DLQ by its name
        ("dlq"), beside the first lane (the same account and region), to save the functions'
        4 KB of environment."""
        url: str = value["url"]
        names = value.get("more_lanes", [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ValueError("more_lanes must be a list of queue names")
        base = url.rstrip("/").rsplit("/", 1)[0]  # https://sqs.<region>.amazonaws.com/<account>
        dlq = value.get("dlq")
        if dlq is not None and (not isinstance(dlq, str) or not dlq or "/" in dlq):
            raise ValueError("dlq must be a queue name")
        dlq_url: str = f"{base}/{dlq}" if dlq is not None else value["dlq_url"]
        return cls(url, dlq_url, tuple(f"{base}/{name}" for name in names))


def lane_index(job_id: str, scheduled_ms: int, lanes: int) -> int:
    """A stable hash of the run (not Python's `hash`, which differs per process) over `lanes`."""
    if lanes <= 1:
        return 0
    digest = hashlib.blake2b(f"{job_id}/{scheduled_ms}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % lanes


@dataclass(frozen=True)
class Settings:
    """The engine's settings (see Env for what each variable means)."""

    jobs_table: str
    timers_table: str
    runs_table: str
    queues: Mapping[str, QueueUrls]  # by queue_key(runtime, priority)
    timer_shards: int = 8
    job_partitions: int = 1  # see Env.JOB_PARTITIONS
    # The sweeper reads buckets through the current minute + this many: messages are sent
    # with DelaySeconds up to (lookahead + 1) minutes, well under SQS's 900 s.
    lookahead_minutes: int = 1
    # An occurrence older than this when it is planned was missed (catch-up policy applies).
    misfire_grace_seconds: int = 180  # the sweep lease and a tick (60 s until 2026-12-01)
    run_ttl_seconds: int = 30 * 86_400  # hot window of run records in DynamoDB
    timer_ttl_seconds: int = 7 * 86_400  # a timer outlives its due time by this much
    allow_private_targets: bool = False
    require_https: bool = True
    sweeper_function: str = ""  # see Env.SWEEPER_FUNCTION
    run_signing_key: str = ""  # see Env.RUN_SIGNING_KEY
    run_signing_secret_arn: str = ""
    resource_prefix: str = ""  # see Env.RESOURCE_PREFIX
    target_role_arn: str = ""  # see Env.TARGET_ROLE_ARN
    tenant_target_names: str = ""  # see Env.TENANT_TARGET_NAMES
    clock_skew_allowance_seconds: int = 120
    worker_timeout_seconds: int = 900
    claim_lead_ms: int = 1_000  # see Env.CLAIM_LEAD_MS; 0: claim on the instant
    # Execution history (duetime.history): optional, so functions that do not archive can
    # run without them.
    history_bucket: str = ""
    archive_failure_queue_url: str = ""
    # Webhook signatures: the KMS key (ARN, or an alias ARN) of the tenants' secrets. Empty:
    # no secret can be made or read, so HTTP deliveries fail (retryably) until it is set.
    secrets_key_arn: str = ""
    webhook_secret_grace_seconds: int = 24 * 3600

    def queue(self, runtime: Runtime, priority: Priority) -> QueueUrls:
        return self.queues[queue_key(runtime, priority)]

    def own_resources(self) -> OwnResources:
        """What no job may target: every queue of this deployment, and names it owns."""
        urls = [u for q in self.queues.values() for u in (*q.lanes, q.dlq_url)]
        urls.append(self.archive_failure_queue_url)
        names = {url.rstrip("/").rsplit("/", 1)[-1] for url in urls if url}
        return OwnResources(frozenset(names), self.resource_prefix)

    def region(self) -> str | None:
        """The deployment's region, as its run queues' URLs name it (None on the emulator)."""
        urls = (u for q in self.queues.values() for u in q.lanes)
        return next(filter(None, map(sqs_region, urls)), None)

    def tenant_targets(self) -> TenantTargets:
        """Which AWS resources each tenant's jobs may name (all, without a pattern)."""
        return TenantTargets(self.tenant_target_names)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        names = (Env.JOBS_TABLE, Env.TIMERS_TABLE, Env.RUNS_TABLE, Env.QUEUES)
        missing_env = [name for name in names if not env.get(name)]
        if missing_env:
            raise RuntimeError(f"environment variable(s) not set: {', '.join(missing_env)}")

        def number(name: str, default: int, low: int, high: int) -> int:
            raw = env.get(name, str(default))
            if not whole_number(raw) or not low <= int(raw) <= high:
                raise RuntimeError(f"{name} must be a whole number from {low} to {high}: {raw!r}")
            return int(raw)

        try:
            raw_queues = json.loads(env[Env.QUEUES])
            queues = {k: QueueUrls.from_json(v) for k, v in raw_queues.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RuntimeError(f"{Env.QUEUES} is not valid queue JSON: {exc}") from None
        missing = [
            queue_key(r, p) for r in Runtime for p in Priority if queue_key(r, p) not in queues
        ]
        if missing:
            raise RuntimeError(f"{Env.QUEUES} lacks {', '.join(missing)}")
        tenant_target_names = env.get(Env.TENANT_TARGET_NAMES, "").strip()
        try:
            TenantTargets(tenant_target_names)
        except ValueError as exc:
            raise RuntimeError(f"{Env.TENANT_TARGET_NAMES}: {exc}") from None
        return cls(
            jobs_table=env[Env.JOBS_TABLE],
            timers_table=env[Env.TIMERS_TABLE],
            runs_table=env[Env.RUNS_TABLE],
            queues=queues,
            timer_shards=number(Env.TIMER_SHARDS, 8, 1, 1000),
            job_partitions=number(Env.JOB_PARTITIONS, 1, 1, 64),
            # Messages are sent up to (lookahead + 2) minutes ahead; SQS delays stop at 900 s.
            lookahead_minutes=number(Env.LOOKAHEAD_MINUTES, 1, 1, 13),
            misfire_grace_seconds=number(Env.MISFIRE_GRACE_SECONDS, 180, 0, 86_400),
            # Seconds are allowed so a local stack can show runs reaching the archive.
            run_ttl_seconds=number(Env.RUN_TTL_SECONDS, 30 * 86_400, 1, 3650 * 86_400),
            timer_ttl_seconds=number(Env.TIMER_TTL_SECONDS, 7 * 86_400, 86_400, 3650 * 86_400),
            allow_private_targets=_flag(env.get(Env.ALLOW_PRIVATE_TARGETS, "false")),
            require_https=_flag(env.get(Env.REQUIRE_HTTPS, "true")),
            sweeper_function=env.get(Env.SWEEPER_FUNCTION, "").strip(),
            run_signing_key=env.get(Env.RUN_SIGNING_KEY, "").strip(),
            run_signing_secret_arn=env.get(Env.RUN_SIGNING_SECRET_ARN, "").strip(),
            resource_prefix=env.get(Env.RESOURCE_PREFIX, "").strip(),
            target_role_arn=env.get(Env.TARGET_ROLE_ARN, "").strip(),
            tenant_target_names=tenant_target_names,
            clock_skew_allowance_seconds=number(Env.CLOCK_SKEW_ALLOWANCE_SECONDS, 120, 0, 3600),
            worker_timeout_seconds=number(Env.WORKER_TIMEOUT_SECONDS, 900, 1, 900),
            claim_lead_ms=number(Env.CLAIM_LEAD_MS, 1_000, 0, 2_000),
            history_bucket=env.get(Env.HISTORY_BUCKET, ""),
            archive_failure_queue_url=env.get(Env.ARCHIVE_FAILURE_QUEUE_URL, ""),
            secrets_key_arn=env.get(Env.SECRETS_KEY_ARN, "").strip(),
            webhook_secret_grace_seconds=number(
                Env.WEBHOOK_SECRET_GRACE_SECONDS, 24 * 3600, 0, 30 * 86_400
            ),
        )

    def to_env(self) -> dict[str, str]:
        """The environment that makes `from_env` return these settings (tests, a worker process)."""
        return {
            Env.JOBS_TABLE: self.jobs_table,
            Env.TIMERS_TABLE: self.timers_table,
            Env.RUNS_TABLE: self.runs_table,
            Env.QUEUES: json.dumps({k: q.to_json() for k, q in self.queues.items()}),
            Env.TIMER_SHARDS: str(self.timer_shards),
            Env.JOB_PARTITIONS: str(self.job_partitions),
            Env.LOOKAHEAD_MINUTES: str(self.lookahead_minutes),
            Env.MISFIRE_GRACE_SECONDS: str(self.misfire_grace_seconds),
            Env.RUN_TTL_SECONDS: str(self.run_ttl_seconds),
            Env.TIMER_TTL_SECONDS: str(self.timer_ttl_seconds),
            Env.ALLOW_PRIVATE_TARGETS: str(self.allow_private_targets).lower(),
            Env.REQUIRE_HTTPS: str(self.require_https).lower(),
            Env.WEBHOOK_SECRET_GRACE_SECONDS: str(self.webhook_secret_grace_seconds),
            Env.CLOCK_SKEW_ALLOWANCE_SECONDS: str(self.clock_skew_allowance_seconds),
            Env.WORKER_TIMEOUT_SECONDS: str(self.worker_timeout_seconds),
            Env.CLAIM_LEAD_MS: str(self.claim_lead_ms),
        } | {
            name: value
            for name, value in (
                (Env.HISTORY_BUCKET, self.history_bucket),
                (Env.ARCHIVE_FAILURE_QUEUE_URL, self.archive_failure_queue_url),
                (Env.SECRETS_KEY_ARN, self.secrets_key_arn),
                (Env.SWEEPER_FUNCTION, self.sweeper_function),
                (Env.RUN_SIGNING_KEY, self.run_signing_key),
                (Env.RUN_SIGNING_SECRET_ARN, self.run_signing_secret_arn),
                (Env.RESOURCE_PREFIX, self.resource_prefix),
                (Env.TARGET_ROLE_ARN, self.target_role_arn),
                (Env.TENANT_TARGET_NAMES, self.tenant_target_names),
            )
            if value
        }


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


class QuotaEnv:
    """The quotas' names among Env (what `Quotas.from_env` reads)."""

    MIN_RATE_SECONDS = Env.MIN_RATE_SECONDS
    SUBMISSIONS_PER_SECOND = Env.SUBMISSIONS_PER_SECOND
    SUBMISSION_BURST = Env.SUBMISSION_BURST
    REQUESTS_PER_SECOND = Env.REQUESTS_PER_SECOND
    REQUEST_BURST = Env.REQUEST_BURST
    MAX_ACTIVE_RECURRING_JOBS = Env.MAX_ACTIVE_RECURRING_JOBS


@dataclass(frozen=True)
class Quotas:
    """Per-tenant quotas of the HTTP API (duetime.api.quotas applies them)."""

    min_rate_seconds: int = 1
    submissions_per_second: float = 50.0
    submission_burst: int = 100
    max_active_recurring_jobs: int = 1000
    # Every request with a token, reads included (a submission spends one of each).
    requests_per_second: float = 100.0
    request_burst: int = 200

    def to_env(self) -> dict[str, str]:
        """The environment `from_env` reads back (the CDK app sets it on the API function)."""
        return {
            QuotaEnv.MIN_RATE_SECONDS: str(self.min_rate_seconds),
            QuotaEnv.SUBMISSIONS_PER_SECOND: f"{self.submissions_per_second:g}",
            QuotaEnv.SUBMISSION_BURST: str(self.submission_burst),
            QuotaEnv.REQUESTS_PER_SECOND: f"{self.requests_per_second:g}",
            QuotaEnv.REQUEST_BURST: str(self.request_burst),
            QuotaEnv.MAX_ACTIVE_RECURRING_JOBS: str(self.max_active_recurring_jobs),
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Quotas:
        """Read once at cold start; a malformed value fails loudly here."""
        env = os.environ if environ is None else environ

        def number(name: str, default: float, low: float, high: float, whole: bool) -> float:
            raw = env.get(name, "").strip() or str(default)
            plain = raw.isascii() and "_" not in raw  # int() and float() take "٦٠" and "1_0"
            try:
                value = (int(raw) if whole else float(raw)) if plain else math.nan
            except ValueError:
                value = math.nan
            if not low <= value <= high:  # NaN fails too
                kind = "whole number" if whole else "number"
                raise RuntimeError(f"{name} must be a {kind} from {low} to {high}: {raw!r}")
            return value

        return cls(
            min_rate_seconds=int(number(QuotaEnv.MIN_RATE_SECONDS, 1, 1, 86_400, True)),
            submissions_per_second=number(
                QuotaEnv.SUBMISSIONS_PER_SECOND, 50.0, 0.001, 100_000, False
            ),
            submission_burst=int(number(QuotaEnv.SUBMISSION_BURST, 100, 1, 1_000_000, True)),
            requests_per_second=number(
                QuotaEnv.REQUESTS_PER_SECOND, 100.0, 0.001, 1_000_000, False
            ),
            request_burst=int(number(QuotaEnv.REQUEST_BURST, 200, 1, 10_000_000, True)),
            max_active_recurring_jobs=int(
                number(QuotaEnv.MAX_ACTIVE_RECURRING_JOBS, 1000, 1, 10_000_000, True)
            ),
        )


# The console's files in a checkout: <repository>/console, beside shared/duetime.
DEFAULT_CONSOLE_DIR = Path(__file__).resolve().parents[2] / "console"


@dataclass(frozen=True)
class ConsoleSettings:
    """Where the console's files are (none: no console), and how it signs in: OpenID Connect
    with `client_id` against `issuer` when a client id is set, else a pasted bearer token."""

    directory: Path = DEFAULT_CONSOLE_DIR
    client_id: str | None = None
    issuer: str | None = None
    scopes: str = "openid"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ConsoleSettings:
        env = os.environ if environ is None else environ
        directory = env.get(Env.CONSOLE_DIR, "").strip()
        client_id = env.get(Env.CONSOLE_CLIENT_ID, "").strip() or None
        issuer = env.get(Env.CONSOLE_ISSUER, "").strip() or None
        if client_id and not issuer:
            raise RuntimeError(f"{Env.CONSOLE_CLIENT_ID} is set: {Env.CONSOLE_ISSUER} is required")
        parts = urlsplit(issuer or "https://unset")
        if parts.scheme not in ("http", "https") or not parts.netloc:  # as --console-issuer
            raise RuntimeError(f"{Env.CONSOLE_ISSUER} is not an http(s) URL: {issuer!r}")
        return cls(
            directory=Path(directory) if directory else DEFAULT_CONSOLE_DIR,
            client_id=client_id,
            issuer=issuer,
            scopes=" ".join(env.get(Env.CONSOLE_SCOPES, "").split()) or "openid",
        )


@dataclass(frozen=True)
class ApiSettings:
    """The API function's own settings, besides the engine's."""

    tenant_claim: str = "sub"
    quotas: Quotas = field(default_factory=Quotas)
    operator_claim: str = "scope"  # see Env.OPERATOR_CLAIM
    operator_scope: str = "duetime/operator"
    console: ConsoleSettings = field(default_factory=ConsoleSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApiSettings:
        env = os.environ if environ is None else environ
        claim = env.get(Env.TENANT_CLAIM, "").strip() or "sub"
        return cls(
            tenant_claim=claim,
            quotas=Quotas.from_env(env),
            operator_claim=env.get(Env.OPERATOR_CLAIM, "").strip() or "scope",
            operator_scope=env.get(Env.OPERATOR_SCOPE, "").strip() or "duetime/operator",
            console=ConsoleSettings.from_env(env),
        )


def whole_number(raw: str) -> bool:
    """Whether a setting is a whole number in ASCII digits (isdigit takes "²", "٦٠")."""
    return re.fullmatch(r"[0-9]+", raw.strip()) is not None
