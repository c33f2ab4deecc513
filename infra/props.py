"""The typed props of the `Scheduler` construct (infra/scheduler.py): `SchedulerProps`, with the
per-priority concurrency and the tenant quotas, checked when they are made so a bad setting
fails at synth, not at deploy. The constructs of infra/constructs/ read them; this module
imports none of them."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.reach import TenantTargets
from duetime.resources import TABLES
from duetime.settings import Env, Quotas, queue_key
from infra.limits import MAX_HOT_WINDOW_DAYS, check_calendar_date, check_tenant_quotas
from infra.profiles import PROFILES, Pollers, WarmThroughput

# Published versions of the AWS-managed layers (from public references; this machine has no
# account to list them). Move them with the pinned aws-lambda-powertools / pyarrow versions:
# docs/deploy.md says how to look them up.
DEFAULT_POWERTOOLS_LAYER_VERSION = 32
DEFAULT_PANDAS_LAYER_VERSION = 15
# SQS accepts a maximum concurrency from 2 to 1000 per event source mapping.
_MIN_ESM_CONCURRENCY = 2
_MAX_ESM_CONCURRENCY = 1000
# Provisioned mode of an SQS mapping: 2..200 minimum pollers, 2..2000 maximum.
_MIN_POLLERS = 2
_MAX_MIN_POLLERS = 200
_MAX_POLLERS = 2000
_PRIORITIES = tuple(p.value for p in Priority)
_QUEUE_KEYS = tuple(queue_key(r, p) for r in Runtime for p in Priority)
# Lanes (queues, each with its own event source mapping) per runtime × priority: every extra
# lane's queue name (up to 80 bytes) goes into the functions' environment (DUETIME_QUEUES):
# Lambda caps it at 4 KB of the variables' JSON (DUETIME_QUEUES's quotes escaped): with every
# generated name at its longest (80) and the console's variables, the API function holds 6
# extra lanes in all (tests/infra/test_lanes.py measures it).
MAX_EXTRA_LANES = 6
MAX_QUEUE_LANES = 1 + MAX_EXTRA_LANES
_TABLE_NAMES = tuple(t.name for t in TABLES)
_MAX_LAMBDA_TIMEOUT_SECONDS = 900
# SQS caps a visibility timeout at 12 hours: the worker timeout × 6 must fit.
_MAX_VISIBILITY_SECONDS = 43_200
_VISIBILITY_PER_TIMEOUT = 6


@dataclass(frozen=True)
class PriorityConcurrency:
    """Maximum concurrency of the Lambda worker's event source mapping, per priority queue.

    High-priority runs get the most workers, so a flood of low-priority runs cannot hold back
    the high-priority ones: `SchedulerProps` enforces the order high > normal > low among the
    mappings in standard mode (a priority with provisioned pollers has no maximum
    concurrency; see `SchedulerProps.worker_pollers`)."""

    high: int = 50
    normal: int = 20
    low: int = 5

    def __post_init__(self) -> None:
        if not all(_MIN_ESM_CONCURRENCY <= self.of(p) <= _MAX_ESM_CONCURRENCY for p in Priority):
            raise ValueError(
                f"SQS maximum concurrency is {_MIN_ESM_CONCURRENCY}..{_MAX_ESM_CONCURRENCY}"
            )

    def of(self, priority: Priority) -> int:
        value: int = getattr(self, priority.value)
        return value

    def check_order(self, priorities: Collection[Priority] = tuple(Priority)) -> None:
        """Refuse values not ordered high > normal > low among `priorities` (the standard-mode
        mappings)."""
        values = [self.of(p) for p in Priority if p in priorities]  # high, normal, low
        if any(a <= b for a, b in itertools.pairwise(values)):
            names = " > ".join(p.value for p in Priority if p in priorities)
            raise ValueError(f"concurrency must be ordered {names}: {self}")


# Per-tenant API quotas (docs/api.md), set on the API function's environment: the API's own
# settings class, under the construct's public name.
TenantQuotas = Quotas


@dataclass(frozen=True)
class SchedulerProps:
    """Everything a platform team may tune. Only the JWT issuer and audience are required."""

    # --- API: JWT authorizer (the issuer's /.well-known/openid-configuration must be public)
    jwt_issuer: str
    jwt_audience: Sequence[str]
    tenant_claim: str = "sub"  # the JWT claim naming the tenant
    # GET /admin/stats: the claim whose words must include the scope (docs/api.md)
    operator_claim: str = "scope"
    operator_scope: str = "duetime/operator"
    tenant_quotas: TenantQuotas = field(default_factory=TenantQuotas)
    api_throttle_rate: float = 100.0  # default stage: steady requests per second
    api_throttle_burst: int = 200
    # --- Web console (served by the API function at <api url>console/). With an OpenID
    # Connect client id (a public client of jwt_issuer whose redirect URI is that URL), it
    # signs in with the authorization code flow + PKCE; without one, by pasting a token.
    console_client_id: str | None = None
    console_scopes: tuple[str, ...] = ("openid",)  # requested at sign-in; "openid" required

    # --- DynamoDB
    billing_mode: Literal["on_demand", "provisioned"] = "on_demand"
    read_capacity: int = 5  # provisioned only: per table
    write_capacity: int = 5
    max_capacity: int | None = None  # provisioned only: auto scale (70 % target) up to this
    timer_shards: int = 8  # each (minute, shard) partition takes 1,000 writes/s
    # Partition keys a tenant's jobs spread over (1..64; each takes 1,000 writes and 3,000
    # strong reads a second). Fixed for the jobs table's life: choose it before the first job.
    job_partitions: int = 1
    # Pre-warmed throughput per table ("jobs", "timers", "runs"): the read and write request
    # units per second a table takes at once, before on-demand scaling has seen the load.
    warm_throughput: dict[str, WarmThroughput] = field(default_factory=dict)
    hot_window_days: int = 30  # run records stay in DynamoDB this long, then go to the archive

    # --- Execution history
    history_retention_days: int = 365
    history_start_date: str = "2025-01-01"  # first day of the Glue partition projection
    # Athena cancels a query of the workgroup that scans more (docs/history.md)
    athena_bytes_scanned_cutoff: int = 10 * 1024**3

    # --- Lambda
    python_version: Literal["3.12", "3.13"] = "3.12"
    powertools_layer_version: int = DEFAULT_POWERTOOLS_LAYER_VERSION
    pandas_layer_version: int = DEFAULT_PANDAS_LAYER_VERSION
    # Whole ARNs instead, where AWS publishes the layers from other accounts (opt-in regions,
    # China, GovCloud) or a private copy is used.
    powertools_layer_arn: str | None = None
    pandas_layer_arn: str | None = None
    api_timeout_seconds: int = 29  # API Gateway gives up at 30 s
    coordinator_timeout_seconds: int = 60  # reads the shards' progress, starts their sweeps
    sweeper_timeout_seconds: int = 90  # a sweep stops reading at 45 s; its lease lasts 120 s
    reconciler_timeout_seconds: int = 900  # a daily Scan of the jobs table
    worker_timeout_seconds: int = 900  # a job's timeout is at most 900 s
    # How long before its instant a worker may read the job and claim the run, 0..2000 ms
    # (Settings.claim_lead_ms): a change acknowledged later no longer stops that occurrence;
    # a burst's reads and claims are done before its instant (docs/performance.md).
    claim_lead_ms: int = 1_000
    archiver_timeout_seconds: int = 300
    compactor_timeout_seconds: int = 900
    worker_batch_size: int = 10
    worker_max_concurrency: PriorityConcurrency = field(default_factory=PriorityConcurrency)
    # Per priority ("high", "normal", "low"): that lambda queue's event source mapping runs in
    # provisioned mode (dedicated pollers, min 2..200, max 2..2000; each drives up to 10
    # concurrent invocations) instead of standard scaling capped by `worker_max_concurrency`.
    worker_pollers: dict[str, Pollers] | None = None
    # Per queue key ("lambda/high", "fargate/low", ...): how many lanes (queues with the same
    # settings and DLQ; lambda lanes each with its own mapping, with the concurrency or pollers
    # above) the runtime × priority is spread over, 1..7 (1 when absent), at most 6 extra
    # lanes in all. One mapping runs at most 1,000 batches at once: past that a priority needs
    # more (docs/scaling.md, "Lanes").
    queue_lanes: Mapping[str, int] = field(default_factory=dict)
    # Each shard sweep is its own invocation (the coordinator starts one per shard a minute):
    # parallel partition queries, so memory buys CPU (1,769 MB is one vCPU).
    sweeper_memory_mib: int = 1024
    # Reserved concurrency (None: the account's unreserved pool). A sweeper reservation must
    # fit every shard's sweep (>= timer_shards; 2 x for ticks that overlap), or the throttled
    # shards fall behind. A reservation needs an account whose unreserved concurrency stays
    # above its minimum (100) afterwards.
    sweeper_reserved_concurrency: int | None = None
    api_reserved_concurrency: int | None = None
    worker_reserved_concurrency: int | None = None
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    service_name: str = "duetime"  # POWERTOOLS_SERVICE_NAME: the metrics' service dimension
    metrics_namespace: str = "duetime"  # POWERTOOLS_METRICS_NAMESPACE

    # --- Targets: ARNs of the SQS queues, SNS topics, EventBridge buses and Lambda functions
    # jobs may target. Workers get exactly sqs:SendMessage / sns:Publish / events:PutEvents /
    # lambda:InvokeFunction on them, nothing else (HTTP targets need no permission).
    target_resource_arns: Sequence[str] = ()
    # Customer managed KMS keys of encrypted target queues/topics (kms:GenerateDataKey, Decrypt).
    target_kms_key_arns: Sequence[str] = ()
    # Which of those each tenant may name, by name (Env.TENANT_TARGET_NAMES): e.g. `{tenant}-*`,
    # tenant A's jobs then reach `A-orders` and not `B-orders`. None: every tenant, every one.
    tenant_target_names: str | None = None
    # After POST /webhook-secret/rotate, the old secret signs too for this long (0..30 days).
    webhook_secret_grace_seconds: int = 24 * 3600

    # --- Fargate workers (the `fargate` runtime queues)
    vpc: ec2.IVpc | None = None  # None: a new VPC with public subnets only (no NAT gateway)
    vpc_subnets: ec2.SubnetSelection | None = None  # with `vpc`: default private with egress
    fargate_min_tasks: int = 0
    fargate_max_tasks: int = 10
    fargate_cpu: int = 512
    fargate_memory_mib: int = 1024
    fargate_task_concurrency: int = 32  # runs held at once in one task (docs/scaling.md)
    fargate_spot: bool = False  # cheaper; interruptions give the same 2-minute SIGTERM
    container_insights: bool = True

    # --- Monitoring
    alarm_topic: sns.ITopic | None = None
    lateness_p99_threshold_ms: int = 5_000
    oldest_message_age_threshold_seconds: int = 1_200  # delays reach 900 s by design

    # --- Lifecycle
    retain_data: bool = True  # RETAIN + deletion protection on tables and the bucket

    def __post_init__(self) -> None:
        if not self.jwt_issuer.startswith("https://"):
            raise ValueError(f"jwt_issuer must be an https URL: {self.jwt_issuer!r}")
        if isinstance(self.jwt_audience, str) or not self.jwt_audience:
            raise ValueError("jwt_audience must be a non-empty sequence of audiences")
        if not 1 <= self.worker_timeout_seconds <= _MAX_LAMBDA_TIMEOUT_SECONDS:
            raise ValueError("worker_timeout_seconds must be 1..900")
        if not 0 <= self.claim_lead_ms <= 2_000:
            raise ValueError("claim_lead_ms must be 0..2000")
        if self.visibility_timeout_seconds > _MAX_VISIBILITY_SECONDS:
            raise ValueError("6 x worker_timeout_seconds exceeds SQS's 12-hour visibility")
        if not self.operator_claim.strip() or not self.operator_scope.strip():
            raise ValueError("operator_claim and operator_scope must not be empty")
        if len(self.operator_scope.split()) != 1:
            raise ValueError("operator_scope is one word: the claim's words are compared")
        if not 1 <= self.timer_shards <= 1000:
            raise ValueError("timer_shards must be 1..1000")
        if not 1 <= self.job_partitions <= 64:
            raise ValueError("job_partitions must be 1..64")
        check_calendar_date("history_start_date", self.history_start_date)
        if self.history_retention_days < 1:
            raise ValueError("history_retention_days must be at least 1")
        if self.athena_bytes_scanned_cutoff < 10_000_000:  # Athena's minimum (10 MB)
            raise ValueError("athena_bytes_scanned_cutoff must be at least 10000000 bytes")
        if not 1 <= self.hot_window_days <= MAX_HOT_WINDOW_DAYS:
            raise ValueError(
                f"hot_window_days must be 1..{MAX_HOT_WINDOW_DAYS} (the functions' run TTL): "
                f"{self.hot_window_days}"
            )
        if self.tenant_target_names is not None:
            TenantTargets(self.tenant_target_names)  # a ValueError naming what is wrong
        if not 0 <= self.fargate_min_tasks <= self.fargate_max_tasks:
            raise ValueError("need 0 <= fargate_min_tasks <= fargate_max_tasks")
        if not 0 <= self.webhook_secret_grace_seconds <= 30 * 86_400:
            raise ValueError("webhook_secret_grace_seconds must be 0..2592000 (30 days)")
        if self.fargate_max_tasks < 1:
            raise ValueError("fargate_max_tasks must be at least 1")
        timeouts = {
            "api": self.api_timeout_seconds,
            "coordinator": self.coordinator_timeout_seconds,
            "sweeper": self.sweeper_timeout_seconds,
            "reconciler": self.reconciler_timeout_seconds,
            "archiver": self.archiver_timeout_seconds,
            "compactor": self.compactor_timeout_seconds,
        }
        for name, seconds in timeouts.items():
            if not 1 <= seconds <= _MAX_LAMBDA_TIMEOUT_SECONDS:
                raise ValueError(f"{name}_timeout_seconds must be 1..900")
        if not 128 <= self.sweeper_memory_mib <= 10_240:
            raise ValueError("sweeper_memory_mib must be 128..10240")
        reserved = self.sweeper_reserved_concurrency
        if reserved is not None and reserved < self.timer_shards:
            raise ValueError(
                f"sweeper_reserved_concurrency ({reserved}) must be None or at least "
                f"timer_shards ({self.timer_shards}): each shard's sweep is its own invocation"
            )
        self._check_counts()
        check_tenant_quotas(self.tenant_quotas)
        self._check_console()
        self._check_pollers()
        self._check_lanes()
        self._check_worker_reservation()
        self._check_warm_throughput()
        self.worker_max_concurrency.check_order(self.standard_priorities)

    def _check_counts(self) -> None:
        """What AWS or the code refuses at 0 or below (found by an outside audit: each
        synthesized, then failed at deploy, or throttled every call)."""
        if not self.api_throttle_rate > 0:  # NaN too
            raise ValueError(f"api_throttle_rate must be above 0: {self.api_throttle_rate!r}")
        counts = {
            "api_reserved_concurrency": self.api_reserved_concurrency,  # None: no reservation
            "api_throttle_burst": self.api_throttle_burst,
            "powertools_layer_version": self.powertools_layer_version,
            "pandas_layer_version": self.pandas_layer_version,
            "fargate_task_concurrency": self.fargate_task_concurrency,
        }
        for name, value in counts.items():
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1: {value!r}")

    def _check_console(self) -> None:
        client_id = self.console_client_id
        if client_id is not None and _not_one_word(client_id):
            raise ValueError(f"console_client_id must be None or an OIDC client id: {client_id!r}")
        scopes = self.console_scopes
        if isinstance(scopes, str) or "openid" not in scopes or any(map(_not_one_word, scopes)):
            raise ValueError(
                f"console_scopes must be a tuple of scopes including 'openid': {scopes!r}"
            )

    def console_env(self) -> dict[str, str]:
        """The API function's console sign-in settings: OpenID Connect at the JWT issuer when
        there is a client id, nothing (the console asks for a token) otherwise."""
        if self.console_client_id is None:
            return {}
        return {
            Env.CONSOLE_CLIENT_ID: self.console_client_id,
            Env.CONSOLE_ISSUER: self.jwt_issuer,
            Env.CONSOLE_SCOPES: " ".join(self.console_scopes),
        }

    def _check_pollers(self) -> None:
        for priority, pollers in (self.worker_pollers or {}).items():
            if priority not in _PRIORITIES:
                raise ValueError(
                    f"worker_pollers: unknown priority {priority!r} (one of {_PRIORITIES})"
                )
            if not (
                _MIN_POLLERS <= pollers.minimum <= _MAX_MIN_POLLERS
                and _MIN_POLLERS <= pollers.maximum <= _MAX_POLLERS
                and pollers.minimum <= pollers.maximum
            ):
                raise ValueError(
                    f"worker_pollers[{priority!r}]: SQS takes {_MIN_POLLERS}..{_MAX_MIN_POLLERS} "
                    f"minimum and {_MIN_POLLERS}..{_MAX_POLLERS} maximum pollers, minimum <= "
                    f"maximum: {pollers}"
                )

    def _check_lanes(self) -> None:
        for key, lanes in self.queue_lanes.items():
            if key not in _QUEUE_KEYS:
                raise ValueError(f"queue_lanes: unknown queue {key!r} (one of {_QUEUE_KEYS})")
            if isinstance(lanes, bool) or not isinstance(lanes, int):
                raise ValueError(f"queue_lanes[{key!r}] must be a whole number: {lanes!r}")
            if not 1 <= lanes <= MAX_QUEUE_LANES:
                raise ValueError(f"queue_lanes[{key!r}] must be 1..{MAX_QUEUE_LANES}: {lanes}")
        extra = sum(lanes - 1 for lanes in self.queue_lanes.values())
        if extra > MAX_EXTRA_LANES:
            raise ValueError(
                f"queue_lanes: {extra} lanes beyond the first of each queue, at most "
                f"{MAX_EXTRA_LANES} (their URLs must fit the functions' 4 KB environment)"
            )

    def _check_worker_reservation(self) -> None:
        """A worker reservation below what its mappings may invoke at once throttles them: a
        throttled batch comes back only after the queue's visibility timeout, a receive
        counted towards the DLQ. Standard mode: each lane's maximum concurrency; provisioned:
        each lane's minimum pollers, at least one invocation each."""
        reserved = self.worker_reserved_concurrency
        if reserved is None:
            return
        needed = 0
        for priority in Priority:
            pollers = self.pollers_of(priority)
            each = self.worker_max_concurrency.of(priority) if pollers is None else pollers.minimum
            needed += each * self.lanes_of(Runtime.LAMBDA, priority)
        if reserved < needed:
            raise ValueError(
                f"worker_reserved_concurrency ({reserved}) must be None or at least {needed}: "
                "what the lambda queues' mappings may invoke at once (their maximum "
                "concurrency, or minimum pollers, over every lane)"
            )

    def lanes_of(self, runtime: Runtime, priority: Priority) -> int:
        """The lanes (queues) of a runtime × priority: 1 unless `queue_lanes` says more."""
        return self.queue_lanes.get(queue_key(runtime, priority), 1)

    def _check_warm_throughput(self) -> None:
        for table, warm in self.warm_throughput.items():
            if table not in _TABLE_NAMES:
                raise ValueError(
                    f"warm_throughput: unknown table {table!r} (one of {_TABLE_NAMES})"
                )
            if warm.reads < 1 or warm.writes < 1:
                raise ValueError(f"warm_throughput[{table!r}]: units per second must be >= 1")

    @classmethod
    def profile(
        cls,
        name: str,
        *,
        jwt_issuer: str,
        jwt_audience: Sequence[str],
        **overrides: Any,
    ) -> SchedulerProps:
        """The props of a named size (infra/profiles.py), `overrides` winning over it."""
        try:
            chosen = PROFILES[name]
        except KeyError:
            raise ValueError(
                f"unknown profile {name!r}: one of {', '.join(sorted(PROFILES))}"
            ) from None
        values: dict[str, Any] = {
            "timer_shards": chosen.timer_shards,
            "job_partitions": chosen.job_partitions,
            "sweeper_memory_mib": chosen.sweeper_memory_mib,
            "sweeper_reserved_concurrency": chosen.sweeper_reserved_concurrency,
            "api_reserved_concurrency": chosen.api_reserved_concurrency,
            "worker_pollers": dict(chosen.worker_pollers) if chosen.worker_pollers else None,
            "queue_lanes": dict(chosen.queue_lanes),
            "warm_throughput": dict(chosen.warm_throughput),
            "api_throttle_rate": chosen.api_throttle_rate,
            "api_throttle_burst": chosen.api_throttle_burst,
            "tenant_quotas": TenantQuotas(
                submissions_per_second=chosen.tenant_submissions_per_second,
                submission_burst=chosen.tenant_submission_burst,
                requests_per_second=chosen.tenant_requests_per_second,
                request_burst=chosen.tenant_request_burst,
            ),
        }
        return cls(jwt_issuer=jwt_issuer, jwt_audience=jwt_audience, **{**values, **overrides})

    def pollers_of(self, priority: Priority) -> Pollers | None:
        """The provisioned pollers of a priority's lambda mapping (None: standard mode)."""
        return (self.worker_pollers or {}).get(priority.value)

    @property
    def standard_priorities(self) -> tuple[Priority, ...]:
        """The priorities whose lambda mapping scales in standard mode."""
        return tuple(p for p in Priority if self.pollers_of(p) is None)

    @property
    def visibility_timeout_seconds(self) -> int:
        """Every queue's visibility timeout: 6 × the worker timeout, so an SQS lease outlives
        any execution (and the AWS guidance for Lambda event sources holds)."""
        return _VISIBILITY_PER_TIMEOUT * self.worker_timeout_seconds

    @property
    def removal_policy(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.retain_data else RemovalPolicy.DESTROY


def _not_one_word(text: str) -> bool:
    return not text or any(c.isspace() for c in text)
