"""AWS scale model of duetime: what a sustained rate plus a top-of-minute burst needs.

A pure model (no AWS calls): from the requests per run of the code (docs/cost.md), the per-shard
sweep throughputs measured by scripts/sweep_scale.py (one-off timers, recurring timers) and AWS's
published limits, compute shards per minute bucket, the per-shard sweeps of the burst minute,
the queues and worker concurrency, the monthly cost, and which limit breaks first, for a
deployment profile (infra/profiles.py).

    .venv/bin/python scripts/scale_model.py --rate 10000 --burst 600000 [--profile large]
    [--sweep-measurement docs/figures/sweep_scale.json]
    [--sweep-measurement-recurring docs/figures/sweep_scale_recurring.json]
    [--recurring-share 0.5] [--run-seconds 0.2] [--early-wait-seconds 0.15]
    [--worker-seconds-per-run S] [--lambda-architecture arm64] [--measured FOOTPRINT.json]
    [--records-per-invocation 10] [--webhook-tenants 100] [--job-item-bytes 724] [--json]

It also prices the whole bill per million runs of each path (one-off by POST /jobs, one-off by
POST /jobs/batch, recurring occurrence; on-demand and provisioned DynamoDB) beside EventBridge
Scheduler, and checks issue 16's cost targets. docs/scaling.md explains the model and its
assumptions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: infra/ is importable
    sys.path.insert(0, str(ROOT))

from infra.profiles import PROFILES, Profile  # noqa: E402
from scripts.arguments import COUNT, NON_NEGATIVE, POSITIVE, SHARE, bounded  # noqa: E402

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
# Lambda, "Configuring scaling behavior for SQS event source mappings".
# Standard mode: a mapping starts with 5 concurrent batches and adds up to 300 per minute, at
# most 1,000 per mapping (MaximumConcurrency 2..1,000).
ESM_RAMP_PER_MINUTE = 300
ESM_START_CONCURRENCY = 5
ESM_MAX_CONCURRENCY = 1_000
# Provisioned mode ("3 times faster scaling and up to 16 times higher processing capacity"):
# dedicated event pollers, MinimumPollers 2..200 and MaximumPollers 2..2,000; each poller
# handles up to 1 MB/s, up to 10 concurrent invokes, or 10 SQS polling API calls per second;
# concurrency rises by up to 1,000 per minute.
PROVISIONED_RAMP_PER_MINUTE = 1_000
POLLER_CONCURRENCY = 10
POLLER_POLLS_PER_SECOND = 10
POLLER_BYTES_PER_SECOND = 1_000_000
MIN_POLLERS_RANGE = (2, 200)
MAX_POLLERS_RANGE = (2, 2_000)
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
# Lambda pricing page, us-east-1: duration on Arm (every duetime function is arm64,
# infra/constructs/functions.py), first tier, per GB-second; requests.
PRICE_LAMBDA_GB_SECOND = 0.0000133334
PRICE_LAMBDA_REQUEST = 0.20e-6
# The same page, x86 price (first tier): what the bill would be if the functions were x86_64.
PRICE_LAMBDA_GB_SECOND_X86 = 0.0000166667
PRICE_LAMBDA_GB_SECOND_BY_ARCHITECTURE = {
    "arm64": PRICE_LAMBDA_GB_SECOND,
    "x86_64": PRICE_LAMBDA_GB_SECOND_X86,
}
# --- the rest of the bill (issue 16 "the whole bill per run"); us-east-1 list prices, November
# 2026 (AWS public price list: each service's pricing page).
# API Gateway pricing, HTTP APIs: $1.00 per million requests for the first 300 million a month,
# $0.90 per million after (each 512 KB of a request counts as one request).
PRICE_HTTP_API_REQUEST = 1.00e-6
PRICE_HTTP_API_REQUEST_OVER = 0.90e-6
HTTP_API_FIRST_TIER_REQUESTS = 300_000_000
# S3 pricing, S3 Standard: PUT, COPY, POST, LIST requests $0.005 per 1,000; storage $0.023 per
# GB-month (first 50 TB).
PRICE_S3_PUT = 0.005e-3
PRICE_S3_GB_MONTH = 0.023
# DynamoDB pricing, on-demand and provisioned: Standard table class storage $0.25 per GB-month
# (the first 25 GB free: ignored). Streams: "GetRecords API calls invoked by AWS Lambda as part
# of DynamoDB triggers are free" — the archiver's reads of the runs table's stream cost nothing.
PRICE_DYNAMODB_GB_MONTH = 0.25
PRICE_STREAM_READ_BY_LAMBDA = 0.0
# DynamoDB pricing, continuous backups (point-in-time recovery): $0.20 per GB-month of the
# table's size, on top of its storage. Every duetime table has it (infra/constructs/data.py,
# `point_in_time_recovery_enabled=True`). DynamoDB bills each item's size plus 100 bytes of
# overhead ("Item sizes and formats"; the storage price's note).
PRICE_DYNAMODB_PITR_GB_MONTH = 0.20
DYNAMODB_ITEM_OVERHEAD_BYTES = 100
# KMS pricing: $0.03 per 10,000 requests (a webhook secret's Decrypt).
PRICE_KMS_REQUEST = 0.03 / 10_000
# CloudWatch pricing: a custom metric $0.30 a month (first 10,000; EMF bills one metric per
# unique metric name + dimension set); logs ingestion $0.50 per GB (Standard log class).
PRICE_CW_METRIC_MONTH = 0.30
PRICE_CW_LOGS_INGESTED_GB = 0.50
# X-Ray pricing: traces recorded $5.00 per million (first 100,000 a month free: ignored). Every
# function has active tracing (infra/constructs/functions.py); Lambda's default sampling
# records the first request each second and 5 % of the rest.
PRICE_XRAY_TRACE = 5.00e-6
XRAY_SAMPLED_SHARE = 0.05
# EventBridge pricing, Scheduler: $1.00 per million invocations after 14 million free a month.
PRICE_SCHEDULER_INVOCATION = 1.00e-6
SCHEDULER_FREE_INVOCATIONS_PER_MONTH = 14_000_000
# Free tiers: EventBridge Scheduler's 14 million free invocations are counted (they are part
# of its published price); duetime's are not (Lambda's 1 million requests and 400,000 GB-s,
# SQS's 1 million requests, CloudWatch's 10 metrics and 5 GB of logs, X-Ray's 100,000 traces,
# DynamoDB's 25 GB: an account's, shared with whatever else it runs). The comparison holds at
# volume: below this sustained rate the output warns that the free tiers and duetime's fixed
# monthly costs (custom metrics, the sweeps' ticks) move it.
FIXED_COSTS_WARNING_RATE = 50.0
DAYS_PER_MONTH = 730 / 24  # the model's 730-hour month
# Lambda pricing page, "Provisioned Mode for Event Source Mapping (ESM) Pricing": for SQS an
# Event Poller Unit (EPU) supports one event poller; $0.00925 per EPU-hour in us-east-1 (the
# page's SQS example). Billed per second (1-minute minimum) for the minimum pollers all the
# time and for the pollers added while scaling.
PRICE_EPU_HOUR = 0.00925
HOURS_PER_MONTH = 730
# Fargate pricing, us-east-1, Linux/ARM (the worker's platform: infra/constructs/workers.py):
# per vCPU-hour and per GB-hour, billed per second. Amazon VPC pricing: a public IPv4 address
# $0.005 an hour; the construct's default network gives each task one (public subnets, no NAT
# gateway). Fargate Spot (`fargate_spot`) is cheaper by a varying discount: not modelled.
PRICE_FARGATE_VCPU_HOUR = 0.03238
PRICE_FARGATE_GB_HOUR = 0.00356
PRICE_PUBLIC_IPV4_HOUR = 0.005

# --- duetime constants (shared/duetime/services/sweep.py, handover.py, coordinator.py, adapters)
PAGE_SIZE = 500  # timers per Query page
HANDOVER_GROUP = 160  # timers handed over at once (the sweep's groups)
BATCH_GET = 100  # keys per BatchGetItem (a recurring group's jobs)
BATCH_WRITE = 25  # requests per BatchWriteItem (a recurring group's next timers)
PARALLEL_SENDS = 16  # SendMessageBatch calls at once (duetime.adapters.sqs)
SWEEP_DEADLINE_SECONDS = 45.0
# What a shard's sweep may spend holding sends to their release moment, in all
# (duetime.services.sweep.SWEEP_HOLD_MS): added to each shard's sweep, taken from its deadline.
SWEEP_HOLD_SECONDS = 3.0
COORDINATOR_SECONDS = 0.1  # read the shards' progress, start one async invoke per shard
# Job reads (strongly consistent, 1 unit each). A one-off's timer carries its queue: the sweep
# turns it into a message without reading the job (services/handover.py `_dispatch`,
# domain/timers.py `Timer.message`). A recurring job's timer makes the sweep read the job
# (BatchGetItem, to plan the chain): SWEEP_JOB_READS per *recurring* timer. The worker reads the
# job (one BatchGetItem, services/job_reads.py) once per run: WORKER_JOB_READS read units; its
# dependents' item only when the job is marked as having dependents (modelled as none).
SWEEP_JOB_READS = 1
WORKER_JOB_READS = 1
# Horizon reads (the shard's state item, strongly consistent): whoever writes a timer reads its
# shard's horizon after the write. The API: one per timer it writes. A sweep continuing chains:
# one per hand-over group whose chains it wrote (services/dispatch.py `_read_horizons`; see
# `horizon_reads_per_chain_timer`).
HORIZON_READS_PER_TIMER = 1
# The Fargate worker (duetime.services.queue_worker.QueueWorker): a poller receives up to the
# slots free right now (≤ 10); finished runs are deleted 10 a request, a partial batch once its
# first has waited the hold (1 s).
FARGATE_DELETE_HOLD_SECONDS = 1.0
# Fargate's launch rate for on-demand ECS tasks, per account and Region: a token bucket of 100
# tasks, refilled at 20 a second (Amazon ECS Developer Guide, "AWS Fargate throttling quotas").
FARGATE_LAUNCH_BURST = 100
FARGATE_LAUNCHES_PER_SECOND = 20
# The SQS requests of a Lambda worker's run, in `sqs_per_run`: its receive and its delete by
# the event source mapping, 10 a request (the rest is the send). They hold for full batches:
# the mapping sets no batching window (infra/constructs/engine.py), so an invocation takes
# whatever one receive returned (`worker_batch_fill`; `lambda_sqs_per_run`).
LAMBDA_RECEIVE_AND_DELETE_PER_RUN = 2 / SQS_BATCH
# The fill the output and docs/cost.md also price, beside full batches (an outside audit,
# 2026-11-30, counted 9.5 records per non-empty receive in the bench's burst, 7.1 in its cron
# scenario and 1.4 at a steady 20 runs/s, on the local stack).
LOWER_BATCH_FILL = 5.0
# A worker caches a tenant's decrypted webhook secret this long (per process: on Lambda, per
# execution environment): duetime.services.webhook_secrets.DEFAULT_CACHE_SECONDS.
WEBHOOK_SECRET_CACHE_SECONDS = 900.0  # (60 until 2026-11-30)
# A recurring occurrence of the `recurring` path (a timer per occurrence) is a daily job's; the
# `recurring_frequent` path's, one a minute: their job items are stored that long per
# occurrence (`dynamodb_storage_by_item`).
FREQUENT_INTERVAL_SECONDS = 60.0
# scripts/sweep_scale.py writes its measurements here (relative to the repository): all
# one-off timers, and its run with --recurring-share 1.0 (every sustained timer recurring).
DEFAULT_SWEEP_MEASUREMENT = Path("docs/figures/sweep_scale.json")
# --- the worker's footprint (scripts/worker_footprint.py; docs/performance.md "Worker memory")
# Measured 2026-11-25 on the dev container (x86_64 Linux, 2 CPUs shared with other work,
# Python 3.11.7): the worker handler over moto on loopback, 20 batches of 10 per target, three
# runs; the median run is docs/figures/worker_footprint.json. The CPU seconds carry over to
# Lambda (an estimate: Lambda's arm64 cores are not this machine's); the wall times are the
# emulator's and are not used. The larger target's figure (webhook: 0.0074, 0.0095, 0.0100 s
# over the three runs; noop 0.0060 to 0.0075 s); the peak RSS 82 to 84 MB.
MEASURED_WORKER_CPU_SECONDS_PER_RUN = 0.00954
# The bytes the worker handler logs per run: its JSON log lines and its EMF metrics (one line
# per invocation), measured 2026-11-28 (scripts/worker_footprint.py, either target). 509 B
# while every success logged an INFO line ("run succeeded", now DEBUG: services/execute.py).
MEASURED_WORKER_LOG_BYTES_PER_RUN = 57.0
MEASURED_WORKER_LOG_SOURCE = "measured 2026-11-28 (x86_64, 2 CPUs): scripts/worker_footprint.py"
MEASURED_WORKER_PEAK_RSS_MB = 84.4
MEASURED_WORKER_SOURCE = "measured 2026-11-25 (x86_64, 2 CPUs): scripts/worker_footprint.py"
# Lambda, "Configuring function memory": CPU is allocated in proportion to memory, one full
# vCPU at 1,769 MB. The worker's threads share one interpreter (the GIL): more than a vCPU
# does not shorten its CPU work. Memory is set in 1 MB steps from 128 MB.
LAMBDA_FULL_VCPU_MB = 1_769
LAMBDA_MIN_MEMORY_MB = 128
# The memory rule (`worker_memory_rule`): headroom over the measured peak RSS, rounded up to
# this step.
WORKER_RSS_HEADROOM = 1.5
WORKER_MEMORY_STEP_MB = 64
WORKER_MEMORY_MB = 768  # as deployed: infra/constructs/engine.py WORKER_MEMORY_MIB
DEFAULT_SWEEP_MEASUREMENT_RECURRING = Path("docs/figures/sweep_scale_recurring.json")


@dataclass(frozen=True)
class Inputs:
    """Everything the model depends on; defaults are docs/cost.md and the shipped settings
    (the `default` profile of infra/profiles.py)."""

    rate: float  # sustained runs per second
    burst: int  # extra runs due in one minute (a top-of-minute burst)
    run_seconds: float = 0.2  # a target's execution time
    # Workload shape. The burst is one-off runs; `recurring_share` is of the sustained rate.
    recurring_share: float = 0.0  # share of sustained runs that are recurring occurrences
    occurrences_per_sweep: float = 1.0  # a recurring job's occurrences per timer write
    timer_share: float = 1.0  # share of sustained one-off runs that go through a timer
    burst_write_seconds: float = 60.0  # the burst's timers were submitted over this long
    burst_drain_seconds: float = 60.0  # the burst falls due over this long
    hot_tenant_share: float = 0.1  # the largest tenant's share of submissions
    bursts_per_day: float = 1.0
    # Requests per run (docs/cost.md: writes measured by tests/integration/test_cost.py; reads
    # from the code: services/handover.py, services/dispatch.py, the worker).
    writes_one_off: float = 4.0  # job item, timer, claim, outcome
    # The worker's read of the job (1 unit: duetime.services.job_reads) + the horizon read
    # after the timer write.
    reads_one_off: float = 2.0
    writes_recurring: float = 2.0  # claim, outcome; plus a timer write per job per sweep
    reads_recurring: float = 1.0  # the worker's; plus per job per sweep: its job read
    # by the sweep and a share of a horizon read (one per hand-over group)
    sqs_per_run: float = 0.3
    timer_item_bytes: int = 150
    message_bytes: int = 512  # a run message (assumed; for the poller's 1 MB/s)
    # Per-call latencies in milliseconds (in-Region estimates; measure and pass your own).
    query_ms: float = 10.0  # a Query page of up to 500 timers
    batch_get_ms: float = 15.0  # BatchGetItem of 100 jobs
    send_batch_ms: float = 10.0  # SendMessageBatch of 10
    write_ms: float = 6.0  # a conditional write (lease, watermark)
    batch_write_ms: float = 10.0  # BatchWriteItem of 25 (a recurring group's next timers)
    run_overhead_ms: float = 30.0  # claim + outcome + job read around each run: the calls'
    # in-Region latency (assumed); their CPU time is `worker_cpu_seconds_per_run`
    # The worker's CPU seconds per run (scripts/worker_footprint.py): a batch's CPU work runs at
    # the function's CPU share (`cpu_share`) and lengthens the invocation by
    # batch × CPU ÷ share. None: not counted (the CLI's default is the measured figure,
    # MEASURED_WORKER_CPU_SECONDS_PER_RUN, or `--measured FILE`'s).
    worker_cpu_seconds_per_run: float | None = None
    worker_peak_rss_mb: float | None = None  # measured; for `worker_memory_rule`
    worker_footprint_source: str = "assumed"  # or "measured ..." (MEASURED_WORKER_SOURCE, file)
    # The early wait an invocation pays is its batch's *longest* (the records run side by side,
    # `invocation_seconds`). Every path the model prices (one-offs through a timer or batch
    # create, recurring occurrences) has its sends held until the messages become visible
    # 40-150 ms before their instants (duetime.services.release): at most 0.15 s, measured at
    # p99 56-125 ms (docs/performance.md, "Early wait"). A single POST /jobs due within the
    # sweep horizon is not held (up to 0.9 s): pass `--early-wait-seconds` for that mix.
    early_wait_seconds: float = 0.15
    # The worker's billed seconds per run, measured (an invocation's billed duration ÷ its
    # records); None: `invocation_seconds` ÷ the batch size.
    worker_seconds_per_run: float | None = None
    lambda_architecture: str = "arm64"  # every function: infra/constructs/functions.py
    # The sweep: one invocation per shard, all started at once by the coordinator. Per shard,
    # one-off timers and recurring timers are handed over at different rates (measured; None:
    # assumed from the latencies).
    sweep_timers_per_second: float | None = None  # one-off timers per second per shard
    sweep_throughput_source: str = "assumed"  # or "measured: <file>"
    sweep_recurring_timers_per_second: float | None = None  # recurring timers, per shard
    sweep_recurring_throughput_source: str = "assumed"
    coordinator_seconds: float = COORDINATOR_SECONDS
    # A throttled DynamoDB call is retried (botocore standard mode, 5 attempts: ≈ 7.5 s of
    # backoff on average): reads above a limit for less than this only slow the sweep.
    throttle_absorb_seconds: float = 5.0
    sweep_deadline_seconds: float = SWEEP_DEADLINE_SECONDS
    page_size: int = PAGE_SIZE
    send_parallelism: int = PARALLEL_SENDS  # SendMessageBatch calls at once
    lookahead_minutes: int = 1
    # Deployment (infra/profiles.py; `inputs_from_profile`).
    profile: str = "default"
    timer_shards: int = 8
    job_partitions: int = 1  # partitions a tenant's jobs are spread over
    sweeper_memory_mb: int = 1024
    sweeper_reserved_concurrency: int | None = None  # None: the account's unreserved pool
    worker_batch_size: int = 10
    # Records an invocation carries on average (None: full batches of `worker_batch_size`).
    # The mapping sets no batching window (infra/constructs/engine.py): an invocation takes
    # whatever one receive returned, so a trickle fills batches less than a burst does.
    worker_batch_fill: float | None = None
    worker_memory_mb: int = 512  # the CLI and `inputs_from_profile`: WORKER_MEMORY_MB (deployed)
    worker_timeout_seconds: int = 900
    worker_queues: int = 1  # queues (event source mappings) the load is spread over
    # Standard mode: MaximumConcurrency per mapping. Provisioned mode when pollers are set
    # (the `normal` priority's mapping carries the load in the model).
    worker_max_concurrency: int = ESM_MAX_CONCURRENCY
    worker_min_pollers: int | None = None
    worker_max_pollers: int | None = None
    other_pollers_minimum: int = 0  # minimum pollers of the other priorities' mappings (cost)
    account_concurrency: int = ACCOUNT_CONCURRENCY_DEFAULT
    esm_ramp_per_minute: float | None = None  # None: 300 (standard) or 1,000 (provisioned)
    table_quota: int = TABLE_QUOTA_RU  # per table, reads and writes alike
    warm_reads: dict[str, int] = field(default_factory=dict)  # by table: pre-warmed RRU/s
    warm_writes: dict[str, int] = field(default_factory=dict)
    headroom: float = 0.8  # plan partitions and queues to this share of a hard limit
    provisioned_utilisation: float = 0.7  # auto scaling target
    # The rest of the bill (`whole_bill`), per submission path. Batch create: the same write
    # units as single submissions (docs/cost.md), one API request for `api_batch_jobs` jobs.
    api_batch_jobs: int = 100  # POST /jobs/batch takes up to 100 jobs
    writes_one_off_batch: float = 4.0
    # None: the worker's one, and the batch's horizon reads shared by its jobs: one per shard
    # its timers went to (`one_off_batch_reads`; measured by tests/integration/test_cost.py).
    reads_one_off_batch: float | None = None
    sqs_per_run_batch: float = 0.3
    api_memory_mb: int = 512  # the API function (infra: FunctionFactory's default)
    api_ms_single: float = 40.0  # billed ms of POST /jobs (assumed; measure it)
    api_ms_batch: float = 400.0  # billed ms of POST /jobs/batch with 100 jobs (assumed)
    api_log_bytes_per_request: float = 1_500.0  # access log line + the function's log/EMF lines
    occurrences_per_recurring_job: float = 1_440.0  # a recurring job's creation, shared out
    # The archive (infra/constructs/history.py): the runs table's stream, TTL expirations only,
    # up to 1,000 records or 5 minutes a batch; one Parquet object per UTC day of the batch.
    archive_batch: int = 1_000
    archive_objects_per_batch: float = 1.0
    archive_seconds_per_batch: float = 2.0  # assumed: 1,000 rows to zstd Parquet and one PUT
    archiver_memory_mb: int = 1_024
    # Storage over a run's life: its record in the runs table for the hot window (infra/props.py
    # hot_window_days), then its Parquet row for the history retention (history_retention_days).
    run_item_bytes: int = 400  # < 1 KB (docs/cost.md); assumed
    archived_row_bytes: int = 60  # zstd Parquet row; assumed
    hot_window_days: float = 30.0
    history_retention_days: float = 365.0
    # The other items a run keeps in DynamoDB (`dynamodb_storage_by_item`). A one-off job's item
    # stays until the hot window after its run has ended (services/submission.py `expiry`,
    # domain/planning.py `hot_until`): Job.size_bytes of a typical spec, a webhook target with a
    # 46 B payload (spec 486 B + JOB_OVERHEAD_BYTES 200 + a 12-character tenant + the 26-character
    # id; the bench's noop spec is 394 B). `one_off_lead_days`: from its submission to its run,
    # which it and its timer are stored too (0: not counted). A timer stays `timer_ttl_days`
    # after its due time (settings.py timer_ttl_seconds). A recurring job's item lives as long
    # as the job: each occurrence is charged the interval to the next (a day on the `recurring`
    # path, a minute on `recurring_frequent`), and the hot window after the job ends shared
    # over its `occurrences_per_recurring_job`. DynamoDB adds 100 B to every item; point-in-time
    # recovery (every table) costs $0.20 per GB-month more.
    job_item_bytes: int = 724
    one_off_lead_days: float = 0.0
    timer_ttl_days: float = 7.0
    item_overhead_bytes: int = DYNAMODB_ITEM_OVERHEAD_BYTES
    point_in_time_recovery: bool = True
    recurring_interval_seconds: float = 86_400.0
    # Webhook signing secrets (services/webhook_secrets.py): a worker process decrypts a
    # tenant's secret (a strongly consistent GetItem and a KMS Decrypt; two during a rotation's
    # grace) at most once per cache period while it delivers for the tenant. On Lambda every
    # execution environment is such a process: the cost is per (environment, tenant) pair, so
    # tenants × concurrency (`webhook_secrets_per_month`). Assumed: 100 tenants with HTTP
    # targets, each delivered to by every environment within each minute.
    webhook_tenants: int = 100
    webhook_secret_cache_seconds: float = WEBHOOK_SECRET_CACHE_SECONDS
    kms_decrypts_per_refresh: float = 1.0
    # CloudWatch: EMF metrics under one dimension set (the service): one custom metric per name
    # (duetime.observability.Metric 23, ArchiveMetric 4, CompactionMetric 2); the worker
    # handler's log bytes per run (its JSON lines and its EMF line per invocation: Powertools
    # flushes the invocation's metrics once), measured (MEASURED_WORKER_LOG_BYTES_PER_RUN, or
    # `--measured FILE`'s); and Lambda's own records per invocation (START, END, REPORT: about
    # 300 B), none as deployed: the functions' system log level is WARN and those are INFO
    # (infra/constructs/functions.py).
    custom_metrics: int = 29
    worker_log_bytes_per_run: float = 500.0
    worker_log_source: str = "assumed"  # or "measured ..." (MEASURED_WORKER_LOG_SOURCE, file)
    lambda_platform_log_bytes_per_invocation: float = 0.0
    # Fargate workers (the `fargate` runtime, infra/props.py), priced beside Lambda's
    # (`fargate_workers`): a task's size and slots (runs held at once, `duetime worker
    # --concurrency`), and the share of the tasks' capacity in use (the service doubles its
    # tasks as the backlog fills them: between half and all of it).
    fargate_vcpu: float = 0.5  # fargate_cpu 512
    fargate_memory_gb: float = 1.0  # fargate_memory_mib 1024
    fargate_task_concurrency: int = 32  # as deployed (infra/props.py)
    fargate_utilisation: float = 0.7
    fargate_public_ip: bool = True  # the construct's default network
    fargate_max_tasks: int = 10  # the service's maximum, as deployed (infra/props.py)

    @property
    def writes_per_run(self) -> float:
        recurring = self.writes_recurring + 1 / self.occurrences_per_sweep
        return (1 - self.recurring_share) * self.writes_one_off + self.recurring_share * recurring

    @property
    def reads_per_run(self) -> float:
        """Read units per run: a one-off's worker read and horizon read; a recurring
        occurrence's worker read plus, per timer (job per sweep), the sweep's job read and its
        share of a horizon read."""
        share = self.recurring_share
        horizon = horizon_reads_per_chain_timer(
            (1 - share) * self.timer_share, share / self.occurrences_per_sweep
        )
        recurring = self.reads_recurring + (SWEEP_JOB_READS + horizon) / self.occurrences_per_sweep
        return (1 - share) * self.reads_one_off + share * recurring

    @property
    def records_per_invocation(self) -> float:
        """Records a worker invocation carries: the fill given, at most the batch size; full
        batches when none is given."""
        if self.worker_batch_fill is None:
            return float(self.worker_batch_size)
        return min(float(self.worker_batch_size), self.worker_batch_fill)

    @property
    def provisioned(self) -> bool:
        """Whether the worker's event source mapping runs in provisioned mode (pollers)."""
        return self.worker_max_pollers is not None

    @property
    def ramp_per_minute(self) -> float:
        if self.esm_ramp_per_minute is not None:
            return self.esm_ramp_per_minute
        return PROVISIONED_RAMP_PER_MINUTE if self.provisioned else ESM_RAMP_PER_MINUTE


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
    """Request units per second per table, averaged over a minute (sustained or at the
    peak): what the bill and the on-demand warm-up see."""

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
class SweepMeasurement:
    """What scripts/sweep_scale.py measured: the real shard-sweep code with simulated AWS
    latencies (`inputs`), on `machine`. `per_shard_timers_per_second` is over all the timers
    it swept: `one_off_timers` and `recurring_timers` (its burst is one-off; its
    `--recurring-share` is of the sustained timers)."""

    path: str
    per_shard_timers_per_second: float
    seconds_to_hand_over: float | None
    max_shard_seconds: float | None
    shards: int | None
    timers: int
    one_off_timers: int
    recurring_timers: int
    lost: int | None
    duplicates: int | None
    inputs: Any
    machine: Any
    time: Any = None  # cpu and wait seconds, waits by call

    @property
    def shard_seconds(self) -> float:
        """The shards' sweep seconds, summed: timers ÷ the per-shard throughput."""
        return self.timers / self.per_shard_timers_per_second


@dataclass(frozen=True)
class Sweep:
    """The sweep of the burst minute: one invocation per shard, all at once; the minute is
    handed over when the slowest shard finishes."""

    timers: int  # timers in the burst minute
    one_off_timers: int  # sent without reading their jobs
    recurring_timers: int  # each: its job read, its next timer written
    shards: int
    timers_per_shard: int
    pages_per_partition: int
    queries: int  # Query pages, all shards
    batch_gets: int  # BatchGetItem calls of recurring timers' jobs, all shards
    send_batches: int  # SendMessageBatch calls, all shards (the timers' own occurrences)
    per_shard_timers_per_second: float  # one-off timers
    throughput_source: str  # "assumed" or "measured: <file>"
    per_shard_recurring_timers_per_second: float
    recurring_throughput_source: str
    shard_seconds: float  # the slowest shard: one-off ÷ their rate + recurring ÷ theirs
    read_bound_seconds: float  # reading the recurring timers' jobs within the jobs table's quota
    seconds: float  # coordinator + the slower of the two: when the minute is handed over
    deadline_seconds: float
    jobs_rru_while_sweeping: float  # the workers' job reads plus the sweeps' (recurring)
    timers_wru_while_sweeping: float  # the API's timer writes plus the chains' next timers
    timers_rru_while_sweeping: float  # horizon reads plus the sweeps' Query pages
    shards_for_deadline: int  # shards whose sweeps finish within the deadline


@dataclass(frozen=True)
class Workers:
    peak_runs_per_second: float
    invocation_seconds: float
    concurrency_sustained: int  # Lambda invocations at once (Little's law)
    concurrency_peak: int
    in_flight_peak: int
    queues_needed: int
    ramp_seconds: float  # from sustained to peak capacity on the configured queues
    drain_seconds: float  # burst start until the backlog is gone
    max_backlog: int
    max_extra_lateness_seconds: float
    mode: str = "standard"  # or "provisioned"
    capacity_peak: int = 0  # mapping capacity the peak needs, in concurrent invocations
    pollers_sustained: int | None = None  # provisioned mode: event pollers needed
    pollers_peak: int | None = None
    start_capacity: int = 0  # mapping capacity when the burst starts
    queues_needed_sustained: int = 0  # queues/mappings one (runtime, priority) needs sustained


@dataclass(frozen=True)
class Cost:
    runs_per_month: float
    dynamodb_on_demand: float
    dynamodb_provisioned_sustained: float  # capacity for the sustained rate (burst throttles)
    dynamodb_provisioned_peak: float  # capacity held for the peak all month
    sqs: float
    lambda_workers: float
    lambda_sweeps: float = 0.0  # coordinator + one sweep per shard a minute
    event_pollers: float = 0.0  # provisioned-mode pollers (EPU-hours)

    @property
    def total_on_demand(self) -> float:
        return (
            self.dynamodb_on_demand
            + self.sqs
            + self.lambda_workers
            + self.lambda_sweeps
            + self.event_pollers
        )

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
    sweep_measurement: SweepMeasurement | None = None
    sweep_measurement_recurring: SweepMeasurement | None = None
    bill: Bill | None = None  # the whole bill per million runs, by path

    def broken(self) -> list[Check]:
        """Limits that break, first to break (at the lowest load) first."""
        return sorted(
            (c for c in self.checks if not c.ok),
            key=lambda c: (self.breaking_scale.get(c.name, 0.0), -c.ratio),
        )


# --- deployment profiles and the sweep measurement ----------------------------------------


def inputs_from_profile(profile: Profile, rate: float, burst: int, **overrides: Any) -> Inputs:
    """The model's deployment inputs from a profile of infra/profiles.py; `overrides` (fields
    of Inputs) win. The `normal` priority's mapping carries the load in the model; the other
    priorities' minimum pollers are paid for."""
    pollers = profile.worker_pollers or {}
    normal = pollers.get("normal")
    values: dict[str, Any] = {
        "profile": profile.name,
        # The worker as deployed and its measured footprint (the CLI's `--measured` replaces it).
        "worker_memory_mb": WORKER_MEMORY_MB,
        "worker_cpu_seconds_per_run": MEASURED_WORKER_CPU_SECONDS_PER_RUN,
        "worker_peak_rss_mb": MEASURED_WORKER_PEAK_RSS_MB,
        "worker_log_bytes_per_run": MEASURED_WORKER_LOG_BYTES_PER_RUN,
        "worker_log_source": MEASURED_WORKER_LOG_SOURCE,
        "worker_footprint_source": MEASURED_WORKER_SOURCE,
        "timer_shards": profile.timer_shards,
        "job_partitions": profile.job_partitions,
        "sweeper_memory_mb": profile.sweeper_memory_mib,
        "sweeper_reserved_concurrency": profile.sweeper_reserved_concurrency,
        "account_concurrency": profile.lambda_concurrency_quota,
        "table_quota": profile.table_quota_request_units,
        "warm_reads": {table: w.reads for table, w in profile.warm_throughput.items()},
        "warm_writes": {table: w.writes for table, w in profile.warm_throughput.items()},
        "worker_min_pollers": normal.minimum if normal else None,
        "worker_max_pollers": normal.maximum if normal else None,
        "other_pollers_minimum": sum(p.minimum for k, p in pollers.items() if k != "normal"),
        # The normal priority's lanes: queues, each with a mapping (SchedulerProps.queue_lanes).
        "worker_queues": profile.queue_lanes.get("lambda/normal", 1),
    }
    values.update(overrides)
    return Inputs(rate=rate, burst=burst, **values)


def load_sweep_measurement(path: Path) -> SweepMeasurement | None:
    """The JSON scripts/sweep_scale.py writes, or None when the file is not there."""
    if not path.exists():  # (a pipe, `<(...)`, is no file but is read)
        return None
    data = json.loads(path.read_text())
    throughput = data.get("per_shard_timers_per_second") if isinstance(data, dict) else None
    if not isinstance(throughput, int | float) or throughput <= 0:
        raise ValueError(f"{path}: no positive per_shard_timers_per_second")
    timers = data.get("handed_over") or data.get("timers")
    if not isinstance(timers, int) or timers <= 0:
        raise ValueError(f"{path}: no positive timers")
    recurring = _recurring_timers(data, timers)
    return SweepMeasurement(
        path=_shown(path),
        per_shard_timers_per_second=float(throughput),
        seconds_to_hand_over=data.get("seconds_to_hand_over"),
        max_shard_seconds=data.get("max_shard_seconds"),
        shards=data.get("shards"),
        timers=timers,
        one_off_timers=timers - recurring,
        recurring_timers=recurring,
        lost=data.get("lost"),
        duplicates=data.get("duplicates"),
        inputs=data.get("inputs"),
        machine=data.get("machine"),
        time=data.get("time"),
    )


def _recurring_timers(data: dict[str, Any], timers: int) -> int:
    """How many of a measurement's timers were recurring: each continued its chain with one
    next timer (`chain_timers`); else its inputs' share of the sustained timers."""
    chains = data.get("chain_timers")
    if isinstance(chains, int) and chains >= 0:
        return min(chains, timers)
    inputs = data.get("inputs")
    if isinstance(inputs, dict):
        share = inputs.get("recurring_share") or 0.0
        sustained = inputs.get("sustained_timers") or 0
        return min(timers, round(share * sustained))
    return 0


def with_measurement(
    inputs: Inputs,
    measurement: SweepMeasurement | None,
    recurring: SweepMeasurement | None = None,
) -> Inputs:
    """`inputs` with the per-shard throughputs of one-off and of recurring timers.

    A measurement gives one equation: its shards' sweep seconds = one-off timers × a +
    recurring timers × b (a, b: seconds per timer of each kind). `measurement` (all one-off
    timers) and `recurring` (a run with recurring timers) together give a and b; a kind
    without its measurement is assumed from the per-call latencies (and marked "assumed"),
    and the other measurement is read with that assumed figure for the kind it lacks."""
    if measurement is not None and measurement.one_off_timers <= 0:
        raise ValueError(f"{measurement.path}: no one-off timers")
    if recurring is not None and recurring.recurring_timers <= 0:
        raise ValueError(
            f"{recurring.path}: no recurring timers (run scripts/sweep_scale.py with "
            "--recurring-share 1.0)"
        )
    a_assumed = 1 / assumed_sweep_throughput(inputs)
    b_assumed = 1 / assumed_recurring_sweep_throughput(inputs)
    a: float = a_assumed
    b: float = b_assumed
    if measurement is not None and recurring is not None:
        a, b = _solve(measurement, recurring)
    elif measurement is not None:
        a = (measurement.shard_seconds - measurement.recurring_timers * b) / (
            measurement.one_off_timers
        )
    elif recurring is not None:
        b = (recurring.shard_seconds - recurring.one_off_timers * a) / recurring.recurring_timers
    for value, m in ((a, measurement), (b, recurring)):
        if value <= 0 or not math.isfinite(value):
            shown = m.path if m else "the measurements"
            raise ValueError(f"{shown}: no positive per-timer time left for its kind")
    one_off_source = "assumed"
    recurring_source = "assumed"
    if measurement is not None:
        one_off_source = f"measured: {measurement.path}"
        if measurement.recurring_timers and recurring is None:
            one_off_source += " (its recurring timers at the assumed rate)"
    if recurring is not None:
        recurring_source = f"measured: {recurring.path}"
        if recurring.one_off_timers:
            recurring_source += (
                " (its one-off timers at the measured one-off rate)"
                if measurement is not None
                else " (its one-off timers at the assumed rate)"
            )
    return replace(
        inputs,
        sweep_timers_per_second=round(1 / a, 1) if measurement else None,
        sweep_throughput_source=one_off_source,
        sweep_recurring_timers_per_second=round(1 / b, 1) if recurring else None,
        sweep_recurring_throughput_source=recurring_source,
    )


def _solve(one_off: SweepMeasurement, recurring: SweepMeasurement) -> tuple[float, float]:
    """Seconds per one-off and per recurring timer from two measurements (Cramer's rule)."""
    n1, r1, t1 = one_off.one_off_timers, one_off.recurring_timers, one_off.shard_seconds
    n2, r2, t2 = recurring.one_off_timers, recurring.recurring_timers, recurring.shard_seconds
    det = n1 * r2 - r1 * n2
    if det == 0:
        raise ValueError(
            f"{one_off.path} and {recurring.path}: the same mix of timers, no separate rates"
        )
    return (t1 * r2 - r1 * t2) / det, (n1 * t2 - t1 * n2) / det


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# --- the model ------------------------------------------------------------------------------


def peak_run_rate(inputs: Inputs) -> float:
    """Runs per second while the burst falls due: the sustained rate plus the burst."""
    return inputs.rate + inputs.burst / inputs.burst_drain_seconds


def one_off_timers_per_second(inputs: Inputs, *, burst: bool = True) -> float:
    """The API's timer writes per second into one minute bucket: the sustained one-off timers
    (a fixed delay puts them all in one bucket) plus the burst's, written over
    `burst_write_seconds`."""
    sustained = (1 - inputs.recurring_share) * inputs.rate * inputs.timer_share
    return sustained + (inputs.burst / inputs.burst_write_seconds if burst else 0.0)


def horizon_reads_per_chain_timer(one_off: float, recurring: float) -> float:
    """Horizon reads per recurring timer swept, when a minute holds `one_off` and `recurring`
    timers (or their rates): the sweep reads its shard's horizon once per hand-over group of
    160 timers whose chains it continued, so 1/160 when every timer is recurring, more when
    one-off timers fill the groups, at most 1."""
    if recurring <= 0:
        return 0.0
    share = recurring / (one_off + recurring)
    return min(1.0, 1 / (HANDOVER_GROUP * share))


def chain_timers_per_second(inputs: Inputs) -> float:
    """Next timers the sweeps write for recurring chains, per second on average: one per job
    per sweep (`occurrences_per_sweep` occurrences each)."""
    return inputs.recurring_share * inputs.rate / inputs.occurrences_per_sweep


def timer_writes_per_second(inputs: Inputs, *, burst: bool = True) -> float:
    """Timer writes per second into one minute bucket, averaged: the API's one-off timers plus
    the recurring chains' next timers."""
    return one_off_timers_per_second(inputs, burst=burst) + chain_timers_per_second(inputs)


def horizon_reads_per_second(inputs: Inputs, *, burst: bool = True) -> float:
    """Strongly consistent reads of horizon items (a shard's state), averaged: the API reads
    its timer's shard after each timer write; a sweep reads its shard once per hand-over group
    whose chains it continued."""
    one_off = one_off_timers_per_second(inputs, burst=burst)
    chains = chain_timers_per_second(inputs)
    sustained = one_off_timers_per_second(inputs, burst=False)
    return (
        HORIZON_READS_PER_TIMER * one_off
        + horizon_reads_per_chain_timer(sustained, chains) * chains
    )


def shards_needed(inputs: Inputs) -> int:
    """Shards per minute bucket so that each (minute, shard) partition stays under the
    per-partition write limit (with headroom) while the bucket is written."""
    per_partition = PARTITION_WCU * inputs.headroom
    return max(1, math.ceil(timer_writes_per_second(inputs) / per_partition))


def shards_for_horizon(inputs: Inputs) -> int:
    """Shards so that each shard's horizon item stays under a partition's read limit."""
    per_item = PARTITION_RCU * inputs.headroom
    return max(1, math.ceil(horizon_reads_per_second(inputs) / per_item))


def table_load(inputs: Inputs, *, burst: bool) -> Tables:
    """Request units per second per table, averaged over the minute, at the peak (`burst`)
    or sustained."""
    runs = peak_run_rate(inputs) if burst else inputs.rate
    submissions = (1 - inputs.recurring_share) * inputs.rate + (
        inputs.burst / inputs.burst_write_seconds if burst else 0.0
    )
    # Reads: the worker's GetItem of the job for every run and the sweep's BatchGetItem for
    # every recurring timer (strongly consistent, 1 unit each); the horizon reads.
    return Tables(
        jobs_wru=submissions,
        jobs_rru=WORKER_JOB_READS * runs + SWEEP_JOB_READS * chain_timers_per_second(inputs),
        timers_wru=timer_writes_per_second(inputs, burst=burst),
        timers_rru=horizon_reads_per_second(inputs, burst=burst),
        runs_wru=2 * runs,
        runs_rru=0.0,
    )


def _group_sizes(page_size: int) -> list[int]:
    """The hand-over groups of a full page."""
    return [min(HANDOVER_GROUP, page_size - start) for start in range(0, page_size, HANDOVER_GROUP)]


def _send_waves(messages: int, inputs: Inputs) -> int:
    """SendMessageBatch latencies for `messages`: batches of 10, `send_parallelism` at once."""
    return math.ceil(math.ceil(messages / SQS_BATCH) / max(1, inputs.send_parallelism))


def assumed_sweep_throughput(inputs: Inputs) -> float:
    """One-off timers per second one shard's sweep hands over, from the per-call latencies
    alone: per page a Query, per hand-over group of 160 its SendMessageBatch calls
    (`send_parallelism` at once; no job read: the timer carries its queue), then the watermark
    write. No CPU time: an assumption until scripts/sweep_scale.py has measured the code."""
    groups = _group_sizes(inputs.page_size)
    page_ms = (
        inputs.query_ms
        + sum(_send_waves(g, inputs) * inputs.send_batch_ms for g in groups)
        + inputs.write_ms
    )
    return inputs.page_size / page_ms * 1000


def assumed_recurring_sweep_throughput(inputs: Inputs) -> float:
    """Recurring timers per second one shard's sweep hands over, from the latencies alone: per
    group of 160 the BatchGetItem of its jobs (per 100), the BatchWriteItem of their next
    timers (per 25, one after another), the horizon read after them, the sends of one message
    per timer; per page a Query and the watermark write. No CPU time."""
    groups = _group_sizes(inputs.page_size)
    page_ms = inputs.query_ms + inputs.write_ms
    for g in groups:
        page_ms += (
            math.ceil(g / BATCH_GET) * inputs.batch_get_ms
            + math.ceil(g / BATCH_WRITE) * inputs.batch_write_ms
            + inputs.batch_get_ms  # the shard's horizon, after the writes
            + _send_waves(g, inputs) * inputs.send_batch_ms
        )
    return inputs.page_size / page_ms * 1000


def throughput_source(inputs: Inputs) -> str:
    """Where the one-off throughput comes from: "assumed", "measured: <file>" or "given"."""
    if not inputs.sweep_timers_per_second:
        return "assumed"
    source = inputs.sweep_throughput_source
    return "given" if source == "assumed" else source


def recurring_throughput_source(inputs: Inputs) -> str:
    if not inputs.sweep_recurring_timers_per_second:
        return "assumed"
    source = inputs.sweep_recurring_throughput_source
    return "given" if source == "assumed" else source


def per_shard_throughput(inputs: Inputs) -> float:
    """One-off timers per second one shard's sweep hands over: measured, else assumed."""
    return inputs.sweep_timers_per_second or assumed_sweep_throughput(inputs)


def per_shard_recurring_throughput(inputs: Inputs) -> float:
    """Recurring timers per second one shard's sweep hands over: measured, else assumed."""
    return inputs.sweep_recurring_timers_per_second or assumed_recurring_sweep_throughput(inputs)


def minute_timers(inputs: Inputs, *, burst: bool = True) -> tuple[int, int]:
    """(one-off, recurring) timers in one minute bucket: the burst minute, or a sustained one."""
    one_off = (1 - inputs.recurring_share) * inputs.rate * inputs.timer_share * 60
    recurring = inputs.recurring_share * inputs.rate * 60 / inputs.occurrences_per_sweep
    return math.ceil(one_off + (inputs.burst if burst else 0)), math.ceil(recurring)


def burst_minute_timers(inputs: Inputs) -> int:
    return sum(minute_timers(inputs))


def shard_seconds(inputs: Inputs, one_off: int, recurring: int, shards: int) -> float:
    """One shard's sweep of its share of a minute: one-off timers at their rate, recurring
    timers at theirs."""
    return math.ceil(one_off / shards) / per_shard_throughput(inputs) + math.ceil(
        recurring / shards
    ) / per_shard_recurring_throughput(inputs)


@dataclass(frozen=True)
class SweepLoad:
    """What the shards' sweeps of one minute ask of the tables, per second while they run.
    Above a limit for less than `throttle_absorb_seconds` a load only slows the sweep down
    (throttled calls are retried), so a shorter sweep counts as spread over that long."""

    job_reads: float  # the recurring timers' jobs (BatchGetItem, strongly consistent)
    chain_writes: float  # their next timers
    timer_reads: float  # the Query pages (strongly consistent) and the chains' horizon reads


def sweep_load(inputs: Inputs, one_off: int, recurring: int, shards: int) -> SweepLoad:
    """The N shards read jobs and write next timers only while they hand recurring timers
    over, at N × their recurring rate; they read timer pages throughout the sweep."""
    absorb = inputs.throttle_absorb_seconds
    recurring_seconds = math.ceil(recurring / shards) / per_shard_recurring_throughput(inputs)
    seconds = shard_seconds(inputs, one_off, recurring, shards)
    chains = recurring / max(absorb, recurring_seconds) if recurring else 0.0
    pages = (one_off + recurring) * query_units_per_timer(inputs)
    return SweepLoad(
        job_reads=SWEEP_JOB_READS * chains,
        chain_writes=chains,
        timer_reads=(pages / max(absorb, seconds) if pages else 0.0)
        + horizon_reads_per_chain_timer(one_off, recurring) * chains,
    )


def query_units_per_timer(inputs: Inputs) -> float:
    """Read units of a full Query page (its items' bytes summed, rounded up to 4 KB, strongly
    consistent) per timer."""
    return math.ceil(inputs.page_size * inputs.timer_item_bytes / READ_UNIT_BYTES) / (
        inputs.page_size
    )


@dataclass(frozen=True)
class WhileSweeping:
    """Request units per second on the jobs and timers tables while a minute is swept: the
    per-second peaks, far above the per-minute averages when the sweeps are short."""

    jobs_rru: float
    timers_wru: float
    timers_rru: float


def while_sweeping(inputs: Inputs, shards: int, *, burst: bool = True) -> WhileSweeping:
    """The burst minute is swept in the minute before it falls due (lookahead 1; the workers
    run the sustained rate, the API writes later minutes' timers); the next minute is swept
    while it falls due (the workers at the peak); the burst's timers were written before its
    minute was swept, while the sweep of an ordinary minute ran. Without a burst: an ordinary
    minute. Each table takes the larger of its loads in those windows."""
    ordinary = sweep_load(inputs, *minute_timers(inputs, burst=False), shards)
    if not burst:
        return WhileSweeping(
            jobs_rru=WORKER_JOB_READS * inputs.rate + ordinary.job_reads,
            timers_wru=one_off_timers_per_second(inputs, burst=False) + ordinary.chain_writes,
            timers_rru=HORIZON_READS_PER_TIMER * one_off_timers_per_second(inputs, burst=False)
            + ordinary.timer_reads,
        )
    swept = sweep_load(inputs, *minute_timers(inputs, burst=True), shards)
    api_sustained = one_off_timers_per_second(inputs, burst=False)
    api_peak = one_off_timers_per_second(inputs, burst=True)
    return WhileSweeping(
        jobs_rru=max(
            WORKER_JOB_READS * inputs.rate + swept.job_reads,
            WORKER_JOB_READS * peak_run_rate(inputs) + ordinary.job_reads,
        ),
        timers_wru=max(api_sustained + swept.chain_writes, api_peak + ordinary.chain_writes),
        timers_rru=max(
            HORIZON_READS_PER_TIMER * api_sustained + swept.timer_reads,
            HORIZON_READS_PER_TIMER * api_peak + ordinary.timer_reads,
        ),
    )


def jobs_reads_while_sweeping(inputs: Inputs, shards: int, *, burst: bool = True) -> float:
    """Jobs table RRU/s while a minute is swept: the workers' reads plus the sweeps' reads of
    the recurring timers' jobs (none for one-off timers)."""
    return while_sweeping(inputs, shards, burst=burst).jobs_rru


def shards_for_deadline(inputs: Inputs) -> int:
    """Shards whose sweeps hand the burst minute over within the deadline."""
    room = inputs.sweep_deadline_seconds - inputs.coordinator_seconds - SWEEP_HOLD_SECONDS
    if room <= 0:
        return 10**9
    one_off, recurring = minute_timers(inputs)
    seconds = one_off / per_shard_throughput(inputs) + recurring / per_shard_recurring_throughput(
        inputs
    )
    return max(1, math.ceil(seconds / room))


def sweep_estimate(inputs: Inputs, shards: int) -> Sweep:
    """The sweep of the burst minute: the coordinator starts one sweep per shard, all at once;
    each hands its shard's one-off timers over at the one-off rate and its recurring timers at
    the recurring rate; the minute is handed over when the slowest finishes. The shards
    together also need the jobs table to serve the recurring timers' job reads: above its
    quota DynamoDB throttles them, so the sweep takes at least the recurring timers ÷ (quota −
    the workers' reads). One-off timers read no job: no read bound."""
    one_off, recurring = minute_timers(inputs)
    timers = one_off + recurring
    per_shard = math.ceil(timers / shards)
    recurring_per_shard = math.ceil(recurring / shards)
    pages = max(1, math.ceil(per_shard / inputs.page_size))
    slowest = shard_seconds(inputs, one_off, recurring, shards) + SWEEP_HOLD_SECONDS
    capacity = inputs.table_quota - WORKER_JOB_READS * inputs.rate
    reads = SWEEP_JOB_READS * recurring
    read_bound = reads / capacity if capacity > 0 else (math.inf if reads else 0.0)
    seconds = inputs.coordinator_seconds + max(slowest, read_bound)
    during = while_sweeping(inputs, shards)
    return Sweep(
        timers=timers,
        one_off_timers=one_off,
        recurring_timers=recurring,
        shards=shards,
        timers_per_shard=per_shard,
        pages_per_partition=pages,
        queries=shards * pages,
        batch_gets=shards * math.ceil(recurring_per_shard / BATCH_GET),
        send_batches=shards * math.ceil(per_shard / SQS_BATCH),
        per_shard_timers_per_second=round(per_shard_throughput(inputs), 1),
        throughput_source=throughput_source(inputs),
        per_shard_recurring_timers_per_second=round(per_shard_recurring_throughput(inputs), 1),
        recurring_throughput_source=recurring_throughput_source(inputs),
        shard_seconds=round(slowest, 2),
        read_bound_seconds=round(read_bound, 2),
        seconds=round(seconds, 2),
        deadline_seconds=inputs.sweep_deadline_seconds,
        jobs_rru_while_sweeping=round(during.jobs_rru, 1),
        timers_wru_while_sweeping=round(during.timers_wru, 1),
        timers_rru_while_sweeping=round(during.timers_rru, 1),
        shards_for_deadline=shards_for_deadline(inputs),
    )


def invocation_seconds(inputs: Inputs) -> float:
    """One worker invocation: the batch's records run concurrently (a thread each,
    shared/duetime/entrypoints/worker.py), so it lasts the early wait + the run + the claim/outcome
    around it, whatever the batch size, + the batch's CPU work at the function's CPU share
    (measured; counted after the calls' latency, not overlapping it: an upper bound)."""
    return (
        inputs.early_wait_seconds
        + inputs.run_seconds
        + inputs.run_overhead_ms / 1000
        + batch_cpu_seconds(inputs)
    )


def cpu_share(memory_mb: float) -> float:
    """The vCPUs a function of `memory_mb` gets (1 at 1,769 MB), up to the one the worker's
    threads can use."""
    return min(1.0, memory_mb / LAMBDA_FULL_VCPU_MB)


def batch_cpu_seconds(inputs: Inputs) -> float:
    """The wall time a batch's CPU work takes at the worker's CPU share (0 when not counted)."""
    cpu = inputs.worker_cpu_seconds_per_run or 0.0
    return cpu * inputs.records_per_invocation / cpu_share(inputs.worker_memory_mb)


def worker_memory_rule(
    peak_rss_mb: float, cpu_seconds_per_batch: float, busy_seconds: float
) -> int:
    """The worker's memory (docs/performance.md "Worker memory"): the smallest setting, in
    64 MB steps from 128 MB, that (1) holds the measured peak RSS with 1.5 × headroom and
    (2) gives a CPU share with which a batch's CPU work fits in the batch's busy time (its
    wall time without the early wait: the run + the calls around it), so the CPU does not
    stretch the batch: share ≥ CPU per batch ÷ busy time, share = memory ÷ 1,769 MB."""
    if busy_seconds <= 0:
        raise ValueError("busy_seconds must be positive")
    for_rss = peak_rss_mb * WORKER_RSS_HEADROOM
    for_cpu = min(1.0, cpu_seconds_per_batch / busy_seconds) * LAMBDA_FULL_VCPU_MB
    need = max(LAMBDA_MIN_MEMORY_MB, for_rss, for_cpu)
    return math.ceil(need / WORKER_MEMORY_STEP_MB) * WORKER_MEMORY_STEP_MB


def chosen_worker_memory_mb(inputs: Inputs) -> int | None:
    """What `worker_memory_rule` chooses from the inputs' measured footprint (None: none)."""
    if inputs.worker_peak_rss_mb is None or inputs.worker_cpu_seconds_per_run is None:
        return None
    return worker_memory_rule(
        inputs.worker_peak_rss_mb,
        inputs.worker_cpu_seconds_per_run * inputs.worker_batch_size,
        inputs.run_seconds + inputs.run_overhead_ms / 1000,
    )


def load_worker_footprint(path: Path) -> dict[str, Any]:
    """The Inputs fields a scripts/worker_footprint.py --json file gives: the CPU seconds per
    run (the largest of its targets'), the peak RSS and, from files that have it, the log
    bytes per run."""
    data = json.loads(path.read_text())
    try:
        cpu = max(float(t["cpu_seconds_per_run"]) for t in data["targets"].values())
        rss = float(data["peak_rss_mb"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a scripts/worker_footprint.py --json file ({exc})") from None
    if cpu <= 0 or rss <= 0:
        raise ValueError(f"{path}: CPU seconds and peak RSS must be positive")
    machine = data.get("machine", {})
    where = f"{machine.get('platform', '?')}, {machine.get('cpus', '?')} CPUs"
    source = f"measured {data.get('date', '?')} ({where}): {_shown(path)}"
    found: dict[str, Any] = {
        "worker_cpu_seconds_per_run": cpu,
        "worker_peak_rss_mb": rss,
        "worker_footprint_source": source,
    }
    if isinstance(data.get("log_bytes_per_run"), int | float) and data["log_bytes_per_run"] >= 0:
        found["worker_log_bytes_per_run"] = float(data["log_bytes_per_run"])
        found["worker_log_source"] = source
    return found


def worker_seconds_per_run(inputs: Inputs) -> float:
    """The worker's billed seconds per run: measured (`worker_seconds_per_run`), else an
    invocation's seconds shared by its batch's records."""
    if inputs.worker_seconds_per_run is not None:
        return inputs.worker_seconds_per_run
    return invocation_seconds(inputs) / inputs.records_per_invocation


def lambda_sqs_per_run(inputs: Inputs, sqs_per_run: float) -> float:
    """SQS requests per run with the Lambda workers: `sqs_per_run` counts the mapping's receive
    and delete at full batches (2 ÷ 10); at another fill they are 2 ÷ the records an
    invocation carries (empty receives by idle pollers are not counted)."""
    return sqs_per_run - LAMBDA_RECEIVE_AND_DELETE_PER_RUN + 2 / inputs.records_per_invocation


def longest_of_uniform_waits(bound_seconds: float, records: int) -> float:
    """The expected longest of `records` early waits spread evenly over [0, bound): the wait
    an invocation pays when its records' waits are independent — bound × n ÷ (n + 1). An unheld
    send's DelaySeconds is the whole seconds before its instant, or the next second when that
    is at most 0.1 s late (domain/messages.py `delay_seconds`): a one-off with an arbitrary due
    millisecond waits up to 0.9 s, so a batch of 10 pays ≈ 0.82 s by this formula (0.81 s
    counting the one in ten sent late, which waits nothing), not the 0.41 s mean."""
    return bound_seconds * records / (records + 1)


def lambda_gb_second_price(inputs: Inputs) -> float:
    """Lambda's duration price for the functions' architecture (arm64 or x86_64)."""
    try:
        return PRICE_LAMBDA_GB_SECOND_BY_ARCHITECTURE[inputs.lambda_architecture]
    except KeyError:
        raise ValueError(f"unknown Lambda architecture {inputs.lambda_architecture!r}") from None


def mapping_ceiling(inputs: Inputs) -> int:
    """The most concurrent batches one mapping can reach: MaximumConcurrency (≤ 1,000) in
    standard mode, AWS's 2,000 pollers × 10 in provisioned mode."""
    if inputs.provisioned:
        return MAX_POLLERS_RANGE[1] * POLLER_CONCURRENCY
    return mapping_cap(inputs)


def mappings_per_priority(inputs: Inputs, runs_per_second: float) -> int:
    """Queues/event source mappings one (runtime, priority) needs to carry `runs_per_second`:
    its concurrency (Little's law) over one mapping's ceiling (`mapping_ceiling`), and its
    in-flight messages over a queue's 120,000 (with headroom)."""
    cap = mapping_ceiling(inputs)
    in_flight = math.ceil(runs_per_second * invocation_seconds(inputs))
    return max(
        1,
        math.ceil(capacity_for(inputs, runs_per_second) / cap),
        math.ceil(in_flight / (SQS_MAX_IN_FLIGHT * inputs.headroom)),
    )


def concurrency_for(inputs: Inputs, runs_per_second: float) -> int:
    """Little's law: concurrent invocations = batches per second × invocation time."""
    return math.ceil(runs_per_second / inputs.records_per_invocation * invocation_seconds(inputs))


def runs_per_unit(inputs: Inputs) -> float:
    """Runs per second one unit of mapping capacity (one concurrent invocation) delivers. In
    provisioned mode a poller drives 10 invocations but also polls at most 10 times a second
    and 1 MB/s: a unit then takes at most a tenth of that."""
    per_invocation = inputs.records_per_invocation / invocation_seconds(inputs)
    if not inputs.provisioned:
        return per_invocation
    polls = POLLER_POLLS_PER_SECOND * inputs.records_per_invocation / POLLER_CONCURRENCY
    throughput = POLLER_BYTES_PER_SECOND / inputs.message_bytes / POLLER_CONCURRENCY
    return min(per_invocation, polls, throughput)


def capacity_for(inputs: Inputs, runs_per_second: float) -> int:
    """Mapping capacity (concurrent invocations; 10 per poller) that `runs_per_second` needs."""
    if not inputs.provisioned:
        return concurrency_for(inputs, runs_per_second)
    return math.ceil(runs_per_second / runs_per_unit(inputs))


def pollers_for(inputs: Inputs, runs_per_second: float) -> int:
    return max(MIN_POLLERS_RANGE[0], math.ceil(capacity_for(inputs, runs_per_second) / 10))


def mapping_cap(inputs: Inputs) -> int:
    """The most one mapping scales to: MaximumConcurrency (standard) or 10 per poller."""
    if inputs.worker_max_pollers is not None:
        return inputs.worker_max_pollers * POLLER_CONCURRENCY
    return min(inputs.worker_max_concurrency, ESM_MAX_CONCURRENCY)


def start_capacity(inputs: Inputs, cap: int) -> int:
    """Mapping capacity when the burst starts: what the sustained rate keeps busy, at least 5
    (standard) or 10 per minimum poller (provisioned)."""
    floor = ESM_START_CONCURRENCY
    if inputs.provisioned:
        floor = (inputs.worker_min_pollers or MIN_POLLERS_RANGE[0]) * POLLER_CONCURRENCY
    return min(cap, max(floor, capacity_for(inputs, inputs.rate)))


def simulate_drain(inputs: Inputs, cap: int) -> tuple[float, int, float, float, int]:
    """Second by second: demand is the peak rate for the drain window, then the sustained
    rate; capacity ramps from the start capacity at the mapping's ramp (per queue), up to
    `cap`. Returns (drain seconds, max backlog, max extra lateness, ramp seconds, start)."""
    per_unit = runs_per_unit(inputs)
    start = start_capacity(inputs, cap)
    ramp = inputs.ramp_per_minute * inputs.worker_queues / 60  # capacity per second
    peak = min(cap, capacity_for(inputs, peak_run_rate(inputs)))
    ramp_seconds = max(0.0, (peak - start) / ramp) if ramp else math.inf
    backlog = 0.0
    max_backlog = 0.0
    max_lateness = 0.0
    drained = 0.0
    capacity_units = float(start)
    horizon = 6 * 3600
    for second in range(horizon):
        demand = peak_run_rate(inputs) if second < inputs.burst_drain_seconds else inputs.rate
        if backlog + demand > 0:
            capacity_units = min(float(cap), capacity_units + ramp)
        capacity = capacity_units * per_unit
        backlog = max(0.0, backlog + demand - capacity)
        max_backlog = max(max_backlog, backlog)
        if capacity > 0:
            max_lateness = max(max_lateness, backlog / capacity)
        if second >= inputs.burst_drain_seconds and backlog == 0:
            drained = float(second)
            break
        if capacity_units >= cap and capacity < inputs.rate:
            drained = max_lateness = math.inf  # never drains: capacity below the rate
            break
    else:
        drained = math.inf
    return drained, math.ceil(max_backlog), round(max_lateness, 1), round(ramp_seconds, 1), start


def workers_plan(inputs: Inputs, *, queues: int, account_concurrency: int) -> Workers:
    peak_rate = peak_run_rate(inputs)
    sized = replace(inputs, worker_queues=queues, account_concurrency=account_concurrency)
    # The account's quota caps invocations; in units of mapping capacity that is more when a
    # unit takes fewer runs than an invocation could (provisioned: the pollers' polls).
    per_invocation = inputs.records_per_invocation / invocation_seconds(inputs)
    account_units = math.floor(account_concurrency * per_invocation / runs_per_unit(inputs))
    cap = min(account_units, queues * mapping_cap(inputs))
    drain, backlog, lateness, ramp, start = simulate_drain(sized, cap)
    peak_capacity = capacity_for(inputs, peak_rate)
    in_flight = math.ceil(peak_rate * invocation_seconds(inputs))
    queues_needed = max(
        math.ceil(in_flight / (SQS_MAX_IN_FLIGHT * inputs.headroom)),
        math.ceil(
            peak_capacity
            / (
                MAX_POLLERS_RANGE[1] * POLLER_CONCURRENCY
                if inputs.provisioned
                else mapping_cap(inputs)
            )
        ),
    )
    return Workers(
        peak_runs_per_second=peak_rate,
        invocation_seconds=round(invocation_seconds(inputs), 2),
        concurrency_sustained=concurrency_for(inputs, inputs.rate),
        concurrency_peak=concurrency_for(inputs, peak_rate),
        in_flight_peak=in_flight,
        queues_needed=max(1, queues_needed),
        ramp_seconds=ramp,
        drain_seconds=drain,
        max_backlog=backlog,
        max_extra_lateness_seconds=lateness,
        mode="provisioned" if inputs.provisioned else "standard",
        capacity_peak=peak_capacity,
        pollers_sustained=pollers_for(inputs, inputs.rate) if inputs.provisioned else None,
        pollers_peak=pollers_for(inputs, peak_rate) if inputs.provisioned else None,
        start_capacity=start,
        queues_needed_sustained=mappings_per_priority(inputs, inputs.rate),
    )


def sweeper_concurrency(inputs: Inputs) -> int:
    """Concurrency the sweeps hold: one per shard, or the reservation when there is one (a
    reservation is taken out of the account's pool whether used or not)."""
    return max(inputs.timer_shards, inputs.sweeper_reserved_concurrency or 0)


def monthly_cost(inputs: Inputs, sustained: Tables, peak: Tables, workers: Workers) -> Cost:
    bursts = inputs.bursts_per_day * HOURS_PER_MONTH / 24
    runs = inputs.rate * HOURS_PER_MONTH * 3600 + inputs.burst * bursts
    on_demand = runs * (
        inputs.writes_per_run * PRICE_WRITE_REQUEST + inputs.reads_per_run * PRICE_READ_REQUEST
    )

    def provisioned(tables: Tables) -> float:
        wcu = tables.total_wru() / inputs.provisioned_utilisation
        rcu = tables.total_rru() / inputs.provisioned_utilisation
        return (wcu * PRICE_WCU_HOUR + rcu * PRICE_RCU_HOUR) * HOURS_PER_MONTH

    invocations = runs / inputs.records_per_invocation
    gb_seconds = runs * worker_seconds_per_run(inputs) * inputs.worker_memory_mb / 1024
    # Sweeps: every minute the coordinator (~0.1 s at 512 MB) and one invocation per shard,
    # each as long as its share of the minute's timers takes (at least the coordinator's).
    minutes = HOURS_PER_MONTH * 60
    one_off, recurring = minute_timers(inputs, burst=False)
    sweep_seconds = (
        (one_off * minutes + inputs.burst * bursts) / per_shard_throughput(inputs)
        + recurring * minutes / per_shard_recurring_throughput(inputs)
        + minutes * inputs.timer_shards * inputs.coordinator_seconds
    )
    sweep_gb_seconds = sweep_seconds * inputs.sweeper_memory_mb / 1024 + (
        minutes * inputs.coordinator_seconds * 512 / 1024
    )
    sweep_requests = minutes * (inputs.timer_shards + 1)
    # Provisioned pollers: the minimum (or what the sustained rate needs) all month, on every
    # priority's mapping; the burst's extra pollers while it drains (at least a minute).
    pollers = 0.0
    if inputs.provisioned and workers.pollers_peak is not None:
        base = max(inputs.worker_min_pollers or 0, workers.pollers_sustained or 0)
        top = min(workers.pollers_peak, inputs.worker_max_pollers or 0)
        window = workers.drain_seconds if math.isfinite(workers.drain_seconds) else 3600.0
        extra_hours = max(0, top - base) * max(60.0, window) / 3600 * bursts
        pollers = (
            (base + inputs.other_pollers_minimum) * HOURS_PER_MONTH + extra_hours
        ) * PRICE_EPU_HOUR
    return Cost(
        runs_per_month=runs,
        dynamodb_on_demand=round(on_demand, 2),
        dynamodb_provisioned_sustained=round(provisioned(sustained), 2),
        dynamodb_provisioned_peak=round(provisioned(peak), 2),
        sqs=round(runs * lambda_sqs_per_run(inputs, inputs.sqs_per_run) * PRICE_SQS_REQUEST, 2),
        lambda_workers=round(
            gb_seconds * lambda_gb_second_price(inputs) + invocations * PRICE_LAMBDA_REQUEST, 2
        ),
        lambda_sweeps=round(
            sweep_gb_seconds * lambda_gb_second_price(inputs)
            + sweep_requests * PRICE_LAMBDA_REQUEST,
            2,
        ),
        event_pollers=round(pollers, 2),
    )


# --- the whole bill per run, by submission path ------------------------------------------------

GB = 1024**3
PATHS = ("one_off_single", "one_off_batch", "recurring", "recurring_frequent")
PATH_TITLES = {
    "one_off_single": "one-off, POST /jobs",
    "one_off_batch": "one-off, POST /jobs/batch (100)",
    "recurring": "recurring occurrence",
    "recurring_frequent": "recurring occurrence, every minute",
}
# A chain the sweeper plans ahead (every minute, say) writes its timer once per this many
# occurrences: up to the next 10-minute line (duetime.domain.planning, "Planning ahead").
FREQUENT_OCCURRENCES_PER_TIMER = 10
# Issue 16's targets, $ per million runs, all in (not redefined here: compared as written).
TARGETS = (
    ("recurring", "on_demand", 1.00),
    ("recurring_frequent", "on_demand", 1.00),
    ("one_off_batch", "on_demand", 2.00),
    ("one_off_batch", "provisioned", 1.00),
)


@dataclass(frozen=True)
class PathRequests:
    """What one run of a path asks for: DynamoDB units, SQS requests, API requests and the API
    function's seconds, the sweep's seconds."""

    writes: float
    reads: float
    sqs: float
    api_requests: float
    api_seconds: float
    sweep_seconds: float


@dataclass(frozen=True)
class PathBill:
    """$ per million runs of one path: the on-demand bill by part, the DynamoDB requests on
    provisioned capacity instead, the totals, and EventBridge Scheduler at the same volume."""

    path: str
    parts: dict[str, float]
    dynamodb_provisioned: float
    on_demand: float
    provisioned: float
    eventbridge_scheduler: float
    # The same run with its lane's workers on Fargate (`fargate_workers`): the tasks and the
    # worker's SQS requests instead of the Lambda workers, their pollers and the mapping's.
    fargate_tasks: float = 0.0
    fargate_sqs: float = 0.0
    on_demand_fargate: float = 0.0
    provisioned_fargate: float = 0.0
    # $ per million runs of DynamoDB storage and point-in-time recovery by item (run, job,
    # timer): the parts `dynamodb_storage` and `dynamodb_pitr` split by item.
    dynamodb_storage_by_item: dict[str, float] = field(default_factory=dict)
    fargate_webhook_secrets: float = 0.0  # the webhook secrets' bill with Fargate workers


@dataclass(frozen=True)
class TargetCheck:
    path: str
    capacity: str  # "on_demand" or "provisioned"
    per_million: float
    target: float
    met: bool
    workers: str = "lambda"  # or "fargate": the path's bill with Fargate workers


@dataclass(frozen=True)
class Bill:
    runs_per_month: float
    eventbridge_scheduler_per_million: float
    paths: list[PathBill]
    targets: list[TargetCheck]
    fargate: FargateWorkers | None = None  # the Fargate workers the `_fargate` figures price
    staged_second: dict[str, float] = field(default_factory=dict)  # by runtime, $ per million
    # The workers + SQS at full batches and at LOWER_BATCH_FILL records an invocation, and a
    # batch-created one-off's totals at that fill (`lower_fill_bill`).
    batch_fill: dict[str, float] = field(default_factory=dict)
    # duetime's fixed monthly costs, $ a month: custom metrics, the sweeps' ticks, the pollers.
    fixed_monthly: dict[str, float] = field(default_factory=dict)
    webhook_secrets_per_month: float = 0.0  # $ a month with the Lambda workers
    warnings: list[str] = field(default_factory=list)  # what the comparison does not hold for


def one_off_batch_reads(inputs: Inputs) -> float:
    """Read units per batch-created one-off: given, else the worker's (its job item) and its
    share of the batch's horizon reads, one per shard written."""
    if inputs.reads_one_off_batch is not None:
        return inputs.reads_one_off_batch
    shards = min(inputs.timer_shards, inputs.api_batch_jobs)
    return WORKER_JOB_READS + HORIZON_READS_PER_TIMER * shards / inputs.api_batch_jobs


def path_requests(inputs: Inputs, path: str) -> PathRequests:
    """Per run of `path`: one-off runs through a timer (the model's default path), submitted one
    by one or 100 a batch; a recurring occurrence (its job's creation shared over
    `occurrences_per_recurring_job`; its timer written once per `occurrences_per_sweep`)."""
    one_off_sweep = inputs.timer_share / per_shard_throughput(inputs)
    if path == "one_off_single":
        return PathRequests(
            inputs.writes_one_off,
            inputs.reads_one_off,
            lambda_sqs_per_run(inputs, inputs.sqs_per_run),
            1.0,
            inputs.api_ms_single / 1000,
            one_off_sweep,
        )
    if path == "one_off_batch":
        return PathRequests(
            inputs.writes_one_off_batch,
            one_off_batch_reads(inputs),
            lambda_sqs_per_run(inputs, inputs.sqs_per_run_batch),
            1 / inputs.api_batch_jobs,
            inputs.api_ms_batch / 1000 / inputs.api_batch_jobs,
            one_off_sweep,
        )
    if path == "recurring_frequent":
        return path_requests(
            replace(inputs, occurrences_per_sweep=FREQUENT_OCCURRENCES_PER_TIMER), "recurring"
        )
    if path == "recurring":
        recurring = replace(inputs, recurring_share=1.0)
        created = 1 / inputs.occurrences_per_recurring_job
        return PathRequests(
            recurring.writes_per_run,
            recurring.reads_per_run,
            lambda_sqs_per_run(inputs, inputs.sqs_per_run),
            created,
            created * inputs.api_ms_single / 1000,
            1 / (per_shard_recurring_throughput(inputs) * inputs.occurrences_per_sweep),
        )
    raise ValueError(f"unknown path {path!r}")


def _stored_gb_months(item_bytes: float, overhead: float, days: float) -> float:
    """GB-months of an item of `item_bytes` (plus DynamoDB's per-item overhead) kept `days`."""
    return (item_bytes + overhead) / GB * days / DAYS_PER_MONTH


def dynamodb_storage_by_item(inputs: Inputs, path: str) -> dict[str, float]:
    """GB-months of DynamoDB storage per run of `path`, by item, DynamoDB's 100 B per item
    included (priced at storage + point-in-time recovery by `path_bill`):
    - run: the run record, the hot window;
    - job: a one-off's item, from its submission (`one_off_lead_days`) to the hot window after
      its run; a recurring job's, the interval to the next occurrence (a day on `recurring`, a
      minute on `recurring_frequent`) plus the hot window after the job ends shared over its
      occurrences;
    - timer: a one-off's (those through a timer, `timer_share`), from its submission to
      `timer_ttl_days` after its due time; a recurring chain's, written an interval per
      occurrence it covers ahead of its due time, kept as long after, shared by its
      `occurrences_per_sweep` occurrences."""
    overhead = inputs.item_overhead_bytes
    run = _stored_gb_months(inputs.run_item_bytes, overhead, inputs.hot_window_days)
    if path in ("one_off_single", "one_off_batch"):
        lead = inputs.one_off_lead_days
        job = _stored_gb_months(inputs.job_item_bytes, overhead, lead + inputs.hot_window_days)
        timer = inputs.timer_share * _stored_gb_months(
            inputs.timer_item_bytes, overhead, lead + inputs.timer_ttl_days
        )
        return {"run": run, "job": job, "timer": timer}
    if path in ("recurring", "recurring_frequent"):
        frequent = path == "recurring_frequent"
        interval_days = (
            FREQUENT_INTERVAL_SECONDS if frequent else inputs.recurring_interval_seconds
        ) / 86_400
        per_timer = FREQUENT_OCCURRENCES_PER_TIMER if frequent else inputs.occurrences_per_sweep
        job_days = interval_days + inputs.hot_window_days / inputs.occurrences_per_recurring_job
        timer_days = interval_days * per_timer + inputs.timer_ttl_days
        return {
            "run": run,
            "job": _stored_gb_months(inputs.job_item_bytes, overhead, job_days),
            "timer": _stored_gb_months(inputs.timer_item_bytes, overhead, timer_days) / per_timer,
        }
    raise ValueError(f"unknown path {path!r}")


def webhook_secret_refreshes_per_month(inputs: Inputs, processes: float) -> float:
    """Decryptions of a webhook secret a month (each a GetItem and `kms_decrypts_per_refresh`
    KMS Decrypt calls): every worker process (a Lambda execution environment, a Fargate task)
    refreshes each webhook tenant it delivers for once per cache period; a process delivers for
    at most as many tenants as it handles runs in that period."""
    if processes <= 0 or inputs.webhook_tenants <= 0:
        return 0.0
    period = inputs.webhook_secret_cache_seconds
    tenants = min(float(inputs.webhook_tenants), inputs.rate * period / processes)
    return processes * tenants * HOURS_PER_MONTH * 3600 / period


def webhook_secrets_per_month(inputs: Inputs, processes: float) -> float:
    """$ a month of webhook-secret decrypts by `processes` worker processes: webhook tenants ×
    processes × refreshes (one per cache period: 2,920 a month at 15 minutes) × (KMS Decrypt +
    a strongly consistent GetItem)."""
    each = inputs.kms_decrypts_per_refresh * PRICE_KMS_REQUEST + PRICE_READ_REQUEST
    return webhook_secret_refreshes_per_month(inputs, processes) * each


def sweep_ticks_per_month(inputs: Inputs) -> float:
    """The sweeps' fixed monthly part, $: the coordinator a minute and each shard's invocation
    a minute (at least the coordinator's time), whatever they hand over."""
    minutes = HOURS_PER_MONTH * 60
    gb_s = lambda_gb_second_price(inputs)
    return (
        minutes * inputs.timer_shards * inputs.coordinator_seconds * inputs.sweeper_memory_mb / 1024
        + minutes * inputs.coordinator_seconds * 512 / 1024
    ) * gb_s + minutes * (inputs.timer_shards + 1) * PRICE_LAMBDA_REQUEST


def http_api_price(requests_per_month: float) -> float:
    """API Gateway HTTP API's average price per request at a month's volume (two tiers)."""
    if requests_per_month <= 0:
        return PRICE_HTTP_API_REQUEST
    first = min(requests_per_month, HTTP_API_FIRST_TIER_REQUESTS)
    rest = requests_per_month - first
    return (first * PRICE_HTTP_API_REQUEST + rest * PRICE_HTTP_API_REQUEST_OVER) / (
        requests_per_month
    )


def scheduler_per_million(invocations_per_month: float) -> float:
    """EventBridge Scheduler's $ per million invocations at a month's volume, its 14 million
    free invocations included."""
    if invocations_per_month <= 0:
        return 0.0
    paid = max(0.0, invocations_per_month - SCHEDULER_FREE_INVOCATIONS_PER_MONTH)
    return paid * PRICE_SCHEDULER_INVOCATION / invocations_per_month * 1e6


@dataclass(frozen=True)
class FargateWorkers:
    """The workers of a lane on Fargate instead of Lambda, per run: a run holds one of a task's
    slots from its receive to its outcome (the early wait — a staged run's staging included —,
    the run, the calls around it, its CPU at the task's share); a task serves the fewer of its
    slots' runs and its vCPU's (one interpreter: at most one vCPU), at `fargate_utilisation`."""

    slot_seconds: float  # a run's hold on a slot
    runs_per_task_second: float  # a task's capacity
    bound: str  # "slots" or "cpu": what sets the capacity
    tasks_at_rate: int  # tasks for the sustained rate, at the utilisation
    receives_per_run: float
    deletes_per_run: float
    task_dollars_per_run: float
    # What the deployed service does at the sustained rate (infra/constructs/workers.py): it
    # sets its task count from the backlog (visible + in-flight messages) to 1, 2, 4, … tasks
    # as the backlog fills their slots, up to `fargate_max_tasks`.
    max_tasks: int = 0  # fargate_max_tasks
    runs_per_second_at_max_tasks: float = 0.0  # all that maximum serves
    tasks_scaled: int = 0  # the step the backlog settles at for the rate, uncapped
    vcpu_scaled: float = 0.0  # those tasks' vCPU (the account's Fargate vCPU quota)
    launch_seconds: float = 0.0  # launching them from none, at Fargate's launch rate


def poisson_mean_ceil(mean: float, size: int) -> float:
    """E[ceil(N / size)] for N ~ Poisson(mean): the requests that delete the N runs
    finishing within a hold, `size` a request."""
    if mean <= 0:
        return 0.0
    spread = 12 * math.sqrt(mean) + 20
    low, high = max(0, math.floor(mean - spread)), math.ceil(mean + spread)
    return sum(
        math.exp(n * math.log(mean) - mean - math.lgamma(n + 1)) * math.ceil(n / size)
        for n in range(low, high + 1)
    )


def fargate_workers(inputs: Inputs) -> FargateWorkers:
    """The Fargate workers' capacity, tasks and $ per run (see FargateWorkers). SQS: a receive
    asks for the slots free then, on average the unused share of the slots (at least 1, at
    most 10); the runs that finish within a delete hold go in ceil(n / 10) requests."""
    cpu = inputs.worker_cpu_seconds_per_run or 0.0
    vcpu = min(1.0, inputs.fargate_vcpu)
    slot_seconds = (
        inputs.early_wait_seconds + inputs.run_seconds + inputs.run_overhead_ms / 1000 + cpu / vcpu
    )
    by_slots = inputs.fargate_task_concurrency / slot_seconds
    by_cpu = vcpu / cpu if cpu > 0 else math.inf
    capacity = min(by_slots, by_cpu)
    used = capacity * inputs.fargate_utilisation  # runs a second, per task
    hourly = (
        inputs.fargate_vcpu * PRICE_FARGATE_VCPU_HOUR
        + inputs.fargate_memory_gb * PRICE_FARGATE_GB_HOUR
        + (PRICE_PUBLIC_IPV4_HOUR if inputs.fargate_public_ip else 0.0)
    )
    free = inputs.fargate_task_concurrency * (1 - inputs.fargate_utilisation)
    per_hold = used * FARGATE_DELETE_HOLD_SECONDS
    scaled = backlog_step(inputs.rate, slot_seconds, inputs.fargate_task_concurrency, capacity)
    return FargateWorkers(
        slot_seconds=round(slot_seconds, 4),
        runs_per_task_second=round(capacity, 2),
        bound="slots" if by_slots <= by_cpu else "cpu",
        tasks_at_rate=math.ceil(inputs.rate / used),
        receives_per_run=round(1 / min(SQS_BATCH, max(1.0, free)), 4),
        deletes_per_run=round(poisson_mean_ceil(per_hold, SQS_BATCH) / per_hold, 4),
        task_dollars_per_run=hourly / 3600 / used,
        max_tasks=inputs.fargate_max_tasks,
        runs_per_second_at_max_tasks=round(inputs.fargate_max_tasks * capacity, 1),
        tasks_scaled=scaled,
        vcpu_scaled=round(scaled * inputs.fargate_vcpu, 2),
        launch_seconds=round(
            max(0, scaled - FARGATE_LAUNCH_BURST) / FARGATE_LAUNCHES_PER_SECOND, 1
        ),
    )


def backlog_step(rate: float, slot_seconds: float, slots: int, capacity: float) -> int:
    """The task count the backlog policy settles at for `rate` runs a second: the first of 1,
    2, 4, … whose slots hold the runs in flight (rate × slot_seconds, Little's law) and whose
    capacity keeps up (below it the backlog grows and the next step follows)."""
    tasks = 1
    while tasks * slots < rate * slot_seconds or tasks * capacity < rate:
        tasks *= 2
    return tasks


def staged_second_per_million(inputs: Inputs) -> dict[str, float]:
    """What one more second of early wait (a staged second) adds to the workers' $ per million
    runs, on Lambda and on Fargate."""
    later = replace(inputs, early_wait_seconds=inputs.early_wait_seconds + 1)
    gb_s = lambda_gb_second_price(inputs)

    def lambda_run(i: Inputs) -> float:
        return worker_seconds_per_run(i) * i.worker_memory_mb / 1024 * gb_s

    return {
        "lambda": round((lambda_run(later) - lambda_run(inputs)) * 1e6, 4),
        "fargate": round(
            (
                fargate_workers(later).task_dollars_per_run
                - fargate_workers(inputs).task_dollars_per_run
            )
            * 1e6,
            4,
        ),
    }


def path_bill(inputs: Inputs, path: str, runs_per_month: float, pollers: float = 0.0) -> PathBill:
    """$ per million runs of `path` when all `runs_per_month` take it; `pollers` is the month's
    provisioned-mode poller bill (shared by the runs)."""
    r = path_requests(inputs, path)
    gb_s = lambda_gb_second_price(inputs)
    per_run_month = 1 / runs_per_month if runs_per_month else 0.0
    fixed_sweep = sweep_ticks_per_month(inputs)
    by_item = dynamodb_storage_by_item(inputs, path)
    stored = sum(by_item.values())  # GB-months per run, all items, DynamoDB's overhead included
    pitr = PRICE_DYNAMODB_PITR_GB_MONTH if inputs.point_in_time_recovery else 0.0
    lambda_processes = concurrency_for(inputs, inputs.rate)
    api_invocations = r.api_requests
    logs_bytes = (
        inputs.worker_log_bytes_per_run
        + inputs.lambda_platform_log_bytes_per_invocation / inputs.records_per_invocation
        + inputs.api_log_bytes_per_request * api_invocations
    )
    traces = XRAY_SAMPLED_SHARE * (
        1 / inputs.records_per_invocation + api_invocations + 1 / inputs.archive_batch
    )
    parts = {
        "dynamodb": r.writes * PRICE_WRITE_REQUEST + r.reads * PRICE_READ_REQUEST,
        "dynamodb_storage": stored * PRICE_DYNAMODB_GB_MONTH,
        "dynamodb_pitr": stored * pitr,
        "sqs": r.sqs * PRICE_SQS_REQUEST,
        "api_gateway": r.api_requests * http_api_price(runs_per_month * r.api_requests),
        "lambda_api": api_invocations * PRICE_LAMBDA_REQUEST
        + r.api_seconds * inputs.api_memory_mb / 1024 * gb_s,
        "lambda_workers": PRICE_LAMBDA_REQUEST / inputs.records_per_invocation
        + worker_seconds_per_run(inputs) * inputs.worker_memory_mb / 1024 * gb_s,
        "event_pollers": pollers * per_run_month,
        "webhook_secrets": webhook_secrets_per_month(inputs, lambda_processes) * per_run_month,
        "lambda_sweeps": r.sweep_seconds * inputs.sweeper_memory_mb / 1024 * gb_s
        + fixed_sweep * per_run_month,
        "archive": (
            PRICE_LAMBDA_REQUEST
            + inputs.archive_seconds_per_batch * inputs.archiver_memory_mb / 1024 * gb_s
            + inputs.archive_objects_per_batch * PRICE_S3_PUT
        )
        / inputs.archive_batch
        + PRICE_STREAM_READ_BY_LAMBDA,
        "history_storage": inputs.archived_row_bytes
        / GB
        * inputs.history_retention_days
        / DAYS_PER_MONTH
        * PRICE_S3_GB_MONTH,
        "cloudwatch": logs_bytes / GB * PRICE_CW_LOGS_INGESTED_GB
        + inputs.custom_metrics * PRICE_CW_METRIC_MONTH * per_run_month,
        "xray": traces * PRICE_XRAY_TRACE,
    }
    per_million = {name: value * 1e6 for name, value in parts.items()}
    provisioned_dynamodb = (
        (r.writes * PRICE_WCU_HOUR + r.reads * PRICE_RCU_HOUR)
        / 3600
        / inputs.provisioned_utilisation
        * 1e6
    )
    on_demand = sum(per_million.values())
    fargate = fargate_workers(inputs)
    fargate_tasks = fargate.task_dollars_per_run * 1e6
    # A Fargate task is one worker process: it decrypts a tenant's secret once per cache period for
    # all its slots, where Lambda pays it per execution environment.
    fargate_webhook = webhook_secrets_per_month(inputs, fargate.tasks_at_rate) * per_run_month * 1e6
    fargate_sqs = (
        (
            r.sqs
            - 2 / inputs.records_per_invocation
            + fargate.receives_per_run
            + fargate.deletes_per_run
        )
        * PRICE_SQS_REQUEST
        * 1e6
    )
    on_demand_fargate = (
        on_demand
        - per_million["lambda_workers"]
        - per_million["event_pollers"]
        - per_million["sqs"]
        - per_million["webhook_secrets"]
        + fargate_tasks
        + fargate_sqs
        + fargate_webhook
    )
    to_provisioned = provisioned_dynamodb - per_million["dynamodb"]
    return PathBill(
        path=path,
        parts={name: round(value, 6) for name, value in per_million.items()},
        dynamodb_provisioned=round(provisioned_dynamodb, 6),
        on_demand=round(on_demand, 4),
        provisioned=round(on_demand + to_provisioned, 4),
        eventbridge_scheduler=round(scheduler_per_million(runs_per_month), 6),
        fargate_tasks=round(fargate_tasks, 6),
        fargate_sqs=round(fargate_sqs, 6),
        on_demand_fargate=round(on_demand_fargate, 4),
        provisioned_fargate=round(on_demand_fargate + to_provisioned, 4),
        dynamodb_storage_by_item={
            item: round(gb_months * (PRICE_DYNAMODB_GB_MONTH + pitr) * 1e6, 6)
            for item, gb_months in by_item.items()
        },
        fargate_webhook_secrets=round(fargate_webhook, 6),
    )


def whole_bill(inputs: Inputs, runs_per_month: float, pollers: float = 0.0) -> Bill:
    """Every path's bill per million runs at the month's volume, beside EventBridge
    Scheduler's, and issue 16's targets met or missed."""
    paths = [path_bill(inputs, path, runs_per_month, pollers) for path in PATHS]
    by_path = {b.path: b for b in paths}
    targets = []
    for workers, suffix in (("lambda", ""), ("fargate", "_fargate")):
        for path, capacity, target in TARGETS:
            value = getattr(by_path[path], capacity + suffix)
            targets.append(TargetCheck(path, capacity, value, target, value <= target, workers))
    webhook = webhook_secrets_per_month(inputs, concurrency_for(inputs, inputs.rate))
    fixed = {
        "custom_metrics": round(inputs.custom_metrics * PRICE_CW_METRIC_MONTH, 2),
        "sweep_ticks": round(sweep_ticks_per_month(inputs), 2),
        "event_pollers": round(pollers, 2),
    }
    return Bill(
        runs_per_month=runs_per_month,
        eventbridge_scheduler_per_million=round(scheduler_per_million(runs_per_month), 4),
        paths=paths,
        targets=targets,
        fargate=fargate_workers(inputs),
        staged_second=staged_second_per_million(inputs),
        batch_fill=lower_fill_bill(inputs, runs_per_month, pollers),
        fixed_monthly=fixed,
        webhook_secrets_per_month=round(webhook, 2),
        warnings=free_tier_warnings(inputs, runs_per_month, sum(fixed.values()), webhook),
    )


def _workers_and_sqs(bill: PathBill) -> float:
    return bill.parts["lambda_workers"] + bill.parts["event_pollers"] + bill.parts["sqs"]


def lower_fill_bill(
    inputs: Inputs, runs_per_month: float, pollers: float = 0.0
) -> dict[str, float]:
    """The Lambda workers + SQS ($ per million runs) at the inputs' fill and at LOWER_BATCH_FILL
    records an invocation, and a batch-created one-off's totals at that lower fill: the
    workers and SQS figures hold for the fill priced (full batches by default)."""
    lower = replace(inputs, worker_batch_fill=min(LOWER_BATCH_FILL, inputs.records_per_invocation))
    now = path_bill(inputs, "one_off_batch", runs_per_month, pollers)
    then = path_bill(lower, "one_off_batch", runs_per_month, pollers)
    return {
        "records_per_invocation": inputs.records_per_invocation,
        "workers_and_sqs": round(_workers_and_sqs(now), 4),
        "lower_records_per_invocation": lower.records_per_invocation,
        "lower_workers_and_sqs": round(_workers_and_sqs(then), 4),
        "lower_one_off_batch_on_demand": then.on_demand,
        "lower_one_off_batch_provisioned": then.provisioned,
    }


def free_tier_warnings(
    inputs: Inputs, runs_per_month: float, fixed_monthly: float, webhook_monthly: float = 0.0
) -> list[str]:
    """Below FIXED_COSTS_WARNING_RATE: the comparison with EventBridge Scheduler is made at
    volume (its free tier counted, duetime's not; fixed monthly costs spread over few runs)."""
    if inputs.rate >= FIXED_COSTS_WARNING_RATE or runs_per_month <= 0:
        return []
    return [
        f"At {inputs.rate:,g} runs/s ({runs_per_month / 1e6:,.1f} million runs a month) the "
        "comparison with EventBridge Scheduler does not hold: it is made at volume (≥ "
        f"{FIXED_COSTS_WARNING_RATE:g} runs/s). Scheduler's 14 million free invocations a month "
        f"are counted (${scheduler_per_million(runs_per_month):.2f} per million here); "
        "duetime's free tiers are not (Lambda 1 million requests and 400,000 GB-s, SQS 1 "
        "million requests, CloudWatch 10 metrics and 5 GB of logs, X-Ray 100,000 traces, "
        "DynamoDB 25 GB: an account's, shared); and its fixed monthly costs (custom metrics, "
        f"the sweeps' ticks, pollers: ${fixed_monthly:,.2f} a month) are "
        f"${fixed_monthly / runs_per_month * 1e6:,.2f} of every path's $ per million, the "
        f"webhook secrets' decrypts (${webhook_monthly:,.2f} a month: per worker environment "
        f"and tenant, however few the runs) ${webhook_monthly / runs_per_month * 1e6:,.2f}."
    ]


def limit_checks(inputs: Inputs, peak: Tables, sustained: Tables, workers: Workers) -> list[Check]:
    """The demand on each limit at the peak, as configured (the inputs' deployment)."""
    shards = inputs.timer_shards
    timer_writes = timer_writes_per_second(inputs)
    sweep = sweep_estimate(inputs, shards)
    throughput = per_shard_throughput(inputs)
    recurring_throughput = per_shard_recurring_throughput(inputs)
    during = while_sweeping(inputs, shards)
    during_sustained = while_sweeping(inputs, shards, burst=False)
    hot_writes = inputs.hot_tenant_share * peak.jobs_wru / inputs.job_partitions
    # The hot tenant's share of the job reads while sweeping: the workers' (every run) and the
    # sweeps' (its recurring timers), over its partitions.
    hot_reads = inputs.hot_tenant_share * during.jobs_rru / inputs.job_partitions
    # A Query page of timers costs its bytes ÷ 4 KB (strongly consistent); each partition is
    # read by its own shard's sweep, at that sweep's (faster, one-off) throughput.
    partition_reads = max(throughput, recurring_throughput) * query_units_per_timer(inputs)
    sweepers = sweeper_concurrency(inputs)
    if sweep.read_bound_seconds > sweep.shard_seconds:
        sweep_fix = (
            "the jobs table's read quota bounds it (the recurring timers' job reads): "
            "table_quota_request_units ≥ "
            + _ceil_to(
                SWEEP_JOB_READS
                * sweep.recurring_timers
                / (inputs.sweep_deadline_seconds - inputs.coordinator_seconds)
                + WORKER_JOB_READS * inputs.rate
            )
        )
    else:
        sweep_fix = (
            f"more shards: timer_shards ≥ {sweep.shards_for_deadline} (per shard "
            f"{throughput:,.0f} one-off timers/s, {sweep.throughput_source}; "
            f"{recurring_throughput:,.0f} recurring timers/s, {sweep.recurring_throughput_source})"
        )
    if inputs.provisioned:
        mapping_fix = (
            "worker_pollers['normal'].maximum ≥ "
            f"{math.ceil(workers.capacity_peak / inputs.worker_queues / POLLER_CONCURRENCY)}"
        )
    else:
        with_pollers = replace(
            inputs, worker_min_pollers=MIN_POLLERS_RANGE[0], worker_max_pollers=1
        )
        mapping_fix = (
            "provisioned-mode pollers (worker_pollers['normal'], maximum ≥ "
            f"{pollers_for(with_pollers, peak_run_rate(inputs))}), or "
            f"{workers.queues_needed} queues/mappings (queue_lanes['lambda/normal'] = "
            f"{workers.queues_needed})"
        )
    checks = [
        Check(
            "timer partition writes/s (minute bucket / shards)",
            timer_writes / shards,
            PARTITION_WCU,
            f"timer_shards ≥ {shards_needed(inputs)}",
        ),
        Check(
            "timer partition reads (RCU/s while sweeping)",
            partition_reads,
            PARTITION_RCU,
            "eventually consistent sweep queries, or smaller timer items",
        ),
        Check(
            "horizon item reads/s (per shard, strongly consistent)",
            horizon_reads_per_second(inputs) / shards,
            PARTITION_RCU,
            f"more shards (each has its own horizon item): timer_shards ≥ "
            f"{shards_for_horizon(inputs)}",
        ),
        Check(
            "hot tenant jobs-partition writes/s",
            hot_writes,
            PARTITION_WCU,
            f"job_partitions ≥ "
            f"{math.ceil(hot_writes * inputs.job_partitions / (PARTITION_WCU * inputs.headroom))}"
            ", or a lower per-tenant submission quota",
        ),
        Check(
            "hot tenant jobs-partition reads/s",
            hot_reads,
            PARTITION_RCU,
            f"job_partitions ≥ "
            f"{math.ceil(hot_reads * inputs.job_partitions / (PARTITION_RCU * inputs.headroom))}"
            ", or eventually consistent job reads",
        ),
        Check(
            "sweep of the burst minute (s)",
            sweep.seconds,
            inputs.sweep_deadline_seconds,
            sweep_fix,
        ),
        Check(
            "sweeper concurrency: one sweep per shard",
            shards,
            inputs.sweeper_reserved_concurrency or inputs.account_concurrency,
            f"sweeper_reserved_concurrency ≥ {2 * shards} (two ticks may overlap)",
        ),
        Check(
            "worker concurrency vs account quota",
            workers.concurrency_peak + sweepers,
            inputs.account_concurrency,
            f"lambda_concurrency_quota ≥ {_ceil_to(workers.concurrency_peak + sweepers + 100)} "
            "(workers + sweeps; plus the API's)",
        ),
        Check(
            "worker concurrency per event source mapping",
            workers.capacity_peak / inputs.worker_queues,
            mapping_cap(inputs),
            mapping_fix,
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
            "more minimum pollers (provisioned mode starts the burst at 10 per poller and "
            "adds 1,000 a minute), a higher account quota, or keep concurrency warm",
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
            "the fargate runtime for long runs",
        ),
    ]
    # Per table: (sustained, peak) request units per second. The jobs table's reads and the
    # timers table's reads and writes are what they take while the shards' sweeps run (the
    # recurring timers' jobs, their next timers, the Query pages) plus the workers' and the
    # API's: their per-second peaks, above their per-minute averages.
    loads = {
        "jobs": ((sustained.jobs_wru, peak.jobs_wru), (during_sustained.jobs_rru, during.jobs_rru)),
        "timers": (
            (during_sustained.timers_wru, during.timers_wru),
            (during_sustained.timers_rru, during.timers_rru),
        ),
        "runs": ((sustained.runs_wru, peak.runs_wru), (sustained.runs_rru, peak.runs_rru)),
    }
    for name, (wru, rru) in loads.items():
        warm_writes = inputs.warm_writes.get(name, 0)
        warm_reads = inputs.warm_reads.get(name, 0)
        checks.append(
            Check(
                f"on-demand {name} table WRU/s vs 2x previous (sustained) peak",
                wru[1],
                max(ON_DEMAND_DOUBLING * wru[0], ON_DEMAND_NEW_TABLE_WRU, warm_writes),
                f"warm throughput: {name} writes ≥ {_ceil_to(wru[1])}",
            )
        )
        checks.append(
            Check(
                f"on-demand {name} table RRU/s vs 2x previous (sustained) peak",
                rru[1],
                max(ON_DEMAND_DOUBLING * rru[0], ON_DEMAND_NEW_TABLE_RRU, warm_reads),
                f"warm throughput: {name} reads ≥ {_ceil_to(rru[1])}",
            )
        )
        checks.append(
            Check(
                f"{name} table WRU/s vs per-table quota",
                wru[1],
                inputs.table_quota,
                f"table_quota_request_units ≥ {_ceil_to(wru[1])}",
            )
        )
        rru_fix = f"table_quota_request_units ≥ {_ceil_to(rru[1])}"
        if name == "jobs":
            rru_fix += (
                " (the shards' sweeps read every recurring timer's job strongly consistently, "
                "all at once: throttled, a BatchGetItem still failing after its retries parks "
                "its timers), or pace the sweeps to a shared read budget"
            )
        checks.append(
            Check(f"{name} table RRU/s vs per-table quota", rru[1], inputs.table_quota, rru_fix)
        )
        checks.append(
            Check(
                f"new on-demand {name} table: RRU/s at first traffic",
                rru[0],
                max(ON_DEMAND_NEW_TABLE_RRU, warm_reads),
                f"warm throughput: {name} reads ≥ {_ceil_to(rru[0])}, or ramp over "
                f"{warmup_minutes(rru[0], ON_DEMAND_NEW_TABLE_RRU)} minutes of doublings",
            )
        )
        checks.append(
            Check(
                f"new on-demand {name} table: WRU/s at first traffic",
                wru[0],
                max(ON_DEMAND_NEW_TABLE_WRU, warm_writes),
                f"warm throughput: {name} writes ≥ {_ceil_to(wru[0])}, or ramp over "
                f"{warmup_minutes(wru[0], ON_DEMAND_NEW_TABLE_WRU)} minutes of doublings",
            )
        )
    return checks


def _ceil_to(value: float, step: int = 1_000) -> str:
    """A figure to configure: `value` rounded up to `step`, with thousands separators."""
    if not math.isfinite(value):
        return "∞"
    return f"{math.ceil(value / step) * step:,}"


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


def plan(
    inputs: Inputs,
    *,
    scan: bool = True,
    measurement: SweepMeasurement | None = None,
    recurring_measurement: SweepMeasurement | None = None,
) -> Plan:
    """The plan for `inputs`; `scan` also finds the load at which each limit breaks."""
    shards = max(
        inputs.timer_shards,
        shards_needed(inputs),
        shards_for_horizon(inputs),
        shards_for_deadline(inputs),
    )
    sustained = table_load(inputs, burst=False)
    peak = table_load(inputs, burst=True)
    as_configured = workers_plan(
        inputs, queues=inputs.worker_queues, account_concurrency=inputs.account_concurrency
    )
    queues = max(inputs.worker_queues, as_configured.queues_needed)
    sized = inputs
    if inputs.provisioned:  # enough pollers for the peak (within AWS's 2,000 per mapping)
        needed = math.ceil(as_configured.capacity_peak / queues / POLLER_CONCURRENCY)
        sized = replace(
            inputs,
            worker_max_pollers=min(
                MAX_POLLERS_RANGE[1], max(inputs.worker_max_pollers or 0, needed)
            ),
        )
    recommended = workers_plan(
        sized,
        queues=queues,
        account_concurrency=max(
            inputs.account_concurrency,
            as_configured.concurrency_peak + sweeper_concurrency(inputs) + 100,
        ),
    )
    checks = limit_checks(inputs, peak, sustained, as_configured)
    cost = monthly_cost(inputs, sustained, peak, as_configured)
    breaking = breaking_scales(inputs) if scan else {}
    if scan:  # a limit failing now breaks at today's load at the latest (the grid is coarse)
        breaking |= {c.name: min(breaking.get(c.name, 1.0), 1.0) for c in checks if not c.ok}
    return Plan(
        inputs=inputs,
        shards_needed=shards,
        sustained=sustained,
        peak=peak,
        sweep=sweep_estimate(inputs, inputs.timer_shards),
        workers=recommended,
        workers_as_configured=as_configured,
        cost=cost,
        checks=checks,
        breaking_scale=breaking,
        sweep_measurement=measurement,
        sweep_measurement_recurring=recurring_measurement,
        bill=whole_bill(inputs, cost.runs_per_month, cost.event_pollers),
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


def input_sources(inputs: Inputs) -> dict[str, str]:
    """Where the worker's and the bill's time inputs come from: measured, given or assumed."""
    defaults = Inputs(rate=inputs.rate, burst=inputs.burst)

    def given_or(name: str, otherwise: str) -> str:
        return "given" if getattr(inputs, name) != getattr(defaults, name) else otherwise

    footprint = (
        inputs.worker_footprint_source
        if inputs.worker_cpu_seconds_per_run is not None
        else "not counted"
    )
    chosen = chosen_worker_memory_mb(inputs)
    return {
        "worker_cpu_seconds_per_run": footprint,
        "worker_peak_rss_mb": footprint if inputs.worker_peak_rss_mb is not None else "none",
        "worker_log_bytes_per_run": inputs.worker_log_source,
        "worker_memory_mb": (
            "as deployed (infra/constructs/engine.py)"
            if inputs.worker_memory_mb == WORKER_MEMORY_MB
            else "given"
        )
        + (f"; the memory rule chooses {chosen} MB from the measurement" if chosen else ""),
        "worker_seconds_per_run": (
            "given (measured billed duration)"
            if inputs.worker_seconds_per_run is not None
            else "computed: invocation seconds ÷ batch size"
        ),
        "run_overhead_ms": given_or("run_overhead_ms", "assumed (in-Region call latency)"),
        "early_wait_seconds": given_or(
            "early_wait_seconds", "the held sends' release window (measured p99 56-125 ms)"
        ),
        "run_seconds": given_or("run_seconds", "assumed (the target's execution time)"),
        "api_ms_single": given_or("api_ms_single", "assumed"),
        "api_ms_batch": given_or("api_ms_batch", "assumed"),
        "records_per_invocation": (
            "given" if inputs.worker_batch_fill is not None else "assumed (full batches)"
        ),
        "job_item_bytes": given_or(
            "job_item_bytes", "assumed (Job.size_bytes of a webhook job, 46 B payload)"
        ),
        "webhook_tenants": given_or("webhook_tenants", "assumed"),
    }


def to_json(result: Plan) -> dict[str, object]:
    data = asdict(result)
    data["input_sources"] = input_sources(result.inputs)
    data["worker_memory_rule_mb"] = chosen_worker_memory_mb(result.inputs)
    data["checks"] = [
        asdict(c)
        | {
            "ratio": round(c.ratio, 3),
            "ok": c.ok,
            "breaks_at_rate": _breaks_at(result, c),
        }
        for c in result.checks
    ]
    data["limits"] = [
        {
            "name": c.name,
            "holds": c.ok,
            "demand": c.demand,
            "limit": c.limit,
            "ratio": round(c.ratio, 3),
            "fix": c.fix,
            "breaks_at_rate": _breaks_at(result, c),
        }
        for c in result.checks
    ]
    data["cost"] |= {
        "total_on_demand": round(result.cost.total_on_demand, 2),
        "per_million_on_demand": round(result.cost.per_million_on_demand, 2),
    }
    data["profile"] = result.inputs.profile
    data["sweep_throughput_source"] = result.sweep.throughput_source
    data["sweep_throughput_sources"] = {
        "one_off": result.sweep.throughput_source,
        "recurring": result.sweep.recurring_throughput_source,
    }
    data["broken_first"] = result.broken()[0].name if result.broken() else None
    result_json = _finite(data)
    assert isinstance(result_json, dict)
    return result_json


def _breaks_at(result: Plan, check: Check) -> float | None:
    """The sustained rate (with the burst scaled alike) at which a limit breaks."""
    scale = result.breaking_scale.get(check.name)
    return None if scale is None else round(scale * result.inputs.rate)


def _batch_fill(inputs: Inputs) -> str:
    """What the records per invocation are: full batches (the default), or the fill given."""
    if inputs.worker_batch_fill is None:
        return "full batches assumed: --records-per-invocation for another fill"
    return f"{inputs.records_per_invocation:g} records an invocation"


def _n(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def render(result: Plan) -> str:
    i, s, w, c = result.inputs, result.sweep, result.workers, result.cost
    cfg = result.workers_as_configured
    writes_shards, horizon_shards = shards_needed(i), shards_for_horizon(i)
    deadline_shards = shards_for_deadline(i)
    assumed = "**assumed** (from the per-call latencies; no measurement file)"
    source = s.throughput_source if s.throughput_source != "assumed" else assumed
    recurring_source = (
        s.recurring_throughput_source if s.recurring_throughput_source != "assumed" else assumed
    )
    if i.provisioned:
        mapping = (
            f"provisioned mode, {i.worker_min_pollers} to {i.worker_max_pollers} pollers "
            f"(start {cfg.start_capacity:,}, +{i.ramp_per_minute:,.0f}/minute, cap "
            f"{mapping_cap(i):,} per mapping); pollers {cfg.pollers_sustained:,} sustained, "
            f"{cfg.pollers_peak:,} at the peak"
        )
    else:
        mapping = (
            f"standard mode (start {cfg.start_capacity:,}, +{i.ramp_per_minute:,.0f}/minute, "
            f"MaximumConcurrency {mapping_cap(i):,} per mapping)"
        )
    lines = [
        f"# duetime scale plan: {i.rate:,.0f} runs/s sustained + {i.burst:,} due in one minute",
        "",
        f"- profile `{i.profile}`: {i.timer_shards} timer shards, {i.job_partitions} job "
        f"partition(s) per tenant, account concurrency {i.account_concurrency:,}, table quota "
        f"{i.table_quota:,} RU/s, worker mapping in {mapping}",
        f"- peak run rate: {_n(w.peak_runs_per_second)} runs/s "
        f"(burst over {i.burst_drain_seconds:.0f} s); run {i.run_seconds} s; "
        f"{i.recurring_share:.0%} of the sustained runs recurring; "
        f"{i.writes_per_run:.2f} writes, {i.reads_per_run:.2f} reads, {i.sqs_per_run} SQS "
        "requests per run",
        f"- timer shards needed: {max(writes_shards, horizon_shards, deadline_shards)} "
        f"(configured {i.timer_shards}): {writes_shards} for "
        f"{_n(timer_writes_per_second(i))} timer writes/s into one bucket at ≤ "
        f"{PARTITION_WCU * i.headroom:,.0f} per partition, {horizon_shards} for the horizon items "
        f"({_n(horizon_reads_per_second(i))} reads/s at ≤ {PARTITION_RCU * i.headroom:,.0f} "
        f"each), {deadline_shards} for the sweep deadline",
        f"- sweep throughput per shard: one-off timers {s.per_shard_timers_per_second:,.0f}/s, "
        f"{source}; recurring timers {s.per_shard_recurring_timers_per_second:,.0f}/s, "
        f"{recurring_source}",
        f"- sweep of the burst minute: {s.timers:,} timers ({s.one_off_timers:,} one-off, "
        f"{s.recurring_timers:,} recurring) over {s.shards} shards ({s.timers_per_shard:,} "
        f"each, {s.pages_per_partition} pages): slowest shard {_n(s.shard_seconds)} s; reading "
        f"the recurring timers' jobs within the jobs table's quota takes ≥ "
        f"{_n(s.read_bound_seconds)} s; handed over ≈ {_n(s.seconds)} s after the tick "
        f"(deadline {s.deadline_seconds:.0f} s); jobs table reads while sweeping "
        f"{_n(s.jobs_rru_while_sweeping)} RRU/s",
        f"- workers: invocation {w.invocation_seconds} s (batch {i.worker_batch_size}, "
        f"{_batch_fill(i)}, records run concurrently); concurrency "
        f"{w.concurrency_sustained:,} sustained, "
        f"{w.concurrency_peak:,} at the peak; {w.in_flight_peak:,} messages in flight; "
        f"{w.queues_needed} queue(s)/mapping(s)",
        f"- queues/event source mappings per (runtime, priority), at most "
        f"{mapping_ceiling(i):,} concurrent batches each: {w.queues_needed_sustained} at "
        f"{_n(i.rate)} runs/s, {w.queues_needed} at the peak ({_n(w.peak_runs_per_second)} "
        f"runs/s); worker {worker_seconds_per_run(i) * 1000:,.0f} ms billed per run "
        f"({i.worker_memory_mb} MB, {i.lambda_architecture})",
        f"- worker time per invocation: early wait {_n(i.early_wait_seconds)} s + run "
        f"{_n(i.run_seconds)} s + calls {_n(i.run_overhead_ms)} ms + the batch's CPU "
        f"{batch_cpu_seconds(i) * 1000:,.0f} ms ({i.records_per_invocation:g} runs of "
        f"{(i.worker_cpu_seconds_per_run or 0) * 1000:.1f} ms CPU at "
        f"{cpu_share(i.worker_memory_mb):.2f} vCPU)",
        "- inputs: " + "; ".join(f"{name} {source}" for name, source in input_sources(i).items()),
        f"- burst as configured ({i.worker_queues} queue(s), account concurrency "
        f"{i.account_concurrency:,}): ramp {_n(cfg.ramp_seconds)} s, drained "
        f"{_n(cfg.drain_seconds)} s after it starts, max backlog {cfg.max_backlog:,}, up to "
        f"{_n(cfg.max_extra_lateness_seconds)} s late"
        + (
            " (capacity below the sustained rate: never drains)"
            if math.isinf(cfg.drain_seconds)
            else ""
        ),
        f"- burst with the plan ({w.queues_needed} queues, concurrency ≥ "
        f"{w.concurrency_peak + sweeper_concurrency(i) + 100:,}"
        + (f", ≤ {w.pollers_peak:,} pollers" if w.pollers_peak is not None else "")
        + f"): ramp {_n(w.ramp_seconds)} s, drained {_n(w.drain_seconds)} s after it starts, "
        f"max backlog {w.max_backlog:,}, up to {_n(w.max_extra_lateness_seconds)} s late",
        "",
        "## Request units per second (sustained → peak, averaged over the minute)",
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
    quiet = while_sweeping(i, i.timer_shards, burst=False)
    lines.append(
        f"| jobs, while a minute is swept | | {_n(quiet.jobs_rru)} → "
        f"{_n(s.jobs_rru_while_sweeping)} |"
    )
    lines.append(
        f"| timers, while a minute is swept | {_n(quiet.timers_wru)} → "
        f"{_n(s.timers_wru_while_sweeping)} | {_n(quiet.timers_rru)} → "
        f"{_n(s.timers_rru_while_sweeping)} |"
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
        f"| Lambda workers ({i.worker_memory_mb} MB, arm64) | {c.lambda_workers:,.0f} |",
        f"| Lambda coordinator + per-shard sweeps ({i.sweeper_memory_mb} MB) "
        f"| {c.lambda_sweeps:,.0f} |",
        f"| SQS event pollers (provisioned mode, EPU-hours) | {c.event_pollers:,.0f} |",
        f"| DynamoDB requests + SQS + Lambda workers, sweeps and pollers, on demand (≈ "
        f"${c.per_million_on_demand:.2f} per million runs; the whole bill is below) "
        f"| {c.total_on_demand:,.0f} |",
        *render_bill(result),
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


BILL_COLUMNS = (
    ("dynamodb", "DynamoDB requests"),
    ("dynamodb_storage", "DynamoDB storage"),
    ("dynamodb_pitr", "PITR"),
    ("sqs", "SQS"),
    ("api_gateway", "API Gateway"),
    ("lambda_api", "API function"),
    ("lambda_workers", "workers"),
    ("event_pollers", "pollers"),
    ("webhook_secrets", "webhook secrets"),
    ("lambda_sweeps", "coordinator + sweeps"),
    ("archive", "archiver + S3 PUTs"),
    ("history_storage", "archive storage"),
    ("cloudwatch", "CloudWatch"),
    ("xray", "X-Ray"),
)


def render_bill(result: Plan) -> list[str]:
    """The whole bill per million runs by path, beside EventBridge Scheduler, and the targets."""
    bill = result.bill
    if bill is None:
        return []
    lines = [
        "",
        f"## The whole bill, $ per million runs ({bill.runs_per_month / 1e9:,.2f} billion runs "
        "a month, each path alone)",
        "",
        "| path | " + " | ".join(title for _, title in BILL_COLUMNS) + " | **on demand** | "
        "**provisioned** | EventBridge Scheduler |",
        "|---" * (len(BILL_COLUMNS) + 4) + "|",
    ]
    for p in bill.paths:
        cells = " | ".join(f"{p.parts[name]:.3f}" for name, _ in BILL_COLUMNS)
        lines.append(
            f"| {PATH_TITLES[p.path]} | {cells} | **{p.on_demand:.2f}** | **{p.provisioned:.2f}**"
            f" (DynamoDB {p.dynamodb_provisioned:.3f}) | {p.eventbridge_scheduler:.3f} |"
        )
    i = result.inputs
    by_path = {p.path: p for p in bill.paths}
    one_off = by_path["one_off_batch"]
    fill = bill.batch_fill
    lines += [
        "",
        "Streams: the archiver's reads of the runs table's stream are free (GetRecords by a "
        "Lambda trigger); TTL deletes are free. EventBridge Scheduler: $1.00 per million after "
        "14 million free a month, no run history; duetime's free tiers are not counted (the "
        "comparison is made at volume).",
        "",
        f"DynamoDB storage (${PRICE_DYNAMODB_GB_MONTH:.2f} per GB-month) and point-in-time "
        f"recovery (${PRICE_DYNAMODB_PITR_GB_MONTH:.2f}, every table), each item "
        f"+{i.item_overhead_bytes} B: the run record ({i.run_item_bytes} B, "
        f"{i.hot_window_days:g} days), a one-off's job item ({i.job_item_bytes} B, its run's "
        f"hot window after it; a recurring job's, the interval to its next occurrence) and "
        f"timer ({i.timer_item_bytes} B, {i.timer_ttl_days:g} days after its due time): "
        + ", ".join(
            f"{item} {value:.3f}" for item, value in one_off.dynamodb_storage_by_item.items()
        )
        + " $ per million one-off runs (storage and recovery).",
        "",
        f"Webhook secrets: each of {concurrency_for(i, i.rate):,} worker execution "
        "environments (the sustained concurrency) decrypts the secret of each of the "
        f"{i.webhook_tenants:,} tenants with HTTP targets it delivers for once every "
        f"{i.webhook_secret_cache_seconds:g} s (a KMS Decrypt and a GetItem): "
        f"${bill.webhook_secrets_per_month:,.0f} a month.",
        "",
        f"Workers and SQS: priced at {fill['records_per_invocation']:g} records an invocation"
        + (" (full batches)" if i.worker_batch_fill is None else "")
        + "; the mapping has no batching window, so a trickle fills batches less. At "
        f"{fill['lower_records_per_invocation']:g} records: ${fill['lower_workers_and_sqs']:.2f}"
        f" per million runs instead of ${fill['workers_and_sqs']:.2f}, a batch-created one-off "
        f"${fill['lower_one_off_batch_on_demand']:.2f} on demand "
        f"(${fill['lower_one_off_batch_provisioned']:.2f} provisioned).",
        "",
        f"Provisioned: DynamoDB capacity for the sustained rate at "
        f"{i.provisioned_utilisation * 100:.0f} % use, a flat load; the burst and the sweeps' "
        "per-second peaks rely on DynamoDB's burst capacity (up to 300 s of unused capacity, "
        "best effort).",
        *(line for w in bill.warnings for line in ("", f"**Warning:** {w}")),
        "",
        "| target (issue 16) | $ per million | target | met |",
        "|---|---|---|---|",
    ]
    for t in bill.targets:
        workers = ", Fargate workers" if t.workers == "fargate" else ""
        lines.append(
            f"| {PATH_TITLES[t.path]}, {t.capacity.replace('_', ' ')}{workers} | "
            f"{t.per_million:.2f} | ≤ {t.target:.2f} | {'yes' if t.met else '**no**'} |"
        )
    return lines + render_fargate(result)


def render_fargate(result: Plan) -> list[str]:
    """The bill with the workers on Fargate, and what a staged second costs on each runtime."""
    bill, i = result.bill, result.inputs
    if bill is None or bill.fargate is None:
        return []
    f = bill.fargate
    bound = "slots" if f.bound == "slots" else "vCPU"
    lines = [
        "",
        f"### With the workers on Fargate ({i.fargate_vcpu:g} vCPU, {i.fargate_memory_gb:g} GB "
        f"arm64 tasks, {i.fargate_task_concurrency} runs at once, "
        f"{i.fargate_utilisation * 100:.0f} % used)",
        "",
        f"A run holds a slot {f.slot_seconds:.3f} s; a task serves {f.runs_per_task_second:,.1f} "
        f"runs/s (bound by its {bound}); the sustained rate is priced as {f.tasks_at_rate:,} "
        f"tasks at that use. SQS per run: {f.receives_per_run:.2f} "
        f"receives, {f.deletes_per_run:.2f} deletes (Lambda's mapping: 0.1 each).",
        "",
        f"Scaling: as configured (fargate_max_tasks {f.max_tasks:,}) the Fargate workers serve "
        f"at most {f.runs_per_second_at_max_tasks:,.0f} runs/s. At {i.rate:,.0f} runs/s the "
        f"service's backlog steps settle at {f.tasks_scaled:,} tasks "
        f"({i.rate / (f.tasks_scaled * f.runs_per_task_second) * 100:.0f} % used): "
        + (
            f"fargate_max_tasks ≥ {f.tasks_scaled:,}, "
            if f.tasks_scaled > f.max_tasks
            else "within the maximum, "
        )
        + f"and {f.vcpu_scaled:,g} vCPU of the account's Fargate On-Demand vCPU quota. "
        f"Fargate launches {FARGATE_LAUNCH_BURST} tasks at once, then "
        f"{FARGATE_LAUNCHES_PER_SECOND} a second"
        + (f" ({f.launch_seconds:g} s more for {f.tasks_scaled:,})" if f.launch_seconds else "")
        + ", after the scaling alarm's minute; each task then takes its start-up.",
        "",
        "| path | Lambda workers + pollers + SQS | Fargate tasks + SQS | **on demand** | "
        "**provisioned** |",
        "|---|---|---|---|---|",
    ]
    for p in bill.paths:
        lambda_side = p.parts["lambda_workers"] + p.parts["event_pollers"] + p.parts["sqs"]
        lines.append(
            f"| {PATH_TITLES[p.path]} | {lambda_side:.3f} | {p.fargate_tasks + p.fargate_sqs:.3f}"
            f" | **{p.on_demand_fargate:.2f}** | **{p.provisioned_fargate:.2f}** |"
        )
    staged = bill.staged_second
    lines += [
        "",
        f"A staged second (`stage_seconds`) adds to the workers, per million runs: Lambda "
        f"${staged['lambda']:.2f}, Fargate ${staged['fargate']:.2f}.",
    ]
    return lines


def _pollers(value: str) -> tuple[int, int] | None:
    """`MIN,MAX` event pollers (provisioned mode), or `none` (standard mode)."""
    if value.lower() == "none":
        return None
    try:
        low, high = (int(part) for part in value.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected MIN,MAX or none, got {value!r}") from exc
    if not (MIN_POLLERS_RANGE[0] <= low <= MIN_POLLERS_RANGE[1]) or not (
        MAX_POLLERS_RANGE[0] <= high <= MAX_POLLERS_RANGE[1]
    ):
        raise argparse.ArgumentTypeError(
            f"pollers: minimum {MIN_POLLERS_RANGE[0]}..{MIN_POLLERS_RANGE[1]}, maximum "
            f"{MAX_POLLERS_RANGE[0]}..{MAX_POLLERS_RANGE[1]}"
        )
    if low > high:
        raise argparse.ArgumentTypeError("pollers: minimum above maximum")
    return low, high


Measurements = tuple[SweepMeasurement | None, SweepMeasurement | None]


def parse_args(argv: list[str] | None = None) -> tuple[Inputs, bool, Measurements]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=POSITIVE, required=True, help="sustained runs per second")
    parser.add_argument(
        "--burst", type=bounded(int, minimum=0), default=0, help="extra runs due in one minute"
    )
    parser.add_argument(
        "--profile",
        default="default",
        choices=sorted(PROFILES),
        help="deployment profile of infra/profiles.py (default: default)",
    )
    parser.add_argument(
        "--sweep-measurement",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON from scripts/sweep_scale.py, all one-off timers (default: "
        "docs/figures/sweep_scale.json; when missing, or `none`, the one-off throughput is "
        "assumed)",
    )
    parser.add_argument(
        "--sweep-measurement-recurring",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON from scripts/sweep_scale.py --recurring-share 1.0 (default: "
        "docs/figures/sweep_scale_recurring.json; when missing, or `none`, the recurring "
        "throughput is assumed)",
    )
    parser.add_argument("--run-seconds", type=NON_NEGATIVE, default=0.2)
    parser.add_argument("--recurring-share", type=SHARE, default=0.0)
    parser.add_argument("--hot-tenant-share", type=SHARE, default=0.1)
    # Deployment: the profile's value unless given.
    parser.add_argument("--timer-shards", type=COUNT)
    parser.add_argument("--job-partitions", type=COUNT)
    parser.add_argument("--worker-queues", type=COUNT)
    parser.add_argument(
        "--worker-pollers",
        type=_pollers,
        default=argparse.SUPPRESS,
        metavar="MIN,MAX|none",
        help="provisioned-mode pollers of the worker mapping, or none (standard mode)",
    )
    parser.add_argument("--worker-max-concurrency", type=COUNT, help="standard mode, per mapping")
    parser.add_argument("--account-concurrency", type=COUNT)
    parser.add_argument("--table-quota", type=COUNT, help="per-table request units per second")
    parser.add_argument("--sweeper-reserved-concurrency", type=COUNT)
    parser.add_argument("--esm-ramp-per-minute", type=POSITIVE)
    parser.add_argument("--send-parallelism", type=COUNT)
    # The worker's time per run and the requests per run: pass what a measurement found.
    parser.add_argument(
        "--early-wait-seconds",
        type=NON_NEGATIVE,
        help="the early wait an invocation pays (its batch's longest; default 0.15: the held "
        "sends' release window)",
    )
    parser.add_argument(
        "--run-overhead-ms", type=NON_NEGATIVE, help="claim + outcome + job read (30)"
    )
    parser.add_argument(
        "--worker-seconds-per-run",
        type=POSITIVE,
        help="measured billed worker seconds per run (default: invocation seconds ÷ batch)",
    )
    parser.add_argument("--worker-memory-mb", type=bounded(int, minimum=128, maximum=10_240))
    parser.add_argument(
        "--measured",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON from scripts/worker_footprint.py --json: the worker's CPU seconds per run "
        "and peak RSS (default: the measurement of MEASURED_WORKER_SOURCE)",
    )
    parser.add_argument(
        "--lambda-architecture",
        choices=sorted(PRICE_LAMBDA_GB_SECOND_BY_ARCHITECTURE),
        help="price Lambda at this architecture's rate (default arm64, as deployed)",
    )
    parser.add_argument(
        "--writes-one-off", type=NON_NEGATIVE, help="DynamoDB writes, POST /jobs (4)"
    )
    parser.add_argument(
        "--writes-one-off-batch", type=NON_NEGATIVE, help="writes, batch create (4)"
    )
    parser.add_argument("--sqs-per-run", type=NON_NEGATIVE, help="SQS requests per run (0.3)")
    parser.add_argument("--sqs-per-run-batch", type=NON_NEGATIVE, help="SQS, batch create (0.3)")
    parser.add_argument(
        "--occurrences-per-sweep", type=bounded(float, minimum=1), help="recurring (1)"
    )
    parser.add_argument(
        "--api-ms-single", type=NON_NEGATIVE, help="API function ms, POST /jobs (40)"
    )
    parser.add_argument(
        "--api-ms-batch", type=NON_NEGATIVE, help="ms, POST /jobs/batch of 100 (400)"
    )
    parser.add_argument(
        "--records-per-invocation",
        type=bounded(float, minimum=1, maximum=SQS_BATCH),
        help="records a worker invocation carries on average (default: full batches of 10; "
        "the mapping has no batching window)",
    )
    parser.add_argument(
        "--webhook-tenants",
        type=bounded(int, minimum=0),
        help="tenants with HTTP targets: each worker environment decrypts each one's secret "
        "once per cache period, 15 minutes (100)",
    )
    parser.add_argument(
        "--job-item-bytes",
        type=bounded(int, minimum=1, maximum=400_000),
        help="a job item's size in DynamoDB (724: Job.size_bytes of a webhook job)",
    )
    parser.add_argument(
        "--one-off-lead-days",
        type=NON_NEGATIVE,
        help="days from a one-off's submission to its run, its job and timer stored too (0)",
    )
    parser.add_argument(
        "--fargate-task-concurrency",
        type=COUNT,
        help="Fargate workers: runs a task holds at once (32, as deployed)",
    )
    parser.add_argument(
        "--fargate-max-tasks", type=COUNT, help="Fargate workers: the service's maximum (10)"
    )
    parser.add_argument(
        "--fargate-vcpu",
        type=bounded(float, above=0, maximum=16),
        help="Fargate workers: vCPU a task (0.5)",
    )
    parser.add_argument(
        "--fargate-memory-gb",
        type=bounded(float, above=0, maximum=120),
        help="Fargate workers: GB a task (1)",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {
        "run_seconds": args.run_seconds,
        "recurring_share": args.recurring_share,
        "hot_tenant_share": args.hot_tenant_share,
    }
    for option, name in (
        ("timer_shards", "timer_shards"),
        ("job_partitions", "job_partitions"),
        ("worker_queues", "worker_queues"),
        ("worker_max_concurrency", "worker_max_concurrency"),
        ("account_concurrency", "account_concurrency"),
        ("table_quota", "table_quota"),
        ("sweeper_reserved_concurrency", "sweeper_reserved_concurrency"),
        ("esm_ramp_per_minute", "esm_ramp_per_minute"),
        ("send_parallelism", "send_parallelism"),
        ("early_wait_seconds", "early_wait_seconds"),
        ("run_overhead_ms", "run_overhead_ms"),
        ("worker_seconds_per_run", "worker_seconds_per_run"),
        ("worker_memory_mb", "worker_memory_mb"),
        ("lambda_architecture", "lambda_architecture"),
        ("writes_one_off", "writes_one_off"),
        ("writes_one_off_batch", "writes_one_off_batch"),
        ("sqs_per_run", "sqs_per_run"),
        ("sqs_per_run_batch", "sqs_per_run_batch"),
        ("occurrences_per_sweep", "occurrences_per_sweep"),
        ("api_ms_single", "api_ms_single"),
        ("api_ms_batch", "api_ms_batch"),
        ("fargate_task_concurrency", "fargate_task_concurrency"),
        ("fargate_vcpu", "fargate_vcpu"),
        ("fargate_memory_gb", "fargate_memory_gb"),
        ("fargate_max_tasks", "fargate_max_tasks"),
        ("records_per_invocation", "worker_batch_fill"),
        ("webhook_tenants", "webhook_tenants"),
        ("job_item_bytes", "job_item_bytes"),
        ("one_off_lead_days", "one_off_lead_days"),
    ):
        if getattr(args, option) is not None:
            overrides[name] = getattr(args, option)
    if "worker_pollers" in vars(args):  # given: provisioned MIN,MAX, or none (standard)
        low, high = args.worker_pollers or (None, None)
        overrides |= {"worker_min_pollers": low, "worker_max_pollers": high}
    if args.measured is not None:
        try:
            overrides |= load_worker_footprint(args.measured)
        except (ValueError, OSError) as exc:
            parser.error(f"--measured: {exc}")
    inputs = inputs_from_profile(PROFILES[args.profile], args.rate, args.burst, **overrides)
    loaded: list[SweepMeasurement | None] = []
    for option, given, default in (
        ("--sweep-measurement", args.sweep_measurement, DEFAULT_SWEEP_MEASUREMENT),
        (
            "--sweep-measurement-recurring",
            args.sweep_measurement_recurring,
            DEFAULT_SWEEP_MEASUREMENT_RECURRING,
        ),
    ):
        if given == Path("none"):  # asked for: the assumed throughput
            loaded.append(None)
            continue
        if given is not None and not given.exists():  # only the default may be missing
            parser.error(f"{option}: {given}: no such file (`none`: the assumed throughput)")
        try:
            loaded.append(load_sweep_measurement(given or ROOT / default))
        except (ValueError, OSError) as exc:
            parser.error(f"{option}: {exc}")
    measurement, recurring = loaded
    try:
        inputs = with_measurement(inputs, measurement, recurring)
    except ValueError as exc:
        parser.error(f"sweep measurements: {exc}")
    return inputs, args.json, (measurement, recurring)


def main(argv: list[str] | None = None) -> int:
    inputs, as_json, (measurement, recurring) = parse_args(argv)
    result = plan(inputs, measurement=measurement, recurring_measurement=recurring)
    if as_json:
        print(json.dumps(to_json(result), indent=2, default=str))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
