"""The deployed code, proven offline: a job's whole life through the handlers of the
synthesized Lambda asset, each in a clean interpreter with only what Lambda and the
function's layers provide, with the environment the template gives it, against moto
resources made from the template's own definitions.

Where the cloud does something itself, the test does it the way the template says:
API Gateway's HTTP API (its route and JWT authorizer: tests/infra/offline_events.py), the
EventBridge schedule rule (the coordinator's tick), the Lambda Invoke API (the coordinator's
asynchronous invocations of the sweeper: recorded, then run in the sweeper's container), the
SQS event source mappings of the worker (their queues and batch size; successful records
deleted), and DynamoDB's TTL with the runs table's stream mapping and its filter (moto never
expires an item: the test deletes the run as TTL would).

A job due in seconds takes the fast path (API → SQS with a delay); the sweep runs every
shard as deployed but finds nothing due (only a job due after the next minute gets a timer,
and a sweep reads it in the minute before it falls due: following one would take minutes;
the hand-over is covered by tests/integration/test_engine.py).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer

from tests.infra.conftest import STACK, Synth
from tests.infra.offline_events import (
    HttpApi,
    matches,
    scheduled_event,
    sqs_event,
    stream_event,
)
from tests.infra.offline_runtime import Container, InvokeRecorder, provided_packages
from tests.infra.offline_template import OfflineStack

pytestmark = pytest.mark.slow

REGION = "eu-west-1"
TENANT = "acme-offline"
HANDLER_PREFIX = "duetime.entrypoints."
MESSAGE_WAIT_SECONDS = 30
# Importable in no function's container.
ABSENT = ("duetime.local", "numpy", "moto", "pytest", "hypothesis", "aws_cdk", "duckdb", "tests")


@dataclass
class Deployment:
    stack: OfflineStack
    asset: Path
    functions: dict[str, str]  # entrypoint name -> logical id
    environments: dict[str, dict[str, str]]  # entrypoint name -> its environment
    layers: dict[str, list[str]]  # entrypoint name -> the ARNs of its layers
    containers: dict[str, Container]  # entrypoint name -> its container
    recorder: InvokeRecorder

    def api(self, method: str, path: str, *, body: Any = None) -> tuple[int, Any]:
        """(status, JSON body) of the API function's answer to a request of TENANT."""
        tenant_claim = self.environments["api"].get("DUETIME_TENANT_CLAIM", "sub")
        gateway = HttpApi(self.stack.resources, tenant_claim, REGION, self.stack.account)
        # The token names the tenant; a route without the authorizer gets no claims.
        event = gateway.event(method, path, tenant=TENANT, body=body)
        answer = self.containers["api"].invoke(event)
        return answer["statusCode"], json.loads(answer["body"])


@pytest.fixture(scope="module")
def deployment(synth: Synth, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    recorder = InvokeRecorder()
    containers: dict[str, Container] = {}
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

        for name, logical_id in functions.items():
            containers[name] = Container(
                asset,
                provided_packages(base / f"provided-{name}", layers[name]),
                environments[name],
                timeout_seconds=int(stack.resources[logical_id]["Properties"]["Timeout"]),
                function_arn=stack.made(logical_id).attributes["Arn"],
                log=base / f"{name}.log",
            )
        yield Deployment(stack, asset, functions, environments, layers, containers, recorder)
    finally:
        for container in containers.values():
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
    return variables | runtime


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


def test_a_job_lives_its_whole_life_through_the_deployed_handlers(
    deployment: Deployment,
) -> None:
    sqs = deployment.stack.client("sqs")
    # Given a queue of the operator's to deliver to (not one of duetime's own)
    target_url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    payload = {"order": 42, "proof": "offline"}

    # The API answers its health check without a token
    assert deployment.api("GET", "/health") == (200, {"status": "ok"})

    # When the tenant submits a job due in two seconds
    status, job = deployment.api(
        "POST",
        "/jobs",
        body={
            "name": "offline proof",
            "schedule": {"delay_seconds": 2},
            "target": {"type": "sqs", "queue_url": target_url},
            "payload": payload,
        },
    )
    assert status == 201, job

    # And the schedule rule ticks the coordinator, which starts one sweep per shard
    tick = deployment.containers["coordinator"].invoke(
        scheduled_event(_rule_arn(deployment, "coordinator"), REGION, deployment.stack.account)
    )
    shards = int(deployment.environments["coordinator"]["DUETIME_TIMER_SHARDS"])
    assert tick["launched"] == tick["shards"] == shards
    started = deployment.recorder.invocations
    sweeper = deployment.stack.made(deployment.functions["sweeper"]).ref
    assert {(i.function_name, i.invocation_type) for i in started} == {(sweeper, "Event")}
    assert sorted(i.payload["shard"] for i in started) == list(range(shards))
    for invocation in started:
        swept = deployment.containers["sweeper"].invoke(invocation.payload)
        assert swept["shard"] == invocation.payload["shard"]

    # Then the run's message reaches a queue of the worker's event source mappings
    messages, queue_arn, queue_url = _worker_batch(deployment)
    answer = deployment.containers["worker"].invoke(sqs_event(messages, queue_arn, REGION))
    assert answer == {"batchItemFailures": []}
    for message in messages:  # the mapping deletes what the function did not report
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    # And the target received the call
    delivered = sqs.receive_message(
        QueueUrl=target_url, MessageAttributeNames=["All"], WaitTimeSeconds=1
    )["Messages"]
    assert [json.loads(m["Body"]) for m in delivered] == [payload]
    attributes = delivered[0]["MessageAttributes"]
    assert attributes["duetime-job-id"]["StringValue"] == job["id"]

    # And the API shows the run succeeded
    status, runs = deployment.api("GET", f"/jobs/{job['id']}/runs")
    assert status == 200
    assert [r["status"] for r in runs["items"]] == ["succeeded"]
    run_id = runs["items"][0]["run_id"]
    assert attributes["duetime-run-id"]["StringValue"] == run_id

    # When the run record expires, the archiver writes it to the history bucket
    archived = _expire_and_archive(deployment, job["id"])
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
        (run_id, job["id"], TENANT, "succeeded")
    ]


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


def _worker_batch(deployment: Deployment) -> tuple[list[dict[str, Any]], str, str]:
    """The first batch a worker mapping receives: (messages, queue ARN, queue URL)."""
    sqs = deployment.stack.client("sqs")
    sources = []
    for mapping in _mappings(deployment, "worker"):
        logical_id, _ = mapping["EventSourceArn"]["Fn::GetAtt"]
        made = deployment.stack.made(logical_id)
        sources.append((made.ref, made.attributes["Arn"], min(mapping["BatchSize"], 10)))
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


def _expire_and_archive(deployment: Deployment, job_id: str) -> dict[str, Any]:
    """Delete the job's run records as DynamoDB's TTL would, then deliver the runs table's
    stream as the archiver's mapping does: its batch size, its filter."""
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
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            reply = streams.get_records(ShardIterator=iterator, Limit=mapping["BatchSize"])
            if not reply["Records"]:
                break
            records += reply["Records"]
            iterator = reply.get("NextShardIterator")
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    delivered = [
        r
        for r in stream_event(records, stream_arn, REGION, expired)
        if any(matches(r, p) for p in patterns)
    ]
    assert len(delivered) == len(expired) < len(records)  # the run's writes are filtered out
    result: dict[str, Any] = deployment.containers["archiver"].invoke({"Records": delivered})
    return result
