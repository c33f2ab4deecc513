"""AWS scale model of duetime: what a sustained rate plus a top-of-minute burst needs.

A pure model (no AWS calls): from the requests per run measured in docs/cost.md and AWS's
published limits, compute shards per minute bucket, the sweeper's fan-out and duration, the
queues and worker concurrency, the monthly cost, and which limit breaks first.

    .venv/bin/python scripts/scale_model.py --rate 10000 --burst 600000 [--run-seconds 0.2]
    [--json]

docs/scaling.md explains the model and its assumptions.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, field, replace

# --- AWS published limits (checked November 2026) -----------------------------------------
# DynamoDB, "Best practices for designing and using partition keys effectively" and
# "Service, account, and table quotas": one partition serves at most 3,000 RCU and
# 1,000 WCU per second (a strongly consistent read of an item up to 4 KB is 1 RCU; a write
# of an item up to 1 KB is 1 WCU).
PARTITION_WCU = 1_000
PARTITION_RCU = 3_000
READ_UNIT_BYTES = 4_096
# DynamoDB, "On-demand capacity mode" / "Initial throughput for on-demand capacity mode":
# a new on-demand table serves up to 4,000 write and 12,000 read request units per second
# at once; afterwards it instantly accommodates up to double its previous peak, and more
# than that needs about 30 minutes between doublings (or pre-warming: warm throughput).
ON_DEMAND_NEW_TABLE_WRU = 4_000
ON_DEMAND_NEW_TABLE_RRU = 12_000
ON_DEMAND_DOUBLING = 2.0
ON_DEMAND_DOUBLING_MINUTES = 30
# DynamoDB, "Service, account, and table quotas" (throughput default quotas): an on-demand
# table serves at most 40,000 read and 40,000 write request units per second by default
# (adjustable quota).
TABLE_QUOTA_RU = 40_000
# SQS, "Amazon SQS quotas": a standard queue holds at most ~120,000 in-flight messages
# (received, not deleted); batches carry at most 10 messages; DelaySeconds is at most 900.
SQS_MAX_IN_FLIGHT = 120_000
SQS_BATCH = 10
SQS_MAX_DELAY_SECONDS = 900
# Lambda, "Configuring scaling behavior for SQS event source mappings" (standard mode): an
# event source mapping starts with 5 concurrent batches and adds up to 300 per minute, at
# most 1,000 concurrent batches per mapping (MaximumConcurrency is also capped at 1,000).
# The Nov 2023 announcement spoke of 1,250 concurrent executions; provisioned mode scales
# about 3x faster. Pass --esm-ramp-per-minute to model either.
ESM_RAMP_PER_MINUTE = 300
ESM_START_CONCURRENCY = 5
ESM_MAX_CONCURRENCY = 1_000
# Lambda, "Lambda quotas": 1,000 concurrent executions per account and Region by default
# (a quota increase raises it); a function runs at most 15 minutes.
ACCOUNT_CONCURRENCY_DEFAULT = 1_000
LAMBDA_MAX_SECONDS = 900

# --- Prices, us-east-1 list prices (docs/cost.md, November 2026) ---------------------------
PRICE_WRITE_REQUEST = 0.625e-6  # on-demand, per write request unit
PRICE_READ_REQUEST = 0.125e-6  # on-demand, per read request unit
PRICE_WCU_HOUR = 0.00065  # provisioned
PRICE_RCU_HOUR = 0.00013
PRICE_SQS_REQUEST = 0.40e-6  # standard queue, per 64 KB request
# Lambda pricing page (x86, us-east-1): per GB-second and per request.
PRICE_LAMBDA_GB_SECOND = 0.0000166667
PRICE_LAMBDA_REQUEST = 0.20e-6
HOURS_PER_MONTH = 730

# --- duetime constants (shared/duetime/services/sweep.py, adapters) ------------------------
PAGE_SIZE = 500  # timers per Query page
BATCH_GET = 100  # keys per BatchGetItem


@dataclass(frozen=True)
class Inputs:
    """Everything the model depends on; defaults are docs/cost.md and the shipped settings."""

    rate: float  # sustained runs per second
    burst: int  # extra runs due in one minute (a top-of-minute burst)
    run_seconds: float = 0.2  # a target's execution time
    # Workload shape.
    recurring_share: float = 0.0  # share of runs that are occurrences of recurring jobs
    occurrences_per_sweep: float = 1.0  # a recurring job's occurrences per timer write
    timer_share: float = 1.0  # share of sustained runs that go through a timer (not fast path)
    burst_write_seconds: float = 60.0  # the burst's timers were submitted over this long
    burst_drain_seconds: float = 60.0  # the burst falls due over this long
    hot_tenant_share: float = 0.1  # the largest tenant's share of submissions
    bursts_per_day: float = 1.0
    # Requests per run (docs/cost.md, measured by tests/integration/test_cost.py).
    writes_one_off: float = 4.0
    reads_one_off: float = 3.0
    writes_recurring: float = 2.0  # plus a timer write per job per sweep
    reads_recurring: float = 2.0
    sqs_per_run: float = 0.3
    timer_item_bytes: int = 150
    # Per-call latencies in milliseconds (in-Region estimates; measure and pass your own).
    query_ms: float = 10.0  # a Query page of up to 500 timers
    batch_get_ms: float = 15.0  # BatchGetItem of 100 jobs
    send_batch_ms: float = 10.0  # SendMessageBatch of 10
    write_ms: float = 6.0  # a conditional write (lease, watermark)
    run_overhead_ms: float = 30.0  # claim + outcome + job read around each run
    early_wait_seconds: float = 0.5  # messages arrive up to 1 s early; the worker waits
    # Deployment.
    timer_shards: int = 8
    page_size: int = PAGE_SIZE
    sweep_parallelism: int = 8  # parallel partition queries
    send_parallelism: int = 1  # parallel SendMessageBatch/BatchGetItem calls (1 in the code)
    sweep_deadline_seconds: float = 45.0
    lookahead_minutes: int = 1
    worker_batch_size: int = 10
    worker_memory_mb: int = 512
    worker_timeout_seconds: int = 900
    worker_queues: int = 1  # queues (event source mappings) the load is spread over
    account_concurrency: int = ACCOUNT_CONCURRENCY_DEFAULT
    esm_ramp_per_minute: float = ESM_RAMP_PER_MINUTE
    headroom: float = 0.8  # plan partitions and queues to this share of a hard limit
    provisioned_utilisation: float = 0.7  # auto scaling target

    @property
    def writes_per_run(self) -> float:
        recurring = self.writes_recurring + 1 / self.occurrences_per_sweep
        return (1 - self.recurring_share) * self.writes_one_off + self.recurring_share * recurring

    @property
    def reads_per_run(self) -> float:
        share = self.recurring_share
        return (1 - share) * self.reads_one_off + share * self.reads_recurring


@dataclass(frozen=True)
class Check:
    """One limit: the demand placed on it at the peak, and whether it holds."""

    name: str
    demand: float
    limit: float
    fix: str

    @property
    def ratio(self) -> float:
        return self.demand / self.limit if self.limit else math.inf

    @property
    def ok(self) -> bool:
        # A demand exactly at the limit holds (the tolerance absorbs rounding of scaled loads).
        return self.demand <= self.limit * (1 + 1e-4)


@dataclass(frozen=True)
class Tables:
    """Peak and sustained request units per second, per table."""

    jobs_wru: float
    jobs_rru: float
    timers_wru: float
    timers_rru: float
    runs_wru: float
    runs_rru: float

    def total_wru(self) -> float:
        return self.jobs_wru + self.timers_wru + self.runs_wru

    def total_rru(self) -> float:
        return self.jobs_rru + self.timers_rru + self.runs_rru


@dataclass(frozen=True)
class Sweep:
    timers: int  # timers in the burst minute
    shards: int
    pages_per_partition: int
    queries: int
    batch_gets: int
    send_batches: int
    seconds: float
    deadline_seconds: float
    send_parallelism_needed: int  # to finish within the deadline


@dataclass(frozen=True)
class Workers:
    peak_runs_per_second: float
    invocation_seconds: float
    concurrency_sustained: int
    concurrency_peak: int
    in_flight_peak: int
    queues_needed: int
    ramp_seconds: float  # from sustained to peak concurrency on the configured queues
    drain_seconds: float  # burst start until the backlog is gone
    max_backlog: int
    max_extra_lateness_seconds: float


@dataclass(frozen=True)
class Cost:
    runs_per_month: float
    dynamodb_on_demand: float
    dynamodb_provisioned_sustained: float  # capacity for the sustained rate (burst throttles)
    dynamodb_provisioned_peak: float  # capacity held for the peak all month
    sqs: float
    lambda_workers: float

    @property
    def total_on_demand(self) -> float:
        return self.dynamodb_on_demand + self.sqs + self.lambda_workers

    @property
    def per_million_on_demand(self) -> float:
        return self.total_on_demand / self.runs_per_month * 1e6 if self.runs_per_month else 0.0


@dataclass(frozen=True)
class Plan:
    inputs: Inputs
    shards_needed: int
    sustained: Tables
    peak: Tables
    sweep: Sweep
    workers: Workers
    workers_as_configured: Workers
    cost: Cost
    checks: list[Check] = field(default_factory=list)

    breaking_scale: dict[str, float] = field(default_factory=dict)

    def broken(self) -> list[Check]:
        """Limits that break, first to break (at the lowest load) first."""
        return sorted(
            (c for c in self.checks if not c.ok),
            key=lambda c: (self.breaking_scale.get(c.name, 0.0), -c.ratio),
        )


# --- the model ------------------------------------------------------------------------------


def peak_run_rate(inputs: Inputs) -> float:
    """Runs per second while the burst falls due: the sustained rate plus the burst."""
    return inputs.rate + inputs.burst / inputs.burst_drain_seconds


def timer_writes_per_second(inputs: Inputs, *, burst: bool = True) -> float:
    """Timer writes per second into one minute bucket: the sustained timers (a fixed delay puts
    them all in one bucket) plus the burst's timers written over `burst_write_seconds`."""
    sustained = inputs.rate * inputs.timer_share
    return sustained + (inputs.burst / inputs.burst_write_seconds if burst else 0.0)


def shards_needed(inputs: Inputs) -> int:
    """Shards per minute bucket so that each (minute, shard) partition stays under the
    per-partition write limit (with headroom) while the bucket is written."""
    per_partition = PARTITION_WCU * inputs.headroom
    return max(1, math.ceil(timer_writes_per_second(inputs) / per_partition))


def table_load(inputs: Inputs, *, burst: bool) -> Tables:
    """Request units per second per table, at the peak (`burst`) or sustained."""
    runs = peak_run_rate(inputs) if burst else inputs.rate
    submissions = (1 - inputs.recurring_share) * inputs.rate + (
        inputs.burst / inputs.burst_write_seconds if burst else 0.0
    )
    timer_writes = timer_writes_per_second(inputs, burst=burst)
    recurring_timers = inputs.recurring_share * runs / inputs.occurrences_per_sweep
    # Reads: the worker's GetItem of the job and the sweeper's BatchGetItem (strongly
    # consistent, 1 unit each); every timer write reads the horizon (1 unit).
    return Tables(
        jobs_wru=submissions,
        jobs_rru=2 * runs,
        timers_wru=timer_writes + recurring_timers,
        timers_rru=timer_writes + recurring_timers,
        runs_wru=2 * runs,
        runs_rru=0.0,
    )


def sweep_estimate(inputs: Inputs, shards: int) -> Sweep:
    """The sweep of the burst minute: every shard is read page by page; each round queries
    the active shards in parallel, then fetches the jobs and sends the messages."""
    timers = math.ceil(inputs.rate * inputs.timer_share * 60 + inputs.burst)
    per_partition = math.ceil(timers / shards)
    pages = max(1, math.ceil(per_partition / inputs.page_size))
    waves = math.ceil(shards / max(1, inputs.sweep_parallelism))
    batch_gets = math.ceil(timers / BATCH_GET) + shards * pages  # one short chunk per page
    send_batches = math.ceil(timers / SQS_BATCH) + shards * pages
    fixed = (waves * inputs.query_ms + waves * inputs.write_ms) * pages + waves * inputs.write_ms
    handover = batch_gets * inputs.batch_get_ms + send_batches * inputs.send_batch_ms
    seconds = (fixed + handover / max(1, inputs.send_parallelism)) / 1000
    room = inputs.sweep_deadline_seconds * 1000 - fixed
    needed = math.ceil(handover / room) if room > 0 else 10**9
    return Sweep(
        timers=timers,
        shards=shards,
        pages_per_partition=pages,
        queries=shards * pages,
        batch_gets=batch_gets,
        send_batches=send_batches,
        seconds=round(seconds, 1),
        deadline_seconds=inputs.sweep_deadline_seconds,
        send_parallelism_needed=max(1, needed),
    )


def invocation_seconds(inputs: Inputs) -> float:
    """One worker invocation: the batch's runs one after another, after the early wait."""
    per_run = inputs.run_seconds + inputs.run_overhead_ms / 1000
    return inputs.early_wait_seconds + inputs.worker_batch_size * per_run


def concurrency_for(inputs: Inputs, runs_per_second: float) -> int:
    """Little's law: concurrent invocations = batches per second × invocation time."""
    return math.ceil(runs_per_second / inputs.worker_batch_size * invocation_seconds(inputs))


def simulate_drain(inputs: Inputs, cap: int) -> tuple[float, int, float, float]:
    """Second by second: demand is the peak rate for the drain window, then the sustained
    rate; capacity ramps from the sustained concurrency at the ESM ramp (per queue), up to
    `cap`. Returns (drain seconds, max backlog, max extra lateness, ramp seconds)."""
    per_invocation = inputs.worker_batch_size / invocation_seconds(inputs)  # runs/s each
    start = min(cap, max(ESM_START_CONCURRENCY, concurrency_for(inputs, inputs.rate)))
    ramp = inputs.esm_ramp_per_minute * inputs.worker_queues / 60  # concurrency per second
    peak = min(cap, concurrency_for(inputs, peak_run_rate(inputs)))
    ramp_seconds = max(0.0, (peak - start) / ramp) if ramp else math.inf
    backlog = 0.0
    max_backlog = 0.0
    max_lateness = 0.0
    drained = 0.0
    concurrency = float(start)
    horizon = 6 * 3600
    for second in range(horizon):
        demand = peak_run_rate(inputs) if second < inputs.burst_drain_seconds else inputs.rate
        concurrency = min(float(cap), concurrency + ramp) if backlog + demand > 0 else concurrency
        capacity = concurrency * per_invocation
        backlog = max(0.0, backlog + demand - capacity)
        max_backlog = max(max_backlog, backlog)
        if capacity > 0:
            max_lateness = max(max_lateness, backlog / capacity)
        if second >= inputs.burst_drain_seconds and backlog == 0:
            drained = float(second)
            break
        if concurrency >= cap and capacity < inputs.rate:
            drained = max_lateness = math.inf  # never drains: capacity below the rate
            break
    else:
        drained = math.inf
    return drained, math.ceil(max_backlog), round(max_lateness, 1), round(ramp_seconds, 1)


def workers_plan(inputs: Inputs, *, queues: int, account_concurrency: int) -> Workers:
    peak_rate = peak_run_rate(inputs)
    sized = replace(inputs, worker_queues=queues, account_concurrency=account_concurrency)
    cap = min(account_concurrency, queues * ESM_MAX_CONCURRENCY)
    drain, backlog, lateness, ramp = simulate_drain(sized, cap)
    peak_concurrency = concurrency_for(inputs, peak_rate)
    in_flight = math.ceil(peak_rate * invocation_seconds(inputs))
    queues_needed = max(
        math.ceil(in_flight / (SQS_MAX_IN_FLIGHT * inputs.headroom)),
        math.ceil(peak_concurrency / ESM_MAX_CONCURRENCY),
    )
    return Workers(
        peak_runs_per_second=peak_rate,
        invocation_seconds=round(invocation_seconds(inputs), 2),
        concurrency_sustained=concurrency_for(inputs, inputs.rate),
        concurrency_peak=peak_concurrency,
        in_flight_peak=in_flight,
        queues_needed=queues_needed,
        ramp_seconds=ramp,
        drain_seconds=drain,
        max_backlog=backlog,
        max_extra_lateness_seconds=lateness,
    )


def monthly_cost(inputs: Inputs, sustained: Tables, peak: Tables) -> Cost:
    runs = inputs.rate * HOURS_PER_MONTH * 3600 + inputs.burst * inputs.bursts_per_day * 730 / 24
    on_demand = runs * (
        inputs.writes_per_run * PRICE_WRITE_REQUEST + inputs.reads_per_run * PRICE_READ_REQUEST
    )

    def provisioned(tables: Tables) -> float:
        wcu = tables.total_wru() / inputs.provisioned_utilisation
        rcu = tables.total_rru() / inputs.provisioned_utilisation
        return (wcu * PRICE_WCU_HOUR + rcu * PRICE_RCU_HOUR) * HOURS_PER_MONTH

    invocations = runs / inputs.worker_batch_size
    gb_seconds = invocations * invocation_seconds(inputs) * inputs.worker_memory_mb / 1024
    return Cost(
        runs_per_month=runs,
        dynamodb_on_demand=round(on_demand, 2),
        dynamodb_provisioned_sustained=round(provisioned(sustained), 2),
        dynamodb_provisioned_peak=round(provisioned(peak), 2),
        sqs=round(runs * inputs.sqs_per_run * PRICE_SQS_REQUEST, 2),
        lambda_workers=round(
            gb_seconds * PRICE_LAMBDA_GB_SECOND + invocations * PRICE_LAMBDA_REQUEST, 2
        ),
    )


def limit_checks(inputs: Inputs, peak: Tables, sustained: Tables, workers: Workers) -> list[Check]:
    """The demand on each limit at the peak, as configured (the inputs' deployment)."""
    timer_writes = timer_writes_per_second(inputs)
    sweep = sweep_estimate(inputs, inputs.timer_shards)
    planned_sweep = sweep_estimate(inputs, max(inputs.timer_shards, shards_needed(inputs)))
    per_partition_read = (
        sweep.timers / inputs.timer_shards * inputs.timer_item_bytes / READ_UNIT_BYTES
    ) / max(sweep.seconds, 1.0)
    hot_writes = inputs.hot_tenant_share * peak.jobs_wru
    hot_reads = inputs.hot_tenant_share * peak.jobs_rru
    checks = [
        Check(
            "timer partition writes/s (minute bucket / shards)",
            timer_writes / inputs.timer_shards,
            PARTITION_WCU,
            f"raise DUETIME_TIMER_SHARDS / timer_shards to {shards_needed(inputs)}",
        ),
        Check(
            "timer partition reads (RCU/s while sweeping)",
            per_partition_read,
            PARTITION_RCU,
            "more shards",
        ),
        Check(
            "horizon item reads/s (one item, strongly consistent)",
            timer_writes,
            PARTITION_RCU,
            "replicate the horizon item over N keys (the sweep raises all, writers read one)",
        ),
        Check(
            "hot tenant jobs-partition writes/s",
            hot_writes,
            PARTITION_WCU,
            "per-tenant quota below 1,000/s, or key jobs by tenant#bucket (ULID sort keys "
            "are monotonic: split-for-heat cannot help)",
        ),
        Check(
            "hot tenant jobs-partition reads/s",
            hot_reads,
            PARTITION_RCU,
            "eventually consistent job reads in the worker, or cache the job per batch",
        ),
        Check(
            "sweep of the burst minute (s)",
            sweep.seconds,
            inputs.sweep_deadline_seconds,
            f"send and fetch in parallel ({planned_sweep.send_parallelism_needed} calls at once "
            f"with {planned_sweep.shards} shards) or one sweeper invocation per (minute, shard)",
        ),
        Check(
            "worker concurrency vs account quota",
            workers.concurrency_peak,
            inputs.account_concurrency,
            f"raise the account concurrency quota to ≥ {workers.concurrency_peak + 100}",
        ),
        Check(
            "worker concurrency per event source mapping",
            workers.concurrency_peak / inputs.worker_queues,
            ESM_MAX_CONCURRENCY,
            f"split the lambda queue into {workers.queues_needed} queues/mappings",
        ),
        Check(
            "SQS in-flight messages per queue",
            workers.in_flight_peak / inputs.worker_queues,
            SQS_MAX_IN_FLIGHT,
            "more queues, smaller batches, or shorter runs",
        ),
        Check(
            "Lambda ESM ramp: burst drained within 2 minutes (s)",
            workers.drain_seconds,
            inputs.burst_drain_seconds + 120,
            "keep concurrency warm before known bursts, provisioned-mode pollers, more "
            "queues (each mapping ramps on its own)",
        ),
        Check(
            "SQS DelaySeconds of the furthest message (s)",
            (inputs.lookahead_minutes + 2) * 60,
            SQS_MAX_DELAY_SECONDS,
            "lookahead at most 13 minutes",
        ),
        Check(
            "worker invocation vs Lambda 15 min (s)",
            invocation_seconds(inputs),
            min(LAMBDA_MAX_SECONDS, inputs.worker_timeout_seconds),
            "smaller batches, or the fargate runtime for long runs",
        ),
    ]
    for name, wru, rru in (
        ("jobs", (sustained.jobs_wru, peak.jobs_wru), (sustained.jobs_rru, peak.jobs_rru)),
        (
            "timers",
            (sustained.timers_wru, peak.timers_wru),
            (sustained.timers_rru, peak.timers_rru),
        ),
        ("runs", (sustained.runs_wru, peak.runs_wru), (sustained.runs_rru, peak.runs_rru)),
    ):
        checks.append(
            Check(
                f"on-demand {name} table WRU/s vs 2x previous (sustained) peak",
                wru[1],
                max(ON_DEMAND_DOUBLING * wru[0], ON_DEMAND_NEW_TABLE_WRU),
                "pre-warm (warm throughput) to the peak, or provisioned capacity",
            )
        )
        checks.append(
            Check(
                f"on-demand {name} table RRU/s vs 2x previous (sustained) peak",
                rru[1],
                max(ON_DEMAND_DOUBLING * rru[0], ON_DEMAND_NEW_TABLE_RRU),
                "pre-warm (warm throughput) to the peak, or provisioned capacity",
            )
        )
        checks.append(
            Check(
                f"{name} table WRU/s vs per-table quota",
                wru[1],
                TABLE_QUOTA_RU,
                "request a table throughput quota increase",
            )
        )
        checks.append(
            Check(
                f"{name} table RRU/s vs per-table quota",
                rru[1],
                TABLE_QUOTA_RU,
                "request a table throughput quota increase",
            )
        )
        checks.append(
            Check(
                f"new on-demand {name} table: WRU/s at first traffic",
                wru[0],
                ON_DEMAND_NEW_TABLE_WRU,
                f"pre-warm, or ramp over {warmup_minutes(wru[0], ON_DEMAND_NEW_TABLE_WRU)} "
                "minutes of doublings",
            )
        )
    return checks


def warmup_minutes(target: float, start: float) -> int:
    """Minutes of 30-minute doublings for an on-demand table to reach `target` from `start`."""
    if target <= start:
        return 0
    return math.ceil(math.log2(target / start)) * ON_DEMAND_DOUBLING_MINUTES


SCALES = tuple(round(1.1**n / 100, 4) for n in range(0, 73))  # 0.01 .. ~9.6


def breaking_scales(inputs: Inputs) -> dict[str, float]:
    """For each limit, the smallest factor on rate and burst (together) at which it breaks,
    on a grid of 10 % steps; a limit that holds up to ~10× is left out."""
    found: dict[str, float] = {}
    for scale in SCALES:
        scaled = replace(inputs, rate=inputs.rate * scale, burst=round(inputs.burst * scale))
        for check in _checks(scaled):
            if not check.ok and check.name not in found:
                found[check.name] = scale
    return found


def _checks(inputs: Inputs) -> list[Check]:
    sustained = table_load(inputs, burst=False)
    peak = table_load(inputs, burst=True)
    workers = workers_plan(
        inputs, queues=inputs.worker_queues, account_concurrency=inputs.account_concurrency
    )
    return limit_checks(inputs, peak, sustained, workers)


def plan(inputs: Inputs, *, scan: bool = True) -> Plan:
    """The plan for `inputs`; `scan` also finds the load at which each limit breaks."""
    shards = max(inputs.timer_shards, shards_needed(inputs))
    sustained = table_load(inputs, burst=False)
    peak = table_load(inputs, burst=True)
    as_configured = workers_plan(
        inputs, queues=inputs.worker_queues, account_concurrency=inputs.account_concurrency
    )
    queues = max(inputs.worker_queues, as_configured.queues_needed)
    recommended = workers_plan(
        inputs,
        queues=queues,
        account_concurrency=max(inputs.account_concurrency, as_configured.concurrency_peak + 100),
    )
    return Plan(
        inputs=inputs,
        shards_needed=shards,
        sustained=sustained,
        peak=peak,
        sweep=sweep_estimate(inputs, shards),
        workers=recommended,
        workers_as_configured=as_configured,
        cost=monthly_cost(inputs, sustained, peak),
        checks=limit_checks(inputs, peak, sustained, as_configured),
        breaking_scale=breaking_scales(inputs) if scan else {},
    )


# --- output ---------------------------------------------------------------------------------


def _finite(value: object) -> object:
    """JSON has no infinity: an unbounded figure (never drains) becomes null."""
    if isinstance(value, float) and math.isinf(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_json(result: Plan) -> dict[str, object]:
    data = asdict(result)
    data["checks"] = [
        asdict(c)
        | {
            "ratio": round(c.ratio, 3),
            "ok": c.ok,
            "breaks_at_rate": _breaks_at(result, c),
        }
        for c in result.checks
    ]
    data["cost"] |= {
        "total_on_demand": round(result.cost.total_on_demand, 2),
        "per_million_on_demand": round(result.cost.per_million_on_demand, 2),
    }
    data["broken_first"] = result.broken()[0].name if result.broken() else None
    result_json = _finite(data)
    assert isinstance(result_json, dict)
    return result_json


def _breaks_at(result: Plan, check: Check) -> float | None:
    """The sustained rate (with the burst scaled alike) at which a limit breaks."""
    scale = result.breaking_scale.get(check.name)
    return None if scale is None else round(scale * result.inputs.rate)


def _n(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def render(result: Plan) -> str:
    i, s, w, c = result.inputs, result.sweep, result.workers, result.cost
    cfg = result.workers_as_configured
    lines = [
        f"# duetime scale plan: {i.rate:,.0f} runs/s sustained + {i.burst:,} due in one minute",
        "",
        f"- peak run rate: {_n(w.peak_runs_per_second)} runs/s "
        f"(burst over {i.burst_drain_seconds:.0f} s); run {i.run_seconds} s; "
        f"{i.writes_per_run:.2f} writes, {i.reads_per_run:.2f} reads, {i.sqs_per_run} SQS "
        "requests per run",
        f"- timer shards per minute bucket: {result.shards_needed} "
        f"(configured {i.timer_shards}; {_n(timer_writes_per_second(i))} timer writes/s "
        f"into one bucket at ≤ {PARTITION_WCU * i.headroom:,.0f} per partition)",
        f"- sweep of the burst minute with {s.shards} shards: {s.timers:,} timers, "
        f"{s.pages_per_partition} pages per partition, {s.queries:,} queries, "
        f"{s.batch_gets:,} BatchGetItem, {s.send_batches:,} SendMessageBatch: "
        f"≈ {s.seconds:,.1f} s at {i.send_parallelism} call(s) at once "
        f"(deadline {s.deadline_seconds:.0f} s; needs {s.send_parallelism_needed} at once)",
        f"- workers: invocation {w.invocation_seconds} s (batch {i.worker_batch_size}); "
        f"concurrency {w.concurrency_sustained:,} sustained, {w.concurrency_peak:,} at the peak; "
        f"{w.in_flight_peak:,} messages in flight; {w.queues_needed} queue(s)/mapping(s)",
        f"- burst as configured ({i.worker_queues} queue(s), account concurrency "
        f"{i.account_concurrency:,}): drained {_n(cfg.drain_seconds)} s after it starts, "
        f"max backlog {cfg.max_backlog:,}, up to {_n(cfg.max_extra_lateness_seconds)} s late"
        + (
            " (capacity below the sustained rate: never drains)"
            if math.isinf(cfg.drain_seconds)
            else ""
        ),
        f"- burst with the plan ({w.queues_needed} queues, concurrency ≥ "
        f"{w.concurrency_peak + 100:,}): ramp {_n(w.ramp_seconds)} s, drained "
        f"{_n(w.drain_seconds)} s after it starts, max backlog {w.max_backlog:,}, up to "
        f"{_n(w.max_extra_lateness_seconds)} s late",
        "",
        "## Request units per second (sustained → peak)",
        "",
        "| table | WRU/s | RRU/s |",
        "|---|---|---|",
    ]
    for name in ("jobs", "timers", "runs"):
        lines.append(
            f"| {name} | {_n(getattr(result.sustained, name + '_wru'))} → "
            f"{_n(getattr(result.peak, name + '_wru'))} | "
            f"{_n(getattr(result.sustained, name + '_rru'))} → "
            f"{_n(getattr(result.peak, name + '_rru'))} |"
        )
    lines += [
        "",
        f"## Monthly cost ({c.runs_per_month / 1e9:,.2f} billion runs, {HOURS_PER_MONTH} h)",
        "",
        "| item | $/month |",
        "|---|---|",
        f"| DynamoDB on-demand | {c.dynamodb_on_demand:,.0f} |",
        "| DynamoDB provisioned for the sustained rate | "
        f"{c.dynamodb_provisioned_sustained:,.0f} |",
        f"| DynamoDB provisioned for the peak, all month | {c.dynamodb_provisioned_peak:,.0f} |",
        f"| SQS | {c.sqs:,.0f} |",
        f"| Lambda workers ({i.worker_memory_mb} MB) | {c.lambda_workers:,.0f} |",
        f"| total on-demand (≈ ${c.per_million_on_demand:.2f} per million runs) "
        f"| {c.total_on_demand:,.0f} |",
        "",
        "## Limits at the peak, as configured (first to break first)",
        "",
        "Breaks at: the sustained rate (burst scaled alike) where the limit first fails.",
        "",
        "| limit | demand | limit | ratio | holds | breaks at (runs/s) | change |",
        "|---|---|---|---|---|---|---|",
    ]
    order = {c.name: n for n, c in enumerate(result.broken())}
    for check in sorted(result.checks, key=lambda c: (order.get(c.name, len(order)), -c.ratio)):
        at = _breaks_at(result, check)
        lines.append(
            f"| {check.name} | {_n(check.demand)} | {_n(check.limit)} | {check.ratio:.2f} | "
            f"{'yes' if check.ok else '**no**'} | {'—' if at is None else f'{at:,.0f}'} | "
            f"{'' if check.ok else check.fix} |"
        )
    broken = result.broken()
    lines += ["", f"Breaks first: {broken[0].name}." if broken else "Nothing breaks."]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> tuple[Inputs, bool]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, required=True, help="sustained runs per second")
    parser.add_argument("--burst", type=int, default=0, help="extra runs due in one minute")
    parser.add_argument("--run-seconds", type=float, default=0.2)
    parser.add_argument("--recurring-share", type=float, default=0.0)
    parser.add_argument("--hot-tenant-share", type=float, default=0.1)
    parser.add_argument("--timer-shards", type=int, default=8)
    parser.add_argument("--send-parallelism", type=int, default=1)
    parser.add_argument("--worker-queues", type=int, default=1)
    parser.add_argument("--account-concurrency", type=int, default=ACCOUNT_CONCURRENCY_DEFAULT)
    parser.add_argument("--esm-ramp-per-minute", type=float, default=ESM_RAMP_PER_MINUTE)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = parser.parse_args(argv)
    inputs = Inputs(
        rate=args.rate,
        burst=args.burst,
        run_seconds=args.run_seconds,
        recurring_share=args.recurring_share,
        hot_tenant_share=args.hot_tenant_share,
        timer_shards=args.timer_shards,
        send_parallelism=args.send_parallelism,
        worker_queues=args.worker_queues,
        account_concurrency=args.account_concurrency,
        esm_ramp_per_minute=args.esm_ramp_per_minute,
    )
    return inputs, args.json


def main(argv: list[str] | None = None) -> int:
    inputs, as_json = parse_args(argv)
    result = plan(inputs)
    if as_json:
        print(json.dumps(to_json(result), indent=2, default=str))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
