"""The deployed code, proven offline: the whole life of a job, on either path (the API's
fast path and a sweep's hand-over of a timer), through the handlers of the synthesized
Lambda asset, each in a clean interpreter with only what Lambda and the function's layers
provide, with the environment the template gives it, against moto resources made from the
template's own definitions.

Where the cloud does something itself, the test does it the way the template says:
API Gateway's HTTP API (its route and JWT authorizer: tests/infra/offline_events.py), the
EventBridge schedule rule (the coordinator's tick), the Lambda Invoke API (the coordinator's
asynchronous invocations of the sweeper: recorded, then run in the sweeper's container), the
SQS event source mappings of the worker (their queues and batch size; successful records
deleted), and DynamoDB's TTL with the runs table's stream mapping and its filter (moto never
expires an item: the test deletes the run as TTL would).

Two jobs live their whole life. One due in seconds takes the fast path (API → SQS with a
delay): the sweeps of the next tick find nothing due. One due minutes ahead (after the minutes
a sweep may already be reading) is written as a timer. Time then moves on without the test
waiting for it: the functions invoked from then on run in containers whose wall clock is
shifted to just before that job falls due (tests/infra/offline_driver.py), so the next tick's
sweep hands its timer over to SQS with a delay, which the queue honours in real time (seconds).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer

from infra import packaging
from tests.infra.conftest import STACK, Synth
from tests.infra.offline_events import (
    HttpApi,
    matches,
    scheduled_event,
    sqs_event,
    stream_event,
)
from tests.infra.offline_iam import refused
from tests.infra.offline_runtime import Container, InvokeRecorder, provided_packages
from tests.infra.offline_template import OfflineStack

pytestmark = pytest.mark.slow

REGION = "eu-west-1"
TENANT = "acme-offline"
HANDLER_PREFIX = "duetime.entrypoints."
MESSAGE_WAIT_SECONDS = 45
# Time moves on to this long before the timer's job falls due: the later containers start (a
# second or two when idle; over 8 s on a loaded 2-core CI machine, 5 interpreters at once), the
# tick and the sweeps run, and the run's message waits out the rest.
LEAD_SECONDS = 25
# Importable in no function's container.
ABSENT = (
    "duetime.local",
    "numpy",
    "croniter",
    "moto",
    "pytest",
    "hypothesis",
    "aws_cdk",
    "duckdb",
    "tests",
)


@dataclass
class Deployment:
    stack: OfflineStack
    asset: Path
    functions: dict[str, str]  # entrypoint name -> logical id
    environments: dict[str, dict[str, str]]  # entrypoint name -> its environment
    layers: dict[str, list[str]]  # entrypoint name -> the ARNs of its layers
    containers: dict[str, Container]  # entrypoint name -> its container
    recorder: InvokeRecorder
    start: Callable[[str, int], Container]  # a function's container, its clock shifted (ms)
    # (entrypoint name, clock offset in ms) -> a container of later, started on first use
    later: dict[tuple[str, int], Container] = field(default_factory=dict)
    # The runs table's stream: shard id -> the last sequence number delivered to the archiver
    stream_positions: dict[str, str] = field(default_factory=dict)

    def calls_of(self, name: str) -> list[dict[str, Any]]:
        """Every AWS call the function made, in all its containers (offline_driver.py)."""
        started = [self.containers[name], *(c for (n, _), c in self.later.items() if n == name)]
        return [call for container in started for call in container.calls]

    def container(self, name: str, clock_offset_ms: int = 0) -> Container:
        """The function's container whose wall clock is `clock_offset_ms` ahead: for an offset,
        one started (not waited for) on first use, as a cold start later on would be."""
        if not clock_offset_ms:
            return self.containers[name]
        if (name, clock_offset_ms) not in self.later:
            self.later[name, clock_offset_ms] = self.start(name, clock_offset_ms)
        return self.later[name, clock_offset_ms]

    def api(
        self, method: str, path: str, *, body: Any = None, clock_offset_ms: int = 0
    ) -> tuple[int, Any]:
        """(status, JSON body) of the API function's answer to a request of TENANT."""
        answer = self.request(method, path, body=body, clock_offset_ms=clock_offset_ms)
        return answer["statusCode"], json.loads(answer["body"])

    def request(
        self, method: str, path: str, *, body: Any = None, clock_offset_ms: int = 0
    ) -> dict[str, Any]:
        """The API function's whole answer (status, headers, body) to a request of TENANT."""
        tenant_claim = self.environments["api"].get("DUETIME_TENANT_CLAIM", "sub")
        gateway = HttpApi(self.stack.resources, tenant_claim, REGION, self.stack.account)
        # The token names the tenant; a route without the authorizer gets no claims.
        now = time.time() + clock_offset_ms / 1000
        event = gateway.event(method, path, tenant=TENANT, body=body, now=now)
        answer: dict[str, Any] = self.container("api", clock_offset_ms).invoke(event)
        return answer


@pytest.fixture(scope="module")
def deployment(synth: Synth, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    recorder = InvokeRecorder()
    containers: dict[str, Container] = {}
    later: dict[tuple[str, int], Container] = {}
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        session = boto3.Session(
            aws_access_key_id="offline", aws_secret_access_key="offline", region_name=REGION
        )
        manifest = json.loads((synth.outdir / "manifest.json").read_text())
        stack_name = manifest["artifacts"][STACK]["properties"]["stackName"]
        stack = OfflineStack(synth.json, stack_name, session, endpoint)
        stack.create()
        functions = {
            r["Properties"]["Handler"].removeprefix(HANDLER_PREFIX).split(".")[0]: logical_id
            for logical_id, r in stack.of_type("AWS::Lambda::Function").items()
            if r["Properties"]["Handler"].startswith(HANDLER_PREFIX)
        }
        (asset,) = {
            synth.outdir / stack.resources[i]["Metadata"]["aws:asset:path"]
            for i in functions.values()
        }
        base = tmp_path_factory.mktemp("offline")
        layers = {
            name: stack.resolve(stack.resources[logical_id]["Properties"].get("Layers", []))
            for name, logical_id in functions.items()
        }

        # Resolved one after another: what they refer to is made once (the first time).
        environments = {
            name: lambda_environment(stack, logical_id, asset, endpoint, recorder.url)
            for name, logical_id in functions.items()
        }

        provided = {
            name: provided_packages(base / f"provided-{name}", layers[name]) for name in functions
        }

        def start(name: str, clock_offset_ms: int = 0) -> Container:
            logical_id = functions[name]
            shifted = f"+{clock_offset_ms}ms" if clock_offset_ms else ""
            return Container(
                asset,
                provided[name],
                environments[name],
                timeout_seconds=int(stack.resources[logical_id]["Properties"]["Timeout"]),
                function_arn=stack.made(logical_id).attributes["Arn"],
                log=base / f"{name}{shifted}.log",
                clock_offset_ms=clock_offset_ms,
            )

        containers.update({name: start(name) for name in functions})
        yield Deployment(
            stack, asset, functions, environments, layers, containers, recorder, start, later
        )
    finally:
        for container in [*containers.values(), *later.values()]:
            container.stop()
        recorder.stop()
        server.stop()


def lambda_environment(
    stack: OfflineStack, logical_id: str, asset: Path, endpoint: str, lambda_endpoint: str
) -> dict[str, str]:
    """The template's variables of the function, and what Lambda sets besides them: the region,
    credentials (moto's), the function's name and memory, the handler. Every AWS call goes to
    moto, except Lambda's Invoke API (the recorder); no file or instance metadata is read."""
    properties = stack.resources[logical_id]["Properties"]
    variables = stack.environment(logical_id)
    runtime = {
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "offline",
        "AWS_SECRET_ACCESS_KEY": "offline",
        "AWS_SESSION_TOKEN": "offline",
        "AWS_LAMBDA_FUNCTION_NAME": stack.made(logical_id).ref,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(properties.get("MemorySize", 128)),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "LAMBDA_TASK_ROOT": str(asset),
        "_HANDLER": properties["Handler"],
        "TZ": ":UTC",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ENDPOINT_URL_LAMBDA": lambda_endpoint,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        # X-Ray has no daemon here: Powertools' tracer would only warn.
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    assert not set(runtime) & set(variables), "the template sets a variable Lambda reserves"
    # Lambda extracts the asset to /var/task: a path there is that path in the asset here.
    task_root = packaging.LAMBDA_TASK_ROOT + "/"
    in_asset = {
        name: str(asset / value.removeprefix(task_root))
        for name, value in variables.items()
        if value.startswith(task_root)
    }
    return variables | in_asset | runtime


def test_every_function_starts_from_the_asset_with_only_what_lambda_provides(
    deployment: Deployment,
) -> None:
    asset = str(deployment.asset)
    for name, container in deployment.containers.items():
        init = container.init
        origins = init["origins"]

        assert init["module_file"].startswith(asset + os.sep), name
        # The asset, then the runtime's and the layers' packages, then the standard library
        first, provided, *stdlib = init["sys_path"]
        assert (first, Path(provided).name) == (asset, f"provided-{name}")
        assert [p for p in stdlib if "site-packages" in p or sys.base_prefix not in p] == []
        for vendored in ("duetime", "tzdata"):
            assert origins[vendored].startswith(asset + os.sep), (name, vendored)
        for provided in ("boto3", "botocore", "aws_lambda_powertools"):
            assert origins[provided] is not None, (name, provided)
            assert not origins[provided].startswith(asset + os.sep), (name, provided)
        # pyarrow only with the AWS SDK for pandas layer (the archive's functions)
        with_pandas = any(":layer:AWSSDKPandas" in arn for arn in deployment.layers[name])
        assert (origins["pyarrow"] is not None) == with_pandas, name
        # Nothing of the local stack, the tests or their tools (nor numpy: pyarrow needs none)
        assert [n for n in ABSENT if origins[n] is not None] == [], name


def test_a_job_lives_its_whole_life_on_either_path_through_the_deployed_handlers(
    deployment: Deployment, synth: Synth
) -> None:
    sqs = deployment.stack.client("sqs")
    # Given a queue of the operator's to deliver to (not one of duetime's own)
    target_url = sqs.create_queue(QueueName="orders")["QueueUrl"]

    # The API answers its health check without a token
    assert deployment.api("GET", "/health") == (200, {"status": "ok"})

    # When the tenant submits a job due in two seconds
    soon = {"order": 42, "proof": "offline"}
    status, job = deployment.api("POST", "/jobs", body=_job({"delay_seconds": 2}, target_url, soon))
    assert status == 201, job
    # And one due at the start of the fourth minute from now: after the minutes a sweep may
    # already be reading (the current one and the lookahead)
    due_ms = (_now_ms() // 60_000 + 4) * 60_000
    due_at = datetime.fromtimestamp(due_ms / 1000, UTC)
    swept_later = {"order": 43, "proof": "offline, swept"}
    status, timed_job = deployment.api(
        "POST",
        "/jobs",
        body=_job({"at": due_at.strftime("%Y-%m-%dT%H:%M:%SZ")}, target_url, swept_later),
    )
    assert status == 201, timed_job
    # Then the second waits in the timers table: in its minute's partition of its shard
    timer = _timer_item(deployment, timed_job["id"], due_ms)
    assert timer is not None
    assert timer["tenant"] == {"S": TENANT}

    # When the schedule rule ticks the coordinator, which starts one sweep per shard
    swept = _tick(deployment)
    # Then the sweeps hand nothing over: the first job went to SQS when it was submitted, the
    # second is not due yet
    assert [(s["timers_read"], s["messages_sent"]) for s in swept] == [(0, 0)] * len(swept)

    # And the first job's run goes through the worker to the target, then to the archive
    first = _follow_the_run(deployment, job["id"], target_url, soon)

    # And no run message waits for the worker: the second job is still only its timer
    assert _worker_queue_depth(deployment) == 0
    assert _timer_item(deployment, timed_job["id"], due_ms) == timer

    # When time moves on to just before the second job falls due: the functions invoked from
    # now on run in containers whose wall clock is that far ahead (no one waits minutes)
    offset_ms = due_ms - LEAD_SECONDS * 1000 - _now_ms()
    later = [deployment.container(n, offset_ms) for n in ("coordinator", "sweeper", "worker")]
    later += [deployment.container(n, offset_ms) for n in ("api", "archiver")]
    assert all(container.init for container in later)  # started together, waited for here
    assert _now_ms() + offset_ms < due_ms - 2000, "the later containers took too long to start"

    # And the schedule rule ticks the coordinator again
    swept = _tick(deployment, offset_ms)
    # Then the sweep of the timer's shard hands it over to SQS (delayed until it falls due), and
    # no other sweep sends anything
    handed_over = {
        s["shard"]: (s["timers_read"], s["messages_sent"])
        for s in swept
        if s["timers_read"] or s["messages_sent"]
    }
    assert handed_over == {_shard(deployment, timed_job["id"]): (1, 1)}
    assert _worker_queue_depth(deployment) == 1

    # And its run goes through the worker to the target, on time, then to the archive
    run = _follow_the_run(deployment, timed_job["id"], target_url, swept_later, offset_ms)
    assert datetime.fromisoformat(run["scheduled_for"]) == due_at
    assert datetime.fromisoformat(run["started_at"]) >= due_at

    # And the daily compactor merges the day's archive objects: the two runs' own when both
    # fell on one UTC day (a test run across midnight leaves one a day: nothing to merge)
    day = due_at.date().isoformat()
    compacted = deployment.container("compactor").invoke({"dt": day})
    (partition,) = compacted["partitions"]
    one_day = datetime.fromisoformat(first["scheduled_for"]).date() == due_at.date()
    assert (partition["dt"], partition["merged"]) == (day, 2 if one_day else 0), partition

    # And every AWS call of every function was one its role's policies allow (moto allows
    # them all: tests/infra/offline_iam.py judges them against the template), the target's
    # delivery included, made as the target role the worker assumed
    calls = {name: deployment.calls_of(name) for name in deployment.functions}
    worker_calls = {c.get("operation") for c in calls["worker"]}
    assert {"BatchGetItem", "PutItem", "AssumeRole", "SendMessage"} <= worker_calls, worker_calls
    for name, made in calls.items():
        role = synth.role_of(name)
        problems = refused(synth, deployment.stack, role, made)
        assert problems == [], f"{name}: {problems}"


def test_the_deployed_api_function_serves_the_console_without_a_token(
    deployment: Deployment,
) -> None:
    index = deployment.asset / packaging.CONSOLE_ASSET_DIR / "index.html"
    handler = deployment.asset / "duetime" / "api" / "console.py"
    if not (index.is_file() and handler.is_file()):
        pytest.skip("this checkout has no console (console/index.html, duetime/api/console.py)")

    # GET /console/ takes the public GET /console route (API Gateway ignores the trailing
    # slash when matching); the page is the asset's index.html, with its security headers
    page = deployment.request("GET", "/console/")
    headers = {k.lower(): v for k, v in page["headers"].items()}
    assert page["statusCode"] == 200
    assert headers["content-type"].startswith("text/html")
    assert page["body"] == index.read_text()
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self';" in policy  # the API is the same origin; no issuer: tokens
    assert headers["x-content-type-options"] == "nosniff"
    # GET /console is the same page (no redirect: a trailing slash must not matter)
    bare = deployment.request("GET", "/console")
    assert (bare["statusCode"], bare["body"]) == (200, page["body"])
    # and the generated sign-in settings say: paste a token (no client id in the template)
    config = deployment.request("GET", "/console/config.json")
    assert (config["statusCode"], json.loads(config["body"])) == (200, {"auth": "token"})


def _job(schedule: dict[str, Any], queue_url: str, payload: Any) -> dict[str, Any]:
    """The body of POST /jobs: a job delivering `payload` to an SQS queue on `schedule`."""
    return {
        "name": "offline proof",
        "schedule": schedule,
        "target": {"type": "sqs", "queue_url": queue_url},
        "payload": payload,
    }


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _shard(deployment: Deployment, job_id: str) -> int:
    """The shard of a job's timers: crc32 of its id, modulo the deployment's shards."""
    shards = int(deployment.environments["api"]["DUETIME_TIMER_SHARDS"])
    return zlib.crc32(job_id.encode()) % shards


def _timer_item(deployment: Deployment, job_id: str, due_ms: int) -> dict[str, Any] | None:
    """The timers table's item of a new job's occurrence, found by the table's key layout:
    partition `<yyyymmddHHMM of its minute>#<shard>`, sort key `<due epoch ms, 13 digits>#<job
    id>#<generation>` (0: never paused)."""
    minute = datetime.fromtimestamp(due_ms / 1000, UTC).strftime("%Y%m%d%H%M")
    key = {
        "pk": {"S": f"{minute}#{_shard(deployment, job_id)}"},
        "sk": {"S": f"{due_ms:013d}#{job_id}#0"},
    }
    item: dict[str, Any] | None = (
        deployment.stack.client("dynamodb")
        .get_item(
            TableName=deployment.environments["api"]["DUETIME_TIMERS_TABLE"],
            Key=key,
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item


def _tick(deployment: Deployment, clock_offset_ms: int = 0) -> list[dict[str, Any]]:
    """The schedule rule ticks the coordinator, whose asynchronous invocations of the sweeper
    (one per shard) run in the sweeper's container: the sweeps' results."""
    before = len(deployment.recorder.invocations)
    now = time.time() + clock_offset_ms / 1000
    event = scheduled_event(
        _rule_arn(deployment, "coordinator"), REGION, deployment.stack.account, now=now
    )
    tick = deployment.container("coordinator", clock_offset_ms).invoke(event)
    shards = int(deployment.environments["coordinator"]["DUETIME_TIMER_SHARDS"])
    assert tick["launched"] == tick["shards"] == shards
    started = deployment.recorder.invocations[before:]
    sweeper = deployment.stack.made(deployment.functions["sweeper"]).ref
    assert {(i.function_name, i.invocation_type) for i in started} == {(sweeper, "Event")}
    assert sorted(i.payload["shard"] for i in started) == list(range(shards))
    swept = []
    for invocation in started:
        result = deployment.container("sweeper", clock_offset_ms).invoke(invocation.payload)
        assert result["shard"] == invocation.payload["shard"]
        swept.append(result)
    return swept


def _follow_the_run(
    deployment: Deployment,
    job_id: str,
    target_url: str,
    payload: Any,
    clock_offset_ms: int = 0,
) -> dict[str, Any]:
    """The job's run message handed to the worker, the target's delivery, the run `succeeded`
    in the API, then archived when its record expires. Returns the run as the API shows it."""
    sqs = deployment.stack.client("sqs")
    # The run's message reaches a queue of the worker's event source mappings
    messages, queue_arn, queue_url = _worker_batch(deployment)
    worker = deployment.container("worker", clock_offset_ms)
    answer = worker.invoke(sqs_event(messages, queue_arn, REGION))
    assert answer == {"batchItemFailures": []}
    for message in messages:  # the mapping deletes what the function did not report
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    # The target received the call
    delivered = sqs.receive_message(
        QueueUrl=target_url, MessageAttributeNames=["All"], WaitTimeSeconds=1
    )["Messages"]
    assert [json.loads(m["Body"]) for m in delivered] == [payload]
    attributes = delivered[0]["MessageAttributes"]
    assert attributes["duetime-job-id"]["StringValue"] == job_id
    sqs.delete_message(QueueUrl=target_url, ReceiptHandle=delivered[0]["ReceiptHandle"])

    # The API shows the run succeeded
    status, runs = deployment.api("GET", f"/jobs/{job_id}/runs", clock_offset_ms=clock_offset_ms)
    assert status == 200
    assert [r["status"] for r in runs["items"]] == ["succeeded"]
    run: dict[str, Any] = runs["items"][0]
    assert attributes["duetime-run-id"]["StringValue"] == run["run_id"]

    # When the run record expires, the archiver writes it to the history bucket
    archived = _expire_and_archive(deployment, job_id, clock_offset_ms)
    assert archived["archived"] == 1, archived
    bucket = deployment.environments["archiver"]["DUETIME_HISTORY_BUCKET"]
    s3 = deployment.stack.client("s3")
    rows = [
        row
        for key in archived["objects"]
        for row in pq.read_table(
            io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        ).to_pylist()
    ]
    assert [(r["run_id"], r["job_id"], r["tenant"], r["status"]) for r in rows] == [
        (run["run_id"], job_id, TENANT, "succeeded")
    ]
    return run


def _rule_arn(deployment: Deployment, name: str) -> str:
    """The ARN of the schedule rule whose target is the function."""
    target = {"Fn::GetAtt": [deployment.functions[name], "Arn"]}
    (rule,) = [
        logical_id
        for logical_id, r in deployment.stack.of_type("AWS::Events::Rule").items()
        if any(t["Arn"] == target for t in r["Properties"]["Targets"])
    ]
    return f"arn:aws:events:{REGION}:{deployment.stack.account}:rule/{rule}"


def _mappings(deployment: Deployment, name: str) -> list[dict[str, Any]]:
    """The event source mappings of a function."""
    function = {"Ref": deployment.functions[name]}
    return [
        r["Properties"]
        for r in deployment.stack.of_type("AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == function
    ]


def _worker_sources(deployment: Deployment) -> list[tuple[str, str, int]]:
    """The queues of the worker's event source mappings: (URL, ARN, batch size received)."""
    sources = []
    for mapping in _mappings(deployment, "worker"):
        logical_id, _ = mapping["EventSourceArn"]["Fn::GetAtt"]
        made = deployment.stack.made(logical_id)
        sources.append((made.ref, made.attributes["Arn"], min(mapping["BatchSize"], 10)))
    return sources


def _worker_queue_depth(deployment: Deployment) -> int:
    """The messages on the worker's queues: visible, in flight or delayed."""
    sqs = deployment.stack.client("sqs")
    counts = (
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    )
    return sum(
        int(value)
        for url, _, _ in _worker_sources(deployment)
        for value in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(counts))[
            "Attributes"
        ].values()
    )


def _worker_batch(deployment: Deployment) -> tuple[list[dict[str, Any]], str, str]:
    """The first batch a worker mapping receives: (messages, queue ARN, queue URL)."""
    sqs = deployment.stack.client("sqs")
    sources = _worker_sources(deployment)
    deadline = time.monotonic() + MESSAGE_WAIT_SECONDS
    while time.monotonic() < deadline:
        for url, arn, batch_size in sources:
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=batch_size,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if messages:
                return messages, arn, url
        time.sleep(0.5)
    raise AssertionError(f"no run message within {MESSAGE_WAIT_SECONDS} s")


def _expire_and_archive(
    deployment: Deployment, job_id: str, clock_offset_ms: int = 0
) -> dict[str, Any]:
    """Delete the job's run records as DynamoDB's TTL would, then deliver the runs table's
    stream as the archiver's mapping does: from where it left off, its batch size, its
    filter."""
    (mapping,) = _mappings(deployment, "archiver")
    table_id, _ = mapping["EventSourceArn"]["Fn::GetAtt"]
    table = deployment.stack.made(table_id).ref
    hash_key, range_key = (
        k["AttributeName"] for k in deployment.stack.resources[table_id]["Properties"]["KeySchema"]
    )
    dynamodb = deployment.stack.client("dynamodb")
    items = dynamodb.query(
        TableName=table,
        KeyConditionExpression="#k = :job",
        ExpressionAttributeNames={"#k": hash_key},
        ExpressionAttributeValues={":job": {"S": job_id}},
    )["Items"]
    expired = [{k: item[k] for k in (hash_key, range_key)} for item in items]
    for key in expired:
        dynamodb.delete_item(TableName=table, Key=key)

    streams = deployment.stack.client("dynamodbstreams")
    stream_arn = deployment.stack.made(table_id).attributes["StreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        shard_id = shard["ShardId"]
        position = deployment.stream_positions.get(shard_id)
        start = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": position}
            if position is not None
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, **start)[
            "ShardIterator"
        ]
        while iterator:
            reply = streams.get_records(ShardIterator=iterator, Limit=mapping["BatchSize"])
            if not reply["Records"]:
                break
            records += reply["Records"]
            deployment.stream_positions[shard_id] = reply["Records"][-1]["dynamodb"][
                "SequenceNumber"
            ]
            iterator = reply.get("NextShardIterator")
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    delivered = [
        r
        for r in stream_event(records, stream_arn, REGION, expired)
        if any(matches(r, p) for p in patterns)
    ]
    assert len(delivered) == len(expired) < len(records)  # the run's writes are filtered out
    archiver = deployment.container("archiver", clock_offset_ms)
    result: dict[str, Any] = archiver.invoke({"Records": delivered})
    return result
