"""`scripts/emulator_bench.py`: the local emulator's own cost per AWS call, beside plain moto.

    .venv/bin/python scripts/emulator_bench.py [--calls 2000] [--threads 10] [--json]

Starts moto servers in processes of their own: the local stack's (duetime.local.moto_process:
persistent connections, answers written at once, the other fixes), called with signed requests
(`local`) and unsigned as the stack calls it (`local_unsigned`: duetime.local.endpoint's
moto_session), and moto's own `ThreadedMotoServer` with none of them (`plain_moto`). Against
each, in one run:

- `mix`: `--threads` threads each making conditional PutItems and strongly consistent
  GetItems of ~600-byte items (what a run's claim, outcome and job read look like) on a table
  with a stream, `--calls` calls in all: calls per second, and the server's and the client's
  CPU milliseconds per call (from /proc: Linux only);
- `stream`: one GetRecords of up to 25 and of up to 400 of the records the mix wrote
  (milliseconds, and how many it returned).

Prints a table, or the figures as JSON. docs/performance.md ("The local emulator") has a run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared")]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def item(key: str, version: int) -> dict[str, Any]:
    """A run record's size and shape."""
    ms = {"N": "1795256280000"}
    attempt = {"number": {"N": "1"}, "started_ms": ms, "lateness_ms": {"N": "12"}}
    lease = {"message_id": {"S": "0a1b2c3d-4e5f-6789-abcd-ef0123456789"}, "until_ms": ms}
    return {
        "job_id": {"S": key},
        "scheduled_ms": ms,
        "tenant": {"S": "tenant"},
        "status": {"S": "running"},
        "v": {"N": str(version)},
        "attempts": {"L": [{"M": attempt}]},
        "lease": {"M": lease},
        "expires_at": {"N": "1797848280"},
        "job_name": {"S": "a job"},
        "target_type": {"S": "handler"},
    }


def measure(plain: bool, calls: int, threads: int, unsigned: bool = False) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    from duetime.local import moto_process
    from duetime.local.endpoint import MOTO_DEFAULT_REGION, moto_session

    process, url = moto_process.start("127.0.0.1", 0, plain=plain)
    try:
        session = (
            moto_session(MOTO_DEFAULT_REGION)
            if unsigned
            else boto3.Session(
                aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
            )
        )
        ddb = session.client("dynamodb", endpoint_url=url, config=Config(max_pool_connections=50))
        streams = session.client(
            "dynamodbstreams",
            endpoint_url=url,
            config=Config(account_id_endpoint_mode="disabled"),
        )
        ddb.create_table(
            TableName="runs",
            KeySchema=[
                {"AttributeName": "job_id", "KeyType": "HASH"},
                {"AttributeName": "scheduled_ms", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "job_id", "AttributeType": "S"},
                {"AttributeName": "scheduled_ms", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "OLD_IMAGE"},
        )
        key = {"scheduled_ms": {"N": "1795256280000"}}

        def one(name: str) -> None:
            ddb.put_item(
                TableName="runs",
                Item=item(name, 1),
                ConditionExpression="attribute_not_exists(job_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            ddb.get_item(TableName="runs", Key=key | {"job_id": {"S": name}}, ConsistentRead=True)

        def loop(worker: int, count: int, body: Callable[[str], None] = one) -> None:
            for n in range(count):
                body(f"{worker}-{n}")

        loop(-1, 20)  # warm: the server's first calls import its backends
        per_thread = max(1, calls // 2 // threads)
        server0, client0, started = cpu_seconds(process.pid), cpu_seconds(os.getpid()), time.time()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda w: loop(w, per_thread), range(threads)))
        elapsed = time.time() - started
        made = 2 * per_thread * threads
        server_ms = (cpu_seconds(process.pid) - server0) / made * 1000
        client_ms = (cpu_seconds(os.getpid()) - client0) / made * 1000
        arn = ddb.describe_table(TableName="runs")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        reads: dict[str, float] = {}
        for limit in (25, 400):  # from the stream's start: min(limit, records written)
            at = time.perf_counter()
            got = streams.get_records(ShardIterator=iterator, Limit=limit)["Records"]
            reads[f"get_records_{limit}_ms"] = round((time.perf_counter() - at) * 1000, 1)
            reads[f"get_records_{limit}_records"] = len(got)
        return {
            "calls": made,
            "threads": threads,
            "calls_per_second": round(made / elapsed, 1),
            "server_cpu_ms_per_call": round(server_ms, 2),
            "client_cpu_ms_per_call": round(client_ms, 2),
            **reads,
        }
    finally:
        moto_process.stop(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls in the mix (2000)")
    parser.add_argument("--threads", type=int, default=10, help="client threads (10)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.calls < 2 or args.threads < 1:
        parser.error("--calls must be at least 2 and --threads at least 1")
    results = {
        "local": measure(False, args.calls, args.threads),
        "local_unsigned": measure(False, args.calls, args.threads, unsigned=True),
        "plain_moto": measure(True, args.calls, args.threads),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        "| figure | local stack's moto | the same, unsigned (as the stack calls it) | plain moto |"
    )
    print("|---|---|---|---|")
    for figure in results["local"]:
        row = " | ".join(str(results[server][figure]) for server in results)
        print(f"| {figure} | {row} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
