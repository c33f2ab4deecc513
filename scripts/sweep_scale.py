"""`scripts/sweep_scale.py`: the real shard sweep (`Sweeper.sweep_shard`) at scale, offline.

    .venv/bin/python scripts/sweep_scale.py [--timers-burst 600000] [--rate 10000] [--shards 25]
        [--recurring-share 0.2] [--job-partitions 1] [--processes 2] [--json] [--out FILE]

The library's own sweep and dispatch code runs against the in-memory twins of the stores and
the queue (duetime.adapters.memory), wrapped to behave like DynamoDB and SQS *in time*. The
result (`per_shard_timers_per_second`) is what scripts/scale_model.py reads.

Workload: one minute bucket B holds `--timers-burst` one-off timers due in its first
`--burst-seconds` (a top-of-minute burst) plus `--rate` × 60 timers spread over the minute
(`--recurring-share` of those recurring, every 60 s), of `--tenants` tenants, the largest
holding `--hot-tenant-share` of the jobs. Each shard's jobs and timers are generated in the
process that sweeps it (ULID-shaped ids from a counter; a shard's timers are those whose
`shard_of(job id)` is the shard), with the shard's progress as the sweep of minute B−1 left
it, so that the sweep started at minute B−1 (lookahead 1) reads exactly bucket B. The timers
are written as the API writes them: a one-off's carries its queue, so the sweep sends it
without reading the job; a recurring job's makes the sweep read the job (BatchGetItem), plan
its chain, write the next timer and read the shard's horizon after that write.

Time: each shard is swept in a process of its own, as its own Lambda invocation would be. Its
clock (the Sweeper's `clock=`, against which the 45 s deadline is checked) is simulated:
start + its own CPU time × `--cpu-scale` + the latencies and backoffs it waited. Own CPU is
the sweeping thread's CPU time minus what the in-memory stores and this model spent (AWS's
work, done server side). It includes the (de)serialization the SDK and the adapters do
(`cpu_codec_seconds`): timers read by Query and jobs read by BatchGetItem are decoded from the
JSON of their DynamoDB items with the real codec (duetime.adapters.codec, as the adapters
decode them), SendMessageBatch requests are encoded as the SQS adapter builds them.
The processes run `--processes` at a time: CPU time, not wall time, is what counts, so the
result does not depend on this machine's core count (it does on a core's speed: `--cpu-scale`).

Requests: each port call is charged the AWS requests its adapter (duetime.adapters.dynamodb,
sqs) makes, one latency each: get_many = BatchGetItem per 100 keys, read_due and parked_due =
one Query, acquire/advance/raise_horizon/advance_cursor = one conditional UpdateItem (plus a
second request where the adapter's condition fails first), partition_states/sweep_states =
BatchGetItem, put = PutItem or BatchWriteItem per 25; send = SendMessageBatch per 10 messages
per queue, 16 at once: ceil(batches / 16) latencies.

Capacity: a DynamoDB partition serves at most 3,000 RCU and 1,000 WCU a second (a strong read
of up to 4 KB is 1 RCU, a write of up to 1 KB 1 WCU, a Query's items are summed then
rounded). One token bucket per partition key and kind on the simulated clock, holding one
second's worth: a request is admitted while a token is left and takes what it consumed
(DynamoDB learns a Query's size only once it ran). Every shard sweep reads every tenant's
jobs partition at once, so each shard's process gets limit / shards of each jobs partition
(`tenant`, or `tenant#n` with `--job-partitions`); the timer partitions and the shard's state
item are the shard's own. A throttled request is counted and retried as botocore's standard
mode does with duetime.wiring's config: 5 attempts, backoff rand(0, 1) × min(1 s × 2^i, 20 s)
for throttling errors, a retry quota of 500 of which a throttled retry takes 5; out of
attempts or quota, the call fails (StoreError) and the sweep splits its group and parks what
keeps failing. Keys a BatchGetItem/BatchWriteItem could not serve come back unprocessed and
the adapter sends them again at once; only a request none of whose keys was served fails.

The minute: the coordinator (one BatchGetItem, one asynchronous invoke per shard, 16 at once)
then every shard. A shard that its 45 s did not suffice for is swept again at the next ticks
(each sweep starting when the previous one ended, at the earliest) until its bucket is
complete and nothing is parked; the minute is handed over in time only if every shard's first
sweep finished it. `seconds_to_hand_over` = coordinator + the slowest shard (from its start
until its last timer was handed over). Every timer's occurrence (job id, due) must be sent
exactly once: `lost` and `duplicates`; `late_messages` were sent after their due instant.

Not simulated (the measured time is a lower bound where it matters):
- botocore's own per-request CPU (signing, HTTP, shape-driven parsing): only the JSON codec;
- Lambda start-up, the schedule's jitter, network variance (latencies are constant);
- other load on the same partitions: the API writing later minutes' timers, the workers
  reading the hot tenant's jobs (they share its 3,000 RCU with the sweeps);
- DynamoDB's burst capacity beyond one second, adaptive capacity and split for heat, table
  limits; SQS errors and throttling;
- the next minute's bucket: a shard that overruns would meet the next minute's timers;
- two sweeps of one shard at once (a tick's sweep starts when the previous one ended).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import multiprocessing
import os
import platform
import random
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from duetime.adapters.codec import from_item, job_from_values, job_to_values, to_item
from duetime.adapters.dynamodb.timer_items import timer_from_values, timer_values
from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.ids import message_group_id, new_job_id
from duetime.domain.jobs import Job, JobSpec, JobStatus, Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.schedule import At, Rate
from duetime.domain.targets import HttpTarget
from duetime.domain.timers import (
    PartitionState,
    StuckTimer,
    SweepState,
    Timer,
    minute_of,
    shard_of,
    timer_partition,
)
from duetime.domain.timeutil import MINUTE_MS, from_ms, to_ms
from duetime.observability import logger, metrics
from duetime.ports import StoreError
from duetime.services.sweep import Sweeper
from duetime.settings import QueueUrls, Settings, queue_key

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: scripts/ is a package
    sys.path.insert(0, str(ROOT))

from scripts.arguments import COUNT, NON_NEGATIVE, POSITIVE, SHARE, WHOLE  # noqa: E402

# --- AWS and SDK figures ---------------------------------------------------------------------
# DynamoDB, "Best practices for designing and using partition keys effectively" (as
# scripts/scale_model.py): one partition serves at most 3,000 RCU and 1,000 WCU a second.
PARTITION_RCU = 3_000
PARTITION_WCU = 1_000
READ_UNIT_BYTES = 4_096  # a strongly consistent read of up to 4 KB
WRITE_UNIT_BYTES = 1_024
TIMER_ITEM_BYTES = 150  # a timer item as stored (the scale model's timer_item_bytes)
STUCK_ITEM_BYTES = 600  # a stuck timer with its reason
TIMER_TTL_SECONDS = 7 * 86_400
# botocore standard retry mode (botocore.retries.standard) with duetime.wiring's max_attempts.
SDK_MAX_ATTEMPTS = 5
THROTTLE_BACKOFF_SECONDS = 1.0  # base of a throttling error's backoff: rand × base × 2^i
MAX_BACKOFF_SECONDS = 20.0
RETRY_QUOTA = 500
THROTTLED_RETRY_COST = 5
# The adapters' batching (duetime.adapters.dynamodb, sqs, lambda_launcher).
BATCH_GET = 100
BATCH_WRITE = 25
SQS_BATCH = 10
PARALLEL_SENDS = 16
PARALLEL_INVOKES = 16
DEADLINE_SECONDS = 45.0  # the Sweeper's default deadline
MAX_SWEEPS_PER_SHARD = 10  # ticks a shard is swept at before the benchmark gives up on it

# --- the workload's shape --------------------------------------------------------------------
BUCKET = minute_of(to_ms(datetime(2026, 11, 2, 12, 0, tzinfo=UTC)))  # the minute swept
SUBMITTED_MS = (BUCKET - 60) * MINUTE_MS  # one-off jobs were submitted an hour before
RECURRING_SECONDS = 60
TARGET = HttpTarget("https://hooks.example.com/duetime")
HOT_TENANT = "tenant-0000"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/duetime-{}-{}"
CALLS = (
    "Query",
    "BatchGetItem",
    "UpdateItem",
    "PutItem",
    "DeleteItem",
    "BatchWriteItem",
    "SendMessageBatch",
    "Invoke",
)

Partition = tuple[str, str]  # (table, partition key)
T = TypeVar("T")


@dataclass(frozen=True)
class Inputs:
    """The workload, AWS's latencies and limits, and this machine's CPU against Lambda's."""

    timers_burst: int = 600_000
    rate: float = 10_000  # sustained timers a second, spread over the minute
    burst_seconds: float = 5.0  # the burst falls due over the minute's first seconds
    shards: int = 25
    recurring_share: float = 0.0  # of the sustained timers
    tenants: int = 1_000
    hot_tenant_share: float = 0.1
    job_partitions: int = 1  # partition keys a tenant's jobs are spread over
    query_ms: float = 10.0
    batch_get_ms: float = 15.0
    send_ms: float = 10.0
    write_ms: float = 6.0  # a conditional UpdateItem/PutItem (and DeleteItem)
    batch_write_ms: float = 10.0
    invoke_ms: float = 20.0  # the coordinator's asynchronous invoke of a shard's sweep
    partition_rcu: float = PARTITION_RCU
    partition_wcu: float = PARTITION_WCU
    cpu_scale: float = 1.0
    seed: int = 1

    @property
    def sustained(self) -> int:
        return round(self.rate * 60)

    @property
    def timers(self) -> int:
        return self.timers_burst + self.sustained

    def latency_seconds(self, call: str) -> float:
        ms = {
            "Query": self.query_ms,
            "BatchGetItem": self.batch_get_ms,
            "UpdateItem": self.write_ms,
            "PutItem": self.write_ms,
            "DeleteItem": self.write_ms,
            "BatchWriteItem": self.batch_write_ms,
            "SendMessageBatch": self.send_ms,
            "Invoke": self.invoke_ms,
        }[call]
        return ms / 1000

    def coordinator_seconds(self) -> float:
        """One BatchGetItem of the shards' progress, then the invokes, 16 at once."""
        waves = math.ceil(self.shards / PARALLEL_INVOKES)
        return self.latency_seconds("BatchGetItem") + waves * self.latency_seconds("Invoke")


def read_units(size: int) -> int:
    return max(1, math.ceil(size / READ_UNIT_BYTES))


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


# --- the simulated side of AWS ---------------------------------------------------------------


@dataclass
class TokenBucket:
    """One partition's capacity of one kind: `rate` units a second, one second's worth kept."""

    rate: float
    tokens: float
    at: float  # simulated seconds of the last refill

    def admit(self, units: float, now: float) -> bool:
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens <= 0:
            return False
        self.tokens -= units  # may overdraw: the next requests wait until it is paid back
        return True


class RetryQuota:
    """botocore's retry quota: a throttled retry takes 5 of 500; a call that succeeds gives
    back what its last retry took, or 1 if it needed none."""

    def __init__(self) -> None:
        self.available = RETRY_QUOTA

    def take(self) -> bool:
        if self.available < THROTTLED_RETRY_COST:
            return False
        self.available -= THROTTLED_RETRY_COST
        return True

    def give_back(self, retried: bool) -> None:
        self.available = min(RETRY_QUOTA, self.available + (THROTTLED_RETRY_COST if retried else 1))


class SimulatedAws:
    """One shard's process as AWS and the SDK see it: its simulated clock, the latencies and
    partition limits of its requests, the SDK's retries. Shared by the store and queue
    wrappers of the process."""

    def __init__(self, inputs: Inputs, rng: random.Random) -> None:
        self._inputs = inputs
        self._rng = rng
        self._buckets: dict[tuple[Partition, bool], TokenBucket] = {}
        self._quota = RetryQuota()
        self.calls: Counter[str] = Counter()
        self.waited_by_call: Counter[str] = Counter()  # seconds; "backoff" for the retries'
        self.throttled_requests = 0
        self.unprocessed_keys = 0
        self.failed_calls = 0  # out of attempts or retry quota: the port call raised
        self.codec_cpu = 0.0  # CPU seconds (unscaled) spent encoding and decoding requests
        self._start_ms = 0
        self._cpu_start = 0.0
        self._server_cpu = 0.0
        self._server_since: float | None = None  # inside server_side: the clock stands still
        self._waited = 0.0

    # --- the clock of one sweep (one Lambda invocation)

    def begin(self, start_ms: int) -> None:
        self._start_ms = start_ms
        self._cpu_start = time.thread_time()
        self._server_cpu = 0.0
        self._waited = 0.0

    def cpu_seconds(self) -> float:
        """The sweep's own CPU so far: the thread's, less what AWS would have spent."""
        now = time.thread_time()
        server = self._server_cpu + (0 if self._server_since is None else now - self._server_since)
        return (now - self._cpu_start - server) * self._inputs.cpu_scale

    def waited_seconds(self) -> float:
        return self._waited

    def now_ms(self) -> int:
        return self._start_ms + int((self.cpu_seconds() + self._waited) * 1000)

    @contextmanager
    def server_side(self) -> Iterator[None]:
        """CPU spent in here is AWS's work (the in-memory stores, this model): not the sweep's."""
        self._server_since = time.thread_time()
        try:
            yield
        finally:
            self._server_cpu += time.thread_time() - self._server_since
            self._server_since = None

    @contextmanager
    def codec(self) -> Iterator[None]:
        """Encoding requests and decoding responses, as the SDK and the adapters do: the
        sweep's CPU, also counted apart."""
        start = time.thread_time()
        try:
            yield
        finally:
            self.codec_cpu += time.thread_time() - start

    def _wait(self, what: str, seconds: float) -> None:
        self._waited += seconds
        self.waited_by_call[what] += seconds

    # --- requests

    def request(self, call: str, partition: Partition, units: float, *, write: bool) -> None:
        """A single-item request or a Query: served whole, or throttled."""
        with self.server_side():
            self._sdk_call(call, lambda now: self._admit(partition, units, write, now) or None)

    def batch(self, call: str, items: Sequence[tuple[Partition, float]], *, write: bool) -> None:
        """A BatchGetItem/BatchWriteItem as the adapter sends it: the items a partition could
        not serve come back unprocessed and are sent again at once, in a new request."""
        with self.server_side():
            pending = list(items)
            while pending:
                pending = self._sdk_call(call, partial(self._serve_some, pending, write))

    def parallel(self, call: str, requests: int, at_once: int) -> None:
        """Requests sent `at_once` at a time by a pool of threads (never throttled)."""
        with self.server_side():
            self.calls[call] += requests
            self._wait(call, math.ceil(requests / at_once) * self._inputs.latency_seconds(call))

    def _serve_some(
        self, items: list[tuple[Partition, float]], write: bool, now: float
    ) -> list[tuple[Partition, float]] | None:
        """The unprocessed items; None when none was served (the request is an error)."""
        left = [item for item in items if not self._admit(item[0], item[1], write, now)]
        if len(left) == len(items):
            return None
        if left:
            self.throttled_requests += 1
            self.unprocessed_keys += len(left)
        return left

    def _sdk_call(self, call: str, attempt: Callable[[float], T | None]) -> T:
        """One SDK call: each attempt costs a latency; a throttled one (None) is retried after
        the standard mode's backoff while attempts and the retry quota last."""
        for n in range(SDK_MAX_ATTEMPTS):
            self.calls[call] += 1
            result = attempt(self.now_ms() / 1000)
            self._wait(call, self._inputs.latency_seconds(call))
            if result is not None:
                self._quota.give_back(retried=n > 0)
                return result
            self.throttled_requests += 1
            if n + 1 == SDK_MAX_ATTEMPTS or not self._quota.take():
                break
            backoff = min(THROTTLE_BACKOFF_SECONDS * 2**n, MAX_BACKOFF_SECONDS)
            self._wait("backoff", self._rng.random() * backoff)
        self.failed_calls += 1
        raise StoreError(f"{call}: ProvisionedThroughputExceededException, out of retries")

    def _admit(self, partition: Partition, units: float, write: bool, now: float) -> bool:
        bucket = self._buckets.get((partition, write))
        if bucket is None:
            limit = self._inputs.partition_wcu if write else self._inputs.partition_rcu
            if partition[0] == "jobs":  # every shard's sweep reads every tenant's partition
                limit /= self._inputs.shards
            bucket = self._buckets[(partition, write)] = TokenBucket(limit, limit, now)
        return bucket.admit(units, now)


# --- the in-memory twins, charged as their AWS adapters --------------------------------------
# Writes are charged before they are applied (a throttled write changes nothing); reads after
# (what a Query consumes depends on what it found).


class SimulatedJobStore(MemoryJobStore):
    """The jobs table. Only what a sweep calls is charged (get_many; replace, when a recurring
    schedule ends); the rest is the in-memory twin's, free."""

    def __init__(self, aws: SimulatedAws, partitions: int) -> None:
        super().__init__()
        self._aws = aws
        self._partitions = partitions

    def load(self, jobs: Iterable[Job]) -> None:
        """Jobs submitted before the minute: free."""
        for job in jobs:
            super().create(job)

    def _partition(self, tenant: str, job_id: str) -> Partition:
        """As DynamoJobStore keys a job."""
        if self._partitions == 1:
            return ("jobs", tenant)
        return ("jobs", f"{tenant}#{zlib.crc32(job_id.encode()) % self._partitions}")

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        unique = list(dict.fromkeys(keys))
        jobs: dict[str, Job] = {}
        for start in range(0, len(unique), BATCH_GET):
            chunk = unique[start : start + BATCH_GET]
            partitions = [self._partition(t, i) for t, i in chunk]
            with self._aws.codec():
                wanted = [
                    {"tenant": {"S": pk}, "id": {"S": i}}
                    for (_, pk), (_, i) in zip(partitions, chunk, strict=True)
                ]
                json.dumps({"RequestItems": {"jobs": {"Keys": wanted, "ConsistentRead": True}}})
            with self._aws.server_side():
                found = super().get_many(chunk)
                items = [to_item(job_to_values(job)) for job in found.values()]
                body = json.dumps({"Responses": {"jobs": items}})
            units = [read_units(found[i].size_bytes) if i in found else 1 for _, i in chunk]
            self._aws.batch("BatchGetItem", list(zip(partitions, units, strict=True)), write=False)
            with self._aws.codec():
                for item in json.loads(body)["Responses"]["jobs"]:
                    job = job_from_values(from_item(item))
                    jobs[job.id] = job
        return jobs

    def replace(self, job: Job, *, expected: Job) -> None:
        partition = self._partition(job.tenant, job.id)
        self._aws.request("PutItem", partition, write_units(job.size_bytes), write=True)
        with self._aws.server_side():
            super().replace(job, expected=expected)


class SimulatedTimerStore(MemoryTimerStore):
    """The timers table. Every method a shard's sweep calls is charged; the rest (never
    called by a sweep) are the in-memory twin's, free."""

    def __init__(self, aws: SimulatedAws, shards: int) -> None:
        super().__init__(shards)
        self._aws = aws

    def load(self, timers: Sequence[Timer], shard: int, swept: int) -> None:
        """Timers written before the minute, and the shard's progress as a complete sweep of
        minute `swept` left it: free."""
        super().put(timers)
        super().raise_horizon(shard, swept)
        super().advance_cursor(shard, swept, swept + 1)

    def finished(self, minute: int, shard: int) -> bool:
        """Nothing left in the partition after its watermark, and nothing parked."""
        state = super().partition_states([(minute, shard)]).get((minute, shard))
        watermark = state.watermark if state else None
        left, _ = super().read_due(minute, shard, watermark, (minute + 1) * MINUTE_MS, 1)
        return not left and not self.stuck(shard)

    @staticmethod
    def _partition(minute: int, shard: int) -> Partition:
        return ("timers", timer_partition(minute, shard))  # its timers and its `~sweep` item

    @staticmethod
    def _state(shard: int) -> Partition:
        return ("timers", f"sweeper#{shard}")

    def put(self, timers: Sequence[Timer]) -> None:
        # The adapter drops repeated keys; one item is a PutItem, more go 25 a BatchWriteItem.
        keyed = {(t.bucket, self.shard_of(t.job_id), t.sort_key): t for t in timers}
        items = [(self._partition(bucket, shard), 1) for bucket, shard, _ in keyed]
        if len(items) == 1:
            self._aws.request("PutItem", items[0][0], 1, write=True)
        else:
            for start in range(0, len(items), BATCH_WRITE):
                self._aws.batch("BatchWriteItem", items[start : start + BATCH_WRITE], write=True)
        with self._aws.server_side():
            super().put(list(keyed.values()))

    def read_due(
        self, minute: int, shard: int, after_key: str | None, before_ms: int, limit: int
    ) -> tuple[list[Timer], bool]:
        with self._aws.server_side():
            timers, more = super().read_due(minute, shard, after_key, before_ms, limit)
            items = [to_item(timer_values(t, shard, TIMER_TTL_SECONDS)) for t in timers]
            body = json.dumps({"Items": items, "Count": len(items)})
        read = len(timers) + (1 if more else 0)  # the adapter asks for one more than `limit`
        units = read_units(read * TIMER_ITEM_BYTES)
        self._aws.request("Query", self._partition(minute, shard), units, write=False)
        with self._aws.codec():
            found = [timer_from_values(from_item(i), minute) for i in json.loads(body)["Items"]]
        return found, more

    def sweep_states(self, shards: Sequence[int]) -> dict[int, SweepState]:
        with self._aws.server_side():
            states = super().sweep_states(shards)
        unique = list(dict.fromkeys(shards))
        for start in range(0, len(unique), BATCH_GET):
            items = [(self._state(s), 1) for s in unique[start : start + BATCH_GET]]
            self._aws.batch("BatchGetItem", items, write=False)
        return states

    def raise_horizon(self, shard: int, minute: int) -> SweepState:
        with self._aws.server_side():
            before = super().sweep_states([shard]).get(shard)
        self._aws.request("UpdateItem", self._state(shard), 1, write=True)
        horizon = before.horizon_minute if before else None
        if horizon is not None and horizon >= minute:  # the condition failed: the adapter reads
            self._aws.batch("BatchGetItem", [(self._state(shard), 1)], write=False)
        with self._aws.server_side():
            return super().raise_horizon(shard, minute)

    def advance_cursor(self, shard: int, expected: int | None, minute: int) -> bool:
        self._aws.request("UpdateItem", self._state(shard), 1, write=True)
        with self._aws.server_side():
            return super().advance_cursor(shard, expected, minute)

    def partition_states(
        self, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], PartitionState]:
        with self._aws.server_side():
            states = super().partition_states(keys)
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), BATCH_GET):
            items = [(self._partition(m, s), 1) for m, s in unique[start : start + BATCH_GET]]
            self._aws.batch("BatchGetItem", items, write=False)
        return states

    def acquire(
        self, minute: int, shard: int, owner: str, now_ms: int, lease_ms: int
    ) -> PartitionState | None:
        with self._aws.server_side():
            before = super().partition_states([(minute, shard)]).get((minute, shard))
        self._aws.request("UpdateItem", self._partition(minute, shard), 1, write=True)
        if before is not None and (before.complete or before.owner not in (None, owner)):
            # Held by another (or complete): the adapter tries a takeover, a second write.
            self._aws.request("UpdateItem", self._partition(minute, shard), 1, write=True)
        with self._aws.server_side():
            return super().acquire(minute, shard, owner, now_ms, lease_ms)

    def advance(
        self,
        minute: int,
        shard: int,
        owner: str,
        watermark: str | None,
        *,
        complete: bool = False,
        release: bool = False,
        stalls: int | None = None,
    ) -> bool:
        self._aws.request("UpdateItem", self._partition(minute, shard), 1, write=True)
        with self._aws.server_side():
            return super().advance(
                minute, shard, owner, watermark, complete=complete, release=release, stalls=stalls
            )

    def park(self, stuck: StuckTimer, *, replacing: StuckTimer | None = None) -> None:
        partition = ("timers", f"stuck#{stuck.shard}")
        self._aws.request("PutItem", partition, write_units(STUCK_ITEM_BYTES), write=True)
        if replacing is not None and replacing.next_attempt_ms != stuck.next_attempt_ms:
            self._aws.request("DeleteItem", partition, 1, write=True)  # its key changed
        with self._aws.server_side():
            super().park(stuck, replacing=replacing)

    def parked_due(self, shard: int, now_ms: int, limit: int) -> list[StuckTimer]:
        with self._aws.server_side():
            due = super().parked_due(shard, now_ms, limit)
        partition = ("timers", f"stuck#{shard}")
        units = read_units(len(due) * STUCK_ITEM_BYTES)
        self._aws.request("Query", partition, units, write=False)
        return due

    def unpark(self, stuck: StuckTimer) -> None:
        partition = ("timers", f"stuck#{stuck.shard}")
        self._aws.request("DeleteItem", partition, 1, write=True)
        with self._aws.server_side():
            super().unpark(stuck)


class SimulatedQueue(MemoryQueue):
    """SQS as SqsJobQueue.send uses it: SendMessageBatch per 10 messages per queue, 16 at
    once. Keeps (job id, occurrence, sent at) of every message for the check."""

    def __init__(self, aws: SimulatedAws, queues: Mapping[str, QueueUrls]) -> None:
        super().__init__(aws.now_ms)
        self._aws = aws
        self._urls = {key: urls.url for key, urls in queues.items()}
        self.sent: list[tuple[str, int, int]] = []

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        by_queue: dict[str, list[tuple[RunMessage, int]]] = defaultdict(list)
        for message, delay in messages:
            by_queue[self._urls[queue_key(message.runtime, message.priority)]].append(
                (message, delay)
            )
        batches = 0
        with self._aws.codec():
            for url, pending in by_queue.items():
                for start in range(0, len(pending), SQS_BATCH):
                    entries = [
                        {
                            "Id": str(i),
                            "MessageBody": self.auth.seal(message),
                            "DelaySeconds": max(0, min(900, delay)),
                            "MessageGroupId": message_group_id(message.tenant),
                        }
                        for i, (message, delay) in enumerate(pending[start : start + SQS_BATCH])
                    ]
                    json.dumps({"QueueUrl": url, "Entries": entries})
                    batches += 1
        self._aws.parallel("SendMessageBatch", batches, PARALLEL_SENDS)
        sent_ms = self._aws.now_ms()
        with self._aws.server_side():
            super().send(messages)
            self.sent += [(m.job_id, m.scheduled_ms, sent_ms) for m, _ in messages]


# --- the workload ----------------------------------------------------------------------------


def _fraction(n: int, salt: str, seed: int) -> float:
    """A deterministic pseudo-random number in [0, 1) for timer `n`."""
    return zlib.crc32(f"{salt}:{seed}:{n}".encode()) / 2**32


def shard_timers(inputs: Inputs, shard: int) -> Iterator[tuple[int, str]]:
    """(n, job id) of the timers of `shard` among timers 0 .. inputs.timers − 1. Ids are
    ULID-shaped: a 10-character time, then the seed and n in 16 hexadecimal digits (Crockford
    base 32 has every hexadecimal digit)."""
    prefix = new_job_id(SUBMITTED_MS, bytes(10))[:10]
    base = inputs.seed << 40
    for n in range(inputs.timers):
        job_id = f"{prefix}{base | n:016X}"
        if shard_of(job_id, inputs.shards) == shard:
            yield n, job_id


def make_job(inputs: Inputs, n: int, job_id: str) -> Job:
    """Timer n's job: the burst first, then the sustained timers; a small payload."""
    bucket_ms = BUCKET * MINUTE_MS
    if n < inputs.timers_burst:
        due = bucket_ms + int(n * inputs.burst_seconds * 1000) // inputs.timers_burst
        recurring = False
    else:
        due = bucket_ms + (n - inputs.timers_burst) * MINUTE_MS // inputs.sustained
        recurring = _fraction(n, "recurring", inputs.seed) < inputs.recurring_share
    if inputs.tenants == 1 or _fraction(n, "hot", inputs.seed) < inputs.hot_tenant_share:
        tenant = HOT_TENANT
    else:
        tenant = f"tenant-{1 + n % (inputs.tenants - 1):04d}"
    # A recurring job was created one period before the occurrence: its first is `due`.
    created = due - RECURRING_SECONDS * 1000 if recurring else SUBMITTED_MS
    spec = JobSpec(
        schedule=Rate(RECURRING_SECONDS) if recurring else At(from_ms(due)),
        target=TARGET,
        payload={"order": n},
    )
    return Job(tenant, job_id, spec, JobStatus.SCHEDULED, created, created, next_due_ms=due)


def timer_of(job: Job) -> Timer:
    """The timer the API wrote for `job` (as duetime.services.dispatch does): a one-off's
    carries its queue, so the sweep sends it without reading the job."""
    one_off = not job.spec.recurring
    return Timer(
        job.tenant,
        job.id,
        job.next_due_ms or 0,
        job.generation,
        job_bytes=job.size_bytes,
        runtime=job.spec.runtime if one_off else None,
        priority=job.spec.priority if one_off else None,
    )


def settings_for(inputs: Inputs) -> Settings:
    queues = {
        queue_key(r, p): QueueUrls(QUEUE_URL.format(r, p), QUEUE_URL.format(r, p) + "-dlq")
        for r in Runtime
        for p in Priority
    }
    return Settings(
        jobs_table="jobs",
        timers_table="timers",
        runs_table="runs",
        queues=queues,
        timer_shards=inputs.shards,
        job_partitions=inputs.job_partitions,
    )


# --- one shard: build, sweep at each tick until handed over, check ---------------------------


def check_hand_over(
    timers: Sequence[Timer], sent: Sequence[tuple[str, int, int]]
) -> dict[str, Any]:
    """Every timer's occurrence sent exactly once? Messages for other occurrences are the
    recurring chains' next runs (planned ahead to the next 10-minute line:
    duetime.domain.planning)."""
    sends = Counter((job_id, scheduled) for job_id, scheduled, _ in sent)
    expected = {(t.job_id, t.due_ms) for t in timers}
    handed_over = sum(1 for key in expected if sends[key])
    late = [at - scheduled for _, scheduled, at in sent if at > scheduled]
    return {
        "handed_over": handed_over,
        "lost": len(expected) - handed_over,
        "duplicates": sum(count - 1 for count in sends.values() if count > 1),
        "chain_messages": sum(c for key, c in sends.items() if key not in expected),
        "late_messages": len(late),
        "max_late_seconds": max(late, default=0) / 1000,
    }


def sweep_shard(inputs: Inputs, shard: int) -> dict[str, Any]:
    """Build shard `shard`'s data, sweep it as the ticks from minute B−1 on would, and check
    what was handed over. Runs in a process of its own (or inline with --processes 1)."""
    aws = SimulatedAws(inputs, random.Random(inputs.seed * 1_000_003 + shard))
    settings = settings_for(inputs)
    jobs = SimulatedJobStore(aws, inputs.job_partitions)
    timers = SimulatedTimerStore(aws, inputs.shards)
    queue = SimulatedQueue(aws, settings.queues)
    created = [make_job(inputs, n, job_id) for n, job_id in shard_timers(inputs, shard)]
    due = [timer_of(job) for job in created]
    jobs.load(created)
    timers.load(due, shard, BUCKET - 1)
    stored = timers.count()
    del created
    sweeper = Sweeper(jobs, timers, queue, settings, clock=aws.now_ms)
    coordinator_ms = round(inputs.coordinator_seconds() * 1000)
    first_start = (BUCKET - 1) * MINUTE_MS + coordinator_ms
    end = first_start
    sweeps: list[dict[str, Any]] = []
    gc.collect()
    gc.freeze()  # the stores' contents are AWS's: the sweep's collections need not scan them
    try:
        for tick in range(MAX_SWEEPS_PER_SHARD):
            start = max(end, (BUCKET - 1 + tick) * MINUTE_MS + coordinator_ms)
            aws.begin(start)
            report = sweeper.sweep_shard(shard)
            cpu, waited = aws.cpu_seconds(), aws.waited_seconds()
            end = aws.now_ms()
            metrics.clear_metrics()  # the handler's log_metrics would flush them
            sweeps.append(
                {
                    "start_seconds": (start - first_start) / 1000,
                    "seconds": round(cpu + waited, 3),
                    "cpu_seconds": round(cpu, 3),
                    "wait_seconds": round(waited, 3),
                    "timers_read": report.timers_read,
                    "messages_sent": report.messages_sent,
                    "pages": report.pages,
                    "parked": report.parked,
                    "unparked": report.unparked,
                    "errors": len(report.errors),
                }
            )
            if timers.finished(BUCKET, shard):
                break
    finally:
        gc.unfreeze()
    first = sweeps[0]
    finished = timers.finished(BUCKET, shard)
    return {
        "shard": shard,
        "timers": len(due),
        **check_hand_over(due, queue.sent),
        "chain_timers": timers.count() - stored,
        "finished": finished,
        "in_first_sweep": finished and len(sweeps) == 1 and first["seconds"] <= DEADLINE_SECONDS,
        "seconds": round((end - first_start) / 1000, 3),
        "busy_seconds": round(sum(s["seconds"] for s in sweeps), 3),
        "cpu_seconds": round(sum(s["cpu_seconds"] for s in sweeps), 3),
        "cpu_codec_seconds": round(aws.codec_cpu * inputs.cpu_scale, 3),
        "wait_seconds": round(sum(s["wait_seconds"] for s in sweeps), 3),
        "invocations": sweeps,
        "calls": dict(aws.calls),
        "wait_seconds_by_call": {k: round(v, 3) for k, v in aws.waited_by_call.items()},
        "throttled_requests": aws.throttled_requests,
        "unprocessed_keys": aws.unprocessed_keys,
        "failed_calls": aws.failed_calls,
        "queue_depth": queue.depth(),
    }


@contextmanager
def sweep_logs() -> Iterator[None]:
    """The sweeps log warnings and worse, and flush metrics (when a set is full), to stderr:
    stdout carries the result."""
    handler = logger.registered_handler
    level = logger.log_level
    stream = handler.setStream(sys.stderr) if isinstance(handler, logging.StreamHandler) else None
    logger.setLevel(logging.WARNING)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        logger.setLevel(level)
        if stream is not None and isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)


def _sweep_in_worker(inputs: Inputs, shard: int) -> dict[str, Any]:
    with sweep_logs():
        return sweep_shard(inputs, shard)


# --- the minute ------------------------------------------------------------------------------


def run(inputs: Inputs, processes: int) -> dict[str, Any]:
    started = time.perf_counter()
    tasks = [(inputs, shard) for shard in range(inputs.shards)]
    if processes == 1:
        shards = [_sweep_in_worker(*task) for task in tasks]
    else:  # a fresh process per shard, as a fresh Lambda invocation
        with multiprocessing.Pool(processes, maxtasksperchild=1) as pool:
            shards = pool.starmap(_sweep_in_worker, tasks, chunksize=1)
    return summarize(inputs, shards, processes, time.perf_counter() - started)


def _total(shards: Sequence[dict[str, Any]], key: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for shard in shards:
        total.update(shard[key])
    return total


def summarize(
    inputs: Inputs, shards: Sequence[dict[str, Any]], processes: int, wall_seconds: float
) -> dict[str, Any]:
    coordinator = inputs.coordinator_seconds()
    max_shard = max(s["seconds"] for s in shards)
    handed_over = sum(s["handed_over"] for s in shards)
    busy = sum(s["busy_seconds"] for s in shards)
    calls = _total(shards, "calls")
    calls.update({"BatchGetItem": 1, "Invoke": inputs.shards})  # the coordinator's
    waited = _total(shards, "wait_seconds_by_call")
    cpu = sum(s["cpu_seconds"] for s in shards)
    wait = sum(s["wait_seconds"] for s in shards)

    def figure(key: str) -> int:
        return int(sum(s[key] for s in shards))

    return {
        "timers": sum(s["timers"] for s in shards),
        "shards": inputs.shards,
        "handed_over": handed_over,
        "lost": figure("lost"),
        "duplicates": figure("duplicates"),
        "minute_handed_over": all(s["in_first_sweep"] for s in shards)
        and coordinator + max_shard <= DEADLINE_SECONDS,
        "seconds_to_hand_over": round(coordinator + max_shard, 3),
        "max_shard_seconds": max_shard,
        "coordinator_seconds": round(coordinator, 3),
        "per_shard_timers_per_second": round(handed_over / busy, 1) if busy else None,
        "throttled_requests": figure("throttled_requests"),
        "unprocessed_keys": figure("unprocessed_keys"),
        "failed_calls": figure("failed_calls"),
        "parked": sum(i["parked"] for s in shards for i in s["invocations"]),
        "late_messages": figure("late_messages"),
        "max_late_seconds": max(s["max_late_seconds"] for s in shards),
        "chain_messages": figure("chain_messages"),
        "chain_timers": figure("chain_timers"),
        "sweeps": sum(len(s["invocations"]) for s in shards),
        "calls": {call: calls.get(call, 0) for call in CALLS},
        "time": {
            "cpu_seconds": round(cpu, 3),
            "cpu_codec_seconds": round(sum(s["cpu_codec_seconds"] for s in shards), 3),
            "wait_seconds": round(wait, 3),
            "cpu_share": round(cpu / (cpu + wait), 3) if cpu + wait else None,
            "wait_seconds_by_call": {k: round(v, 3) for k, v in sorted(waited.items())},
        },
        "per_shard": [
            {k: v for k, v in s.items() if k not in ("calls", "wait_seconds_by_call")}
            for s in shards
        ],
        "inputs": asdict(inputs) | {"sustained_timers": inputs.sustained},
        "machine": machine(processes),
        "wall_seconds": round(wall_seconds, 1),
        "notes": [
            "Each shard's sweep runs in a process of its own; its seconds are its own CPU time "
            f"(x {inputs.cpu_scale}) plus simulated AWS latencies and SDK backoffs. A shard's "
            "`seconds` run from its first sweep's start until its bucket was handed over (over "
            "later ticks if needed); per_shard_timers_per_second = timers handed over / the "
            "shards' sweep seconds (busy_seconds).",
            "Every shard's sweep reads every tenant's jobs partition at once: each shard's "
            f"process gets 1/{inputs.shards} of a jobs partition's {inputs.partition_rcu:g} RCU "
            "(timer partitions and shard state items are the shard's own).",
            "Not simulated: botocore's per-request CPU beyond the JSON codec, Lambda start-up, "
            "other load on the same partitions (the API's timer writes, the workers' job "
            "reads), the next minute's bucket, DynamoDB burst/adaptive capacity.",
        ],
    }


def machine(processes: int) -> dict[str, Any]:
    model = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        model = names[0].partition(":")[2].strip() if names else model
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "processes": processes,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# --- the command line ------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> tuple[Inputs, argparse.Namespace]:
    d = Inputs()
    parser = argparse.ArgumentParser(
        description="Benchmark the real shard sweep at scale against simulated AWS.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--timers-burst", type=WHOLE, default=d.timers_burst, help="one-off timers due at :00")
    add("--burst-seconds", type=POSITIVE, default=d.burst_seconds, help="the burst's spread")
    add("--rate", type=NON_NEGATIVE, default=d.rate, help="sustained timers/s over the minute")
    add("--shards", type=COUNT, default=d.shards, help="timer shards")
    add("--recurring-share", type=SHARE, default=d.recurring_share, help="of sustained timers")
    add("--tenants", type=COUNT, default=d.tenants, help="tenants owning the jobs")
    add("--hot-tenant-share", type=SHARE, default=d.hot_tenant_share, help="the largest's")
    add("--job-partitions", type=COUNT, default=d.job_partitions, help="per tenant")
    add("--query-ms", type=NON_NEGATIVE, default=d.query_ms, help="Query latency")
    add("--batch-get-ms", type=NON_NEGATIVE, default=d.batch_get_ms, help="BatchGetItem latency")
    add("--send-ms", type=NON_NEGATIVE, default=d.send_ms, help="SendMessageBatch latency")
    add("--write-ms", type=NON_NEGATIVE, default=d.write_ms, help="UpdateItem/PutItem/DeleteItem")
    add("--batch-write-ms", type=NON_NEGATIVE, default=d.batch_write_ms, help="BatchWriteItem")
    add("--invoke-ms", type=NON_NEGATIVE, default=d.invoke_ms, help="coordinator's async invoke")
    add("--partition-rcu", type=POSITIVE, default=d.partition_rcu, help="per partition, /s")
    add("--partition-wcu", type=POSITIVE, default=d.partition_wcu, help="per partition, /s")
    add("--cpu-scale", type=POSITIVE, default=d.cpu_scale, help="Lambda CPU s per CPU s here")
    add("--seed", type=int, default=d.seed, help="job ids, tenants, backoff jitter")
    add("--processes", type=COUNT, default=2, help="shard processes at once")
    add("--json", action="store_true", help="print the result as JSON")
    add("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    inputs = Inputs(**{f.name: getattr(args, f.name) for f in fields(Inputs)})
    if inputs.timers_burst < 0 or inputs.rate < 0 or inputs.timers < 1:
        parser.error("--timers-burst and --rate must not be negative, and make one timer at least")
    if inputs.burst_seconds > 60:
        parser.error("--burst-seconds: the burst falls due within the minute")
    return inputs, args


def print_summary(result: dict[str, Any]) -> None:
    t = result["time"]
    print(
        f"{result['timers']:,} timers in one minute bucket, {result['shards']} shards "
        f"(wall {result['wall_seconds']} s)"
    )
    print(
        f"handed over {result['handed_over']:,}, lost {result['lost']}, "
        f"duplicates {result['duplicates']}, late {result['late_messages']}"
    )
    print(
        f"seconds to hand over {result['seconds_to_hand_over']} (slowest shard "
        f"{result['max_shard_seconds']} + coordinator {result['coordinator_seconds']}); "
        f"in the first sweep: {result['minute_handed_over']}"
    )
    print(f"per shard: {result['per_shard_timers_per_second']} timers/s of sweep")
    print(
        f"throttled requests {result['throttled_requests']}, unprocessed keys "
        f"{result['unprocessed_keys']}, failed calls {result['failed_calls']}, "
        f"parked {result['parked']}"
    )
    print(
        f"time, all shards: CPU {t['cpu_seconds']} s (codec {t['cpu_codec_seconds']} s), "
        f"waiting {t['wait_seconds']} s"
    )
    print(
        "  waiting by call: "
        + ", ".join(f"{k} {v} s" for k, v in t["wait_seconds_by_call"].items())
    )
    print("  calls: " + ", ".join(f"{k} {v:,}" for k, v in result["calls"].items() if v))
    header = ("shard", "timers", "seconds", "cpu", "wait", "sweeps", "lost")
    print("\n" + " ".join(f"{h:>8}" for h in header))
    for s in result["per_shard"]:
        print(
            f"{s['shard']:>8} {s['timers']:>8,} {s['seconds']:>8.2f} {s['cpu_seconds']:>8.2f} "
            f"{s['wait_seconds']:>8.2f} {len(s['invocations']):>8} {s['lost']:>8}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    inputs, args = parse_args(argv)
    result = run(inputs, args.processes)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.json:
        print(text)
    else:
        print_summary(result)
    problems = []
    if result["lost"]:
        problems.append(f"{result['lost']} timer(s) were never handed over")
    if result["seconds_to_hand_over"] > DEADLINE_SECONDS:
        problems.append(
            f"handing the minute over took {result['seconds_to_hand_over']} s "
            f"(> {DEADLINE_SECONDS:g} s)"
        )
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
