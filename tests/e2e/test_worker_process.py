"""`duetime worker --runtime fargate` as a real process against a moto server: it runs jobs,
and on SIGTERM finishes the run in flight and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.runs import RunStatus
from duetime.resources import create_resources
from duetime.settings import Settings
from duetime.wiring import Components, build
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def stack(aws_env: None, unused_port: int) -> Iterator[tuple[Components, dict[str, str]]]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=unused_port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{unused_port}"
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        session = boto3.Session(region_name="us-east-1")
        settings: Settings = create_resources(
            session.client("dynamodb"), session.client("sqs"), timer_shards=2
        )
        env = {**os.environ, **settings.to_env(), "AWS_ENDPOINT_URL": endpoint}
        yield build(settings, session), env
    finally:
        del os.environ["AWS_ENDPOINT_URL"]
        server.stop()


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_given_a_run_in_flight_when_the_worker_gets_sigterm_then_it_finishes_and_exits_0(
    stack: tuple[Components, dict[str, str]],
) -> None:
    parts, env = stack
    job = parts.service.create(
        "tenant-a",
        parse_job_spec(
            {
                "schedule": {"delay_seconds": 0},
                "runtime": "fargate",
                "target": {"type": "handler", "name": "duetime.sleep"},
                "payload": {"seconds": 2},
            }
        ),
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "duetime.cli",
            "worker",
            "--runtime",
            "fargate",
            "--wait-seconds",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: parts.runs.get(job.id, job.created_ms) is not None)
        worker.send_signal(signal.SIGTERM)  # mid-run: the sleep takes 2 s
        output, _ = worker.communicate(timeout=30)
    finally:
        worker.kill()
    assert worker.returncode == 0, output
    run = parts.runs.get(job.id, job.created_ms)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert "worker stopped" in output
    left = parts.queue.receive(Runtime.FARGATE, Priority.NORMAL, 10, 0)
    assert left == []


def test_given_no_configuration_then_the_worker_explains_instead_of_a_traceback(
    aws_env: None,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    result = subprocess.run(
        [sys.executable, "-m", "duetime.cli", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("duetime: environment variable(s) not set: ")
    for name in ("DUETIME_JOBS_TABLE", "DUETIME_TIMERS_TABLE", "DUETIME_RUNS_TABLE"):
        assert name in result.stderr
    assert "Traceback" not in result.stderr
