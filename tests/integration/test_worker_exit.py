"""`duetime worker` exits at its stop timeout, not when the targets still running return
(docs/architecture.md, workers on Fargate): found by an outside audit, the process lived on
until they did (up to a job's timeout) and a second signal did not end it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER = """
import os, signal, sys, threading, time
import boto3
from moto import mock_aws
from duetime.domain.jobs import parse_job_spec
from duetime.resources import create_resources
from duetime.settings import Settings
from duetime.targets import DEFAULT_HANDLERS
import duetime.wiring

started = threading.Event()
def slow(invocation):
    started.set()
    time.sleep(60)
DEFAULT_HANDLERS.register("test.slow", slow)

mock_aws().start()
session = boto3.Session(region_name="us-east-1")
settings = create_resources(session.client("dynamodb"), session.client("sqs"), timer_shards=1)
parts = duetime.wiring.build(settings, session)
body = {"schedule": {"delay_seconds": 0}, "runtime": "fargate", "timeout_seconds": 120,
        "target": {"type": "handler", "name": "test.slow"}}
parts.service.create("tenant-a", parse_job_spec(body))
Settings.from_env = staticmethod(lambda: settings)
duetime.wiring.build = lambda *args, **kwargs: parts

def stop():
    started.wait(30)
    for _ in range(int(sys.argv[1])):
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=stop, daemon=True).start()
from duetime.cli.main import main
sys.exit(main(["worker", "--wait-seconds", "1", "--visibility-seconds", "6",
               "--stop-timeout-seconds", sys.argv[2]]))
"""


@pytest.mark.parametrize(("signals", "stop_timeout", "status"), [(1, "1", 0), (2, "30", 143)])
def test_the_worker_exits_at_its_stop_timeout_or_a_second_signal(
    tmp_path: Path, signals: int, stop_timeout: str, status: int
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = os.environ | {
        "PYTHONPATH": f"{REPO_ROOT / 'shared'}{os.pathsep}{REPO_ROOT}",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script), str(signals), stop_timeout],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    took = time.monotonic() - started

    assert done.returncode == status, done.stderr[-2000:]
    assert took < 40  # the target sleeps 60 s: its run was abandoned, not waited for
