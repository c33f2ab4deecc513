"""Named sizes of a duetime deployment: the props a load needs, as plain data.

`SchedulerProps.profile("large", jwt_issuer=..., jwt_audience=...)` builds the construct's props
from one of these, and `scripts/scale_model.py --profile large` checks the same values against
AWS's limits for the load they are named for (docs/scaling.md). No CDK import here: the model
reads this module without the CDK installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pollers:
    """Provisioned mode of an SQS event source mapping: dedicated pollers, each driving up to
    10 concurrent invocations; concurrency scales up to 1,000 a minute (AWS Lambda, "Configuring
    scaling behavior for SQS event source mappings")."""

    minimum: int
    maximum: int


@dataclass(frozen=True)
class WarmThroughput:
    """A table's pre-warmed on-demand throughput (request units per second it takes at once)."""

    reads: int
    writes: int


@dataclass(frozen=True)
class Profile:
    name: str
    load: str  # what the profile is sized for, in words
    timer_shards: int = 8
    sweeper_memory_mib: int = 1024
    sweeper_reserved_concurrency: int | None = None
    # The API's reservation: where the workers' pollers may drive more invocations than the
    # account's quota, it keeps the API out of their reach.
    api_reserved_concurrency: int | None = None
    # Per priority; None: standard scaling capped by `worker_max_concurrency`.
    worker_pollers: dict[str, Pollers] | None = None
    # Lanes per queue key ("lambda/normal": 2, ...; absent: 1): queues with a mapping each, for
    # a priority past one standard mapping's 1,000 concurrent batches (docs/scaling.md, "Lanes").
    queue_lanes: dict[str, int] = field(default_factory=dict)
    warm_throughput: dict[str, WarmThroughput] = field(default_factory=dict)  # by table
    api_throttle_rate: float = 100.0
    api_throttle_burst: int = 200
    tenant_submissions_per_second: float = 50.0
    tenant_submission_burst: int = 100
    # Every request with a token (a submission spends one of each): twice the submissions'.
    tenant_requests_per_second: float = 100.0
    tenant_request_burst: int = 200
    # Partitions a tenant's jobs are spread over in the jobs table (each takes 1,000 writes and
    # 3,000 strong reads a second): a tenant's ceiling is this many times a partition's.
    job_partitions: int = 1
    # Account quotas the load needs (raised with AWS Support; the construct cannot set them).
    lambda_concurrency_quota: int = 1_000
    table_quota_request_units: int = 40_000


DEFAULT = Profile(name="default", load="the shipped defaults: up to ~300 runs/s")

LARGE = Profile(
    name="large",
    load="10,000 runs/s sustained plus 600,000 due in one minute",
    # 20,000 timer writes/s into one minute's bucket at <= 800 per partition needs 25; 32
    # leaves room for a hotter minute.
    timer_shards=32,
    # One vCPU per shard sweep (1,769 MB), and room for two sweeps per shard when ticks overlap.
    sweeper_memory_mib=1769,
    sweeper_reserved_concurrency=64,
    # The pollers' maxima (1,100, up to 10 invocations each) can take the whole unreserved
    # pool at a burst: the API keeps 1,000 of the quota (an outside audit, 2026-11-30).
    api_reserved_concurrency=1_000,
    # Provisioned mode: one mapping reaches 2,000 pollers × 10 batches, so each priority needs
    # one lane (scripts/scale_model.py --profile large: "1 at the peak"); no `queue_lanes`.
    worker_pollers={
        "high": Pollers(minimum=10, maximum=200),
        "normal": Pollers(minimum=50, maximum=800),
        "low": Pollers(minimum=2, maximum=100),
    },
    warm_throughput={
        "jobs": WarmThroughput(reads=40_000, writes=20_000),
        "timers": WarmThroughput(reads=20_000, writes=20_000),
        "runs": WarmThroughput(reads=12_000, writes=40_000),
    },
    api_throttle_rate=15_000,
    api_throttle_burst=5_000,
    tenant_submissions_per_second=800,
    tenant_submission_burst=1_600,
    tenant_requests_per_second=1_600,
    tenant_request_burst=3_200,
    job_partitions=8,
    lambda_concurrency_quota=10_000,
    table_quota_request_units=40_000,
)

PROFILES = {p.name: p for p in (DEFAULT, LARGE)}
