"""Cost per run, measured by counting the AWS requests duetime makes (botocore event hooks).

Target (docs/cost.md): a one-off run on the normal path — submitted, swept, claimed,
executed, recorded — costs at most 4 DynamoDB writes on items under 1 KB and 0.3 SQS requests
at scale (one partial batch per shard and minute on top); the sweeper's own bookkeeping is per
partition, never per timer.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.services.batch import BatchJob, BatchSubmitter
from duetime.services.jobs import JobView
from tests.integration.conftest import START, Engine

START_MS = to_ms(START)
WRITE_OPERATIONS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
SQS_MESSAGE_OPERATIONS = {
    "SendMessage",
    "SendMessageBatch",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
}


@dataclass
class RequestLog:
    calls: Counter[str] = field(default_factory=Counter)
    item_writes: int = 0  # writes on jobs, timers and runs
    bookkeeping_writes: int = 0  # the sweeper's per-partition leases/watermarks, shard states
    largest_item_bytes: int = 0
    sqs_requests: int = 0  # requests that carried messages
    empty_receives: int = 0

    def before(self, event_name: str, params: dict[str, Any], **_: Any) -> None:
        """`before-parameter-build` sees the API parameters as the caller passed them."""
        operation = event_name.rsplit(".", maxsplit=1)[-1]
        self.calls[operation] += 1
        if operation in WRITE_OPERATIONS:
            for key in _written_keys(operation, params):
                if (
                    key.get("pk", {}).get("S", "").startswith("sweeper")
                    or key.get("sk", {}).get("S") == "~sweep"
                ):
                    self.bookkeeping_writes += 1
                else:
                    self.item_writes += 1
            for item in _written_items(operation, params):
                self.largest_item_bytes = max(self.largest_item_bytes, _item_size(item))
        if operation in SQS_MESSAGE_OPERATIONS:
            self.sqs_requests += 1

    def after(self, event_name: str, parsed: dict[str, Any], **_: Any) -> None:
        if event_name.endswith("ReceiveMessage"):
            if parsed.get("Messages"):
                self.sqs_requests += 1
            else:
                self.empty_receives += 1


def _written_keys(operation: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    if operation == "BatchWriteItem":
        return [
            r["PutRequest"]["Item"] if "PutRequest" in r else r["DeleteRequest"]["Key"]
            for requests in params["RequestItems"].values()
            for r in requests
        ]
    return [params.get("Item") or params.get("Key") or {}]


def _written_items(operation: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    if operation == "BatchWriteItem":
        return [
            r["PutRequest"]["Item"]
            for requests in params["RequestItems"].values()
            for r in requests
            if "PutRequest" in r
        ]
    return [params["Item"]] if "Item" in params else []


def _item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (an upper bound via their JSON)."""
    return sum(len(name) + len(json.dumps(value)) for name, value in item.items())


def test_given_one_off_jobs_on_the_normal_path_then_a_run_costs_4_writes_and_full_sqs_batches(
    engine: Engine,
) -> None:
    log = RequestLog()
    clients = [engine.parts.timers._client, engine.parts.queue._client, engine.aws.sqs]
    for client in clients:
        client.meta.events.register("before-parameter-build", log.before)
        client.meta.events.register("after-call", log.after)
    runs = 30
    due_ms = START_MS + 300_000

    # Submitted (timers), swept (one tick), claimed, executed and recorded by the worker. At
    # whole seconds, as cron and rate occurrences are: the sweeper sends them at one release
    # moment (duetime.services.release), so each shard's sends go out together.
    jobs = [
        engine.submit({"schedule": {"at": rfc3339_ms(due_ms + i % 3 * 1000)}}) for i in range(runs)
    ]
    engine.advance_to(START_MS + 235_000)
    report = engine.tick()
    engine.advance_to(due_ms + 3000 + 500)
    engine.drain()

    assert sorted(c.job_id for c in engine.recorder.calls) == sorted(jobs)
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0
    writes_per_run = log.item_writes / runs
    sqs_per_run = log.sqs_requests / runs
    print(
        f"\nper run: {writes_per_run:.2f} DynamoDB writes, {sqs_per_run:.2f} SQS requests; "
        f"sweeper bookkeeping writes: {log.bookkeeping_writes}; calls: {dict(log.calls)}"
    )
    assert writes_per_run <= 4
    assert log.largest_item_bytes < 1024
    # Each shard sweeps its own timers: its SendMessageBatch calls are full but for the last
    # (0.1 per run at scale); receives and deletes take batches of 10 (0.2 per run).
    per_shard = Counter(engine.parts.timers.shard_of(job_id) for job_id in jobs)
    assert log.calls["SendMessageBatch"] == sum(-(-n // 10) for n in per_shard.values())
    assert (log.sqs_requests - log.calls["SendMessageBatch"]) / runs <= 0.2
    # The sweeper wrote per partition with timers (lease + final watermark) and per shard (its
    # horizon and cursor); the first timer written to a shard also started its cursor and
    # counted it in. A constant for the tick, whatever the number of timers handed over.
    partitions = report["partitions"]
    shards = engine.parts.timers.shard_count()
    assert log.bookkeeping_writes <= 2 * partitions + 4 * shards


def test_given_runs_that_wake_together_then_their_job_reads_are_merged(engine: Engine) -> None:
    reads: Counter[str] = Counter()

    def count(event_name: str, params: dict[str, Any], **_: Any) -> None:
        operation = event_name.rsplit(".", maxsplit=1)[-1]
        tables = params.get("RequestItems", {}).keys() if "RequestItems" in params else []
        if engine.aws.settings.jobs_table in [params.get("TableName"), *tables]:
            reads[operation] += 1

    engine.parts.timers._client.meta.events.register("before-parameter-build", count)
    engine.stand_at(START_MS)
    due_ms = START_MS + 5_500
    jobs = [engine.submit({"schedule": {"at": rfc3339_ms(due_ms)}}) for _ in range(20)]
    reads.clear()  # the submissions' own
    engine.advance_to(due_ms - 400)  # visible (500 ms early): each batch waits for its instant
    engine.drain()

    assert sorted(c.job_id for c in engine.recorder.calls) == sorted(jobs)
    # Job and dependents read together, no GetItem per run; the runs of a batch of 10 wake
    # together and share reads (on a quiet machine 2 a batch: the first to wake, then the
    # others; a loaded one starts the batch's threads further apart: 2-9 reads for the 20
    # runs on this 2-core machine at a load of 2.5, so the bound only says they were merged;
    # tests/unit/test_job_reads.py pins how, with a gated store).
    assert reads["GetItem"] == 0
    assert reads["BatchGetItem"] < len(jobs)


def test_given_a_per_minute_cron_then_an_occurrence_costs_about_two_writes(engine: Engine) -> None:
    # Claim and outcome per occurrence; the chain's timer once per ten (planned ahead to the
    # next 10-minute line: duetime.domain.planning); the sweeper's bookkeeping apart.
    job_id = engine.submit({"schedule": {"cron": "* * * * *"}})
    engine.run_minutes(2)  # past the submission and the chain's first hand-over
    log = RequestLog()
    for client in (engine.parts.timers._client, engine.parts.queue._client, engine.aws.sqs):
        client.meta.events.register("before-parameter-build", log.before)
        client.meta.events.register("after-call", log.after)
    ran_before = len(engine.recorder.runs_of(job_id))

    engine.run_minutes(30)

    occurrences = len(engine.recorder.runs_of(job_id)) - ran_before
    assert occurrences >= 29
    writes_per_occurrence = log.item_writes / occurrences
    print(f"\nper occurrence: {writes_per_occurrence:.2f} writes ({dict(log.calls)})")
    assert writes_per_occurrence <= 2 + 1 / 10 + 0.05
    assert log.calls["BatchWriteItem"] + log.calls["PutItem"] >= 2 * occurrences


def _items_read(operation: str, params: dict[str, Any]) -> int:
    """Items a read asks for: each is at least a read unit (4 KB, strongly consistent), found
    or not. Query pages (the sweep's) are counted apart."""
    if operation == "GetItem":
        return 1
    if operation == "BatchGetItem":
        return sum(len(r["Keys"]) for r in params["RequestItems"].values())
    return 0


def test_given_a_batch_of_one_offs_then_a_run_reads_about_one_item(engine: Engine) -> None:
    # The worker's job item (one BatchGetItem for the runs that wake together; no dependents'
    # item: these jobs have none, so they are not marked); the submission's horizon read once
    # per shard its timers went to, so a hundredth of the shards per job of a batch of 100.
    # The sweep's own reads apart.
    reads: Counter[str] = Counter()
    phase = ["submission"]

    def count(event_name: str, params: dict[str, Any], **_: Any) -> None:
        reads[phase[0]] += _items_read(event_name.rsplit(".", maxsplit=1)[-1], params)

    engine.parts.timers._client.meta.events.register("before-parameter-build", count)
    due_ms = START_MS + 300_000
    items = [
        BatchJob(
            parse_job_spec(
                {
                    "schedule": {"at": rfc3339_ms(due_ms + i % 3 * 1000)},
                    "target": {"type": "handler", "name": "test.record"},
                }
            )
        )
        for i in range(100)
    ]
    results = BatchSubmitter(engine.parts.service).create("tenant-a", items)
    jobs = [r.job.id for r in results if isinstance(r, JobView)]
    assert len(jobs) == 100
    phase[0] = "sweep"
    # The clock stands through the sweep: on a slow machine a send made a second after its
    # delay was chosen would come due after the instant the test stands at (never claimed).
    engine.stand_at(due_ms - 65_000)
    engine.tick()
    phase[0] = "worker"
    for second in range(3):  # on each instant, as a worker holding its messages early claims
        engine.stand_at(due_ms + second * 1000)
        engine.drain()

    assert sorted(c.job_id for c in engine.recorder.calls) == sorted(jobs)
    shards = engine.parts.timers.shard_count()
    per_run = {name: n / len(jobs) for name, n in reads.items()}
    print(f"\nitems read per run: {per_run}")
    assert reads["submission"] <= shards
    # (+ the timers' shard count, which a worker process reads now and then, not per run;
    # measured 1.01 a run; 2.01 while every run also read its job's dependents' item; a run
    # claimed after its instant reads its job again: docs/cost.md)
    assert reads["worker"] <= len(jobs) + 1


def test_the_engines_clients_skip_parameter_validation_and_the_targets_clients_keep_it(
    engine: Engine,
) -> None:
    # botocore's shape check of every request was ~8 % of the worker's CPU a run
    # (docs/performance.md "Worker memory"); the engine builds its own requests, and the
    # service still refuses a bad one. A target's client carries a job's payload: a bad one
    # stays a client-side error (a non-retryable TargetError, duetime.targets.aws).
    import boto3
    from botocore.exceptions import ClientError, ParamValidationError

    from duetime.targets import AwsClients

    with pytest.raises(ClientError):  # sent: the table name is under DynamoDB's minimum
        engine.parts.runs._client.describe_table(TableName="")
    with pytest.raises(ClientError):
        engine.parts.queue._client.get_queue_url(QueueName="")
    targets = AwsClients(boto3.Session(region_name="us-east-1"), endpoint_url="http://127.0.0.1:1")
    with pytest.raises(ParamValidationError):  # refused before anything is sent
        targets.sqs.send_message(QueueUrl="http://127.0.0.1:1/q", MessageBody=1)  # type: ignore[arg-type]
