"""The Lambda worker's footprint: what one run costs the worker function, measured.

Run it as a fresh process (it measures its own import cost and peak memory):

    .venv/bin/python scripts/worker_footprint.py [--batches 20] [--json]

1. Cold start: the time to import the worker entrypoint (duetime.entrypoints.worker: Powertools,
   boto3, the whole engine) and the process's resident memory after it, then the time to build
   the components (wiring.build: the boto3 clients).
2. On the local stack's AWS (a moto server on loopback in a child process, as `duetime local`
   runs it), the worker handler (`make_handler`, the same function Lambda invokes) processes
   `--batches` batches of 10 records each, one target at a time: `duetime.noop` (a handler
   target) and a webhook to a loopback HTTP server (another child process) that answers 200 at
   once. The messages are due before the batches start: no early wait is measured.

Per run (each figure ÷ the runs): the CPU seconds of this process (time.process_time; moto and
the webhook receiver run in other processes, so their CPU is not counted), the handler's wall
time and the bytes the handler writes to its logs (its JSON log lines and EMF metric lines, as
CloudWatch Logs would ingest them at the default INFO level); per batch, its wall time and CPU
seconds; the process's peak RSS (ru_maxrss).

What carries over to Lambda: the CPU seconds per run and the memory (RSS) — the worker's own
code, Powertools, boto3's request building, signing and response parsing, whatever answers.
(CPU speed differs between this machine and Lambda's arm64 cores: take it as an estimate.)
What is the emulator's: the wall times. moto answers on loopback in about a millisecond but
does more work per call than DynamoDB/SQS's client would see; in-Region DynamoDB calls take a
few milliseconds each. docs/performance.md ("Worker memory") shows a run and the rule that
chooses the worker's memory from it.

`--json` prints one object:
  machine            {"python", "platform", "cpus"}: where it ran
  date               the UTC date of the run
  batch_size         records per batch (10, as the event source mapping delivers)
  import_seconds     wall time of `import duetime.entrypoints.worker`
  import_rss_mb      the process's RSS after that import (MB, 1,048,576 bytes)
  components_seconds wall time of wiring.build (the boto3 clients; a cold start pays it once)
  targets            {"noop" | "webhook": {"batches", "runs", "failed", "cpu_seconds_per_run",
                      "wall_ms_per_run", "cpu_seconds_per_batch", "batch_wall_ms",
                      "batch_wall_ms_max", "log_bytes_per_run"}}
  peak_rss_mb        the process's peak RSS after every batch (ru_maxrss, MB)
  cpu_seconds_per_run, wall_ms_per_run   the noop target's (the figures the model reads)
  log_bytes_per_run  the larger target's log bytes per run (the model's CloudWatch Logs)
  cpu_seconds_per_batch, batch_wall_ms   the same, per batch of 10
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

# Import cost first, before anything else of the engine or boto3 is loaded.
_RSS_BEFORE_KB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
_T0 = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "shared", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from duetime.entrypoints import worker  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _T0

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import subprocess  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any, cast  # noqa: E402

BATCH = 10
MB = 1024 * 1024
REGION = "us-east-1"

# The webhook receiver: its own process, so its CPU is not the worker's.
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def rss_mb() -> float:
    """The process's resident memory now (Linux /proc), in MB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / MB


def peak_rss_mb() -> float:
    """ru_maxrss: kilobytes on Linux."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


class LogSink(io.TextIOBase):
    """Where the functions' log and EMF lines go: counted (UTF-8 bytes), not shown."""

    def __init__(self) -> None:
        self.bytes = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


def measure_target(
    parts: Any, sqs: Any, target: dict[str, Any], batches: int, logs: LogSink
) -> dict[str, float | int]:
    """Submit `batches` × 10 jobs due now, wait until every message is due and visible, then
    hand them to the worker handler 10 at a time, timing only the handler."""
    from duetime.domain.jobs import Priority, Runtime, parse_job_spec
    from duetime.local.lambda_runtime import FakeContext, sqs_event

    url = parts.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    for _ in range(batches * BATCH):
        spec = parse_job_spec({"schedule": {"delay_seconds": 0}, "target": target})
        parts.service.create("footprint", spec)
    time.sleep(1.5)  # jitter and SQS's early release: every message is due when handled
    handler = worker.make_handler(lambda: parts)
    cpu = wall = 0.0
    log_bytes = 0
    walls: list[float] = []
    runs = failed = 0
    while runs + failed < batches * BATCH:
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=BATCH,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            raise RuntimeError(f"queue drained after {runs + failed} of {batches * BATCH} runs")
        event = sqs_event(messages, arn, REGION)
        b0, c0, w0 = logs.bytes, time.process_time(), time.perf_counter()
        response = handler(event, cast(Any, FakeContext()))
        batch_wall = time.perf_counter() - w0
        cpu += time.process_time() - c0
        log_bytes += logs.bytes - b0
        wall += batch_wall
        walls.append(batch_wall)
        failures = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        failed += len(failures)
        runs += len(messages) - len(failures)
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )
    handled = runs + failed
    return {
        "batches": len(walls),
        "runs": runs,
        "failed": failed,
        "cpu_seconds_per_run": round(cpu / handled, 5),
        "wall_ms_per_run": round(wall / handled * 1000, 2),
        "cpu_seconds_per_batch": round(cpu / len(walls), 4),
        "batch_wall_ms": round(wall / len(walls) * 1000, 1),
        "batch_wall_ms_max": round(max(walls) * 1000, 1),
        "log_bytes_per_run": round(log_bytes / handled, 1),
    }


def measure(batches: int, *, webhook: bool = True) -> dict[str, Any]:
    """The whole measurement (see the module's docstring for the keys)."""
    import functools

    from botocore.config import Config

    from duetime import wiring
    from duetime.local import moto_process
    from duetime.local.endpoint import moto_session
    from duetime.observability import logger
    from duetime.resources import create_resources

    result: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "date": datetime.now(UTC).date().isoformat(),
        "batch_size": BATCH,
        "import_seconds": round(IMPORT_SECONDS, 3),
        "import_rss_mb": round(rss_mb(), 1),
        "rss_before_import_mb": round(_RSS_BEFORE_KB / 1024, 1),
    }
    with contextlib.ExitStack() as stack:
        process, moto_url = moto_process.start("127.0.0.1", 0)
        stack.callback(moto_process.stop, process)
        session = moto_session(REGION, unsigned_hot_path=False)  # signed, as on Lambda
        config = Config(max_pool_connections=50, retries={"mode": "standard"})
        client = functools.partial(session.client, config=config, endpoint_url=moto_url)
        sqs = client("sqs")
        settings = create_resources(
            client("dynamodb"),
            sqs,
            "duetime",
            kms=client("kms"),
            allow_private_targets=True,
            require_https=False,
            run_signing_key="footprint-" + "k" * 32,
        )
        t0 = time.perf_counter()
        parts = wiring.build(settings, session, endpoint_url=moto_url)
        result["components_seconds"] = round(time.perf_counter() - t0, 3)
        targets: dict[str, dict[str, Any]] = {"noop": {"type": "handler", "name": "duetime.noop"}}
        if webhook:
            receiver = subprocess.Popen(
                [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True
            )
            stack.callback(receiver.wait)
            stack.callback(receiver.terminate)
            assert receiver.stdout is not None
            port = int(receiver.stdout.readline())
            targets["webhook"] = {"type": "http", "url": f"http://127.0.0.1:{port}/hook"}
        # The functions' JSON logs and EMF lines are formatted (their CPU counts) and counted,
        # not shown.
        logs = LogSink()
        stack.enter_context(contextlib.redirect_stdout(logs))
        log_handler = logger.registered_handler
        if isinstance(log_handler, logging.StreamHandler):
            stack.callback(log_handler.setStream, log_handler.stream)
            log_handler.setStream(logs)
        result["targets"] = {
            name: measure_target(parts, sqs, target, batches, logs)
            for name, target in targets.items()
        }
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    noop = result["targets"]["noop"]
    for key in ("cpu_seconds_per_run", "wall_ms_per_run", "cpu_seconds_per_batch", "batch_wall_ms"):
        result[key] = noop[key]
    result["log_bytes_per_run"] = max(t["log_bytes_per_run"] for t in result["targets"].values())
    return result


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"Worker footprint, {result['date']}, Python {m['python']}, {m['platform']}, "
        f"{m['cpus']} CPUs",
        "",
        f"cold start: import {result['import_seconds'] * 1000:.0f} ms, RSS after import "
        f"{result['import_rss_mb']:.0f} MB; components {result['components_seconds'] * 1000:.0f} "
        "ms",
        f"peak RSS after every batch: {result['peak_rss_mb']:.0f} MB  (carries over to Lambda)",
        "",
        "| target | runs | failed | CPU s/run (Lambda) | CPU s/batch (Lambda) | log B/run "
        "(Lambda) | wall ms/run (emulator) | batch wall ms (emulator) | slowest batch ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in result["targets"].items():
        lines.append(
            f"| {name} | {t['runs']} | {t['failed']} | {t['cpu_seconds_per_run']:.4f} | "
            f"{t['cpu_seconds_per_batch']:.3f} | {t['log_bytes_per_run']:.0f} | "
            f"{t['wall_ms_per_run']:.1f} | "
            f"{t['batch_wall_ms']:.0f} | {t['batch_wall_ms_max']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--batches", type=int, default=20, help="batches of 10 per target")
    parser.add_argument("--no-webhook", action="store_true", help="the noop target only")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.batches < 1:
        parser.error("--batches: at least 1")
    result = measure(args.batches, webhook=not args.no_webhook)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
