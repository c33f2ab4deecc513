"""Process faults on the local stack's pieces: `duetime worker --runtime fargate` processes
against a moto server, killed (SIGKILL) or stalled (SIGSTOP) in the middle of a run.

The dead or stalled worker's message comes back when its visibility expires (the heartbeat
stops with the process), but the run is taken from it only once the run's lease (its timeout +
30 s, plus the clock-skew allowance, 2 s here) has passed: the attempt counts as failed
(abandoned) and attempt 2 completes the run. The accounting shows no loss and exactly the one
duplicate execution of the documented window (the first worker's target had started, its
outcome was never recorded).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from duetime.domain.jobs import parse_job_spec
from duetime.domain.runs import RunStatus
from duetime.resources import create_resources
from duetime.services.dropped import ABANDONED_ERROR
from duetime.settings import Env
from duetime.wiring import Components, build
from tests.reliability.accounting import account
from tests.reliability.local_handlers import pids, read_executions
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VISIBILITY_SECONDS = 2
TIMEOUT_SECONDS = 5  # the job's: its run's lease lasts this + 30 s
SKEW_ALLOWANCE_SECONDS = 2
# Until a dead worker's run is taken over: its lease, the allowance, a retry's backoff.
TAKEOVER_SECONDS = TIMEOUT_SECONDS + 30 + SKEW_ALLOWANCE_SECONDS + 10


@pytest.fixture
def stack(aws_env: None) -> Iterator[tuple[Components, dict[str, str]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        session = boto3.Session(region_name="us-east-1")
        settings = create_resources(
            session.client("dynamodb"), session.client("sqs"), timer_shards=2
        )
        env = {
            **os.environ,
            **settings.to_env(),
            "AWS_ENDPOINT_URL": endpoint,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "shared")]),
            Env.CLOCK_SKEW_ALLOWANCE_SECONDS: str(SKEW_ALLOWANCE_SECONDS),
        }
        yield build(settings, session), env
    finally:
        del os.environ["AWS_ENDPOINT_URL"]
        server.stop()


def start_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import faulthandler, signal; faulthandler.register(signal.SIGUSR1); "
            "import tests.reliability.local_handlers; from duetime.cli.main import main; "
            "raise SystemExit(main())",
            "worker",
            "--runtime",
            "fargate",
            "--wait-seconds",
            "1",
            "--visibility-seconds",
            str(VISIBILITY_SECONDS),
            "--stop-timeout-seconds",
            "20",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(worker: subprocess.Popen[str]) -> str:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        output, _ = worker.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        worker.send_signal(signal.SIGUSR1)  # the threads' stacks, for the failure message
        time.sleep(1)
        worker.kill()
        output, _ = worker.communicate(timeout=10)
        return "did not stop on SIGTERM:\n" + output
    return output


def submit(parts: Components, record: Path, first_seconds: float) -> tuple[str, int]:
    job = parts.service.create(
        "tenant-a",
        parse_job_spec(
            {
                "schedule": {"delay_seconds": 0},
                "runtime": "fargate",
                "timeout_seconds": TIMEOUT_SECONDS,
                "target": {"type": "handler", "name": "reliability.file_record"},
                "payload": {"path": str(record), "first_seconds": first_seconds},
            }
        ),
    )
    return job.id, job.created_ms


def test_given_a_worker_killed_mid_run_then_another_reclaims_the_run_and_completes_it(
    stack: tuple[Components, dict[str, str]], tmp_path: Path
) -> None:
    parts, env = stack
    record = tmp_path / "executions.jsonl"
    job_id, scheduled = submit(parts, record, first_seconds=4)
    first = start_worker(env)
    second: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: len(read_executions(record)) == 1, seconds=30)  # mid-run
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        second = start_worker(env)
        wait_for(
            lambda: _status(parts, job_id, scheduled) == RunStatus.SUCCEEDED,
            seconds=TAKEOVER_SECONDS + 30,
        )
    finally:
        first.kill()
        output = stop(second) if second else ""
    assert second is not None
    assert second.returncode == 0, output
    accounting = account({job_id: [scheduled]}, read_executions(record))
    assert accounting.totals.lost == 0
    assert accounting.totals.duplicated == 1  # the killed worker's execution, never recorded
    assert pids(record) == [first.pid, second.pid]
    run = parts.runs.get(job_id, scheduled)
    assert run is not None
    # The killed attempt counts: it failed (abandoned), and attempt 2 ran
    assert [(a.number, a.error) for a in run.attempts] == [(1, ABANDONED_ERROR), (2, None)]


def test_given_a_worker_stalled_past_its_visibility_then_the_run_is_reclaimed_once(
    stack: tuple[Components, dict[str, str]], tmp_path: Path
) -> None:
    parts, env = stack
    record = tmp_path / "executions.jsonl"
    job_id, scheduled = submit(parts, record, first_seconds=3)
    stalled = start_worker(env)
    other: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: len(read_executions(record)) == 1, seconds=30)
        stalled.send_signal(signal.SIGSTOP)  # no heartbeat: its lease runs out
        other = start_worker(env)
        wait_for(
            lambda: _status(parts, job_id, scheduled) == RunStatus.SUCCEEDED,
            seconds=TAKEOVER_SECONDS + 30,
        )
        recorded = parts.runs.get(job_id, scheduled)
        # It wakes up, finishes its work, and finds the run recorded by the other worker: its
        # own outcome is refused (the record's version moved on).
        stalled.send_signal(signal.SIGCONT)
        time.sleep(4)
    finally:
        # SIGKILL, not SIGTERM: after SIGSTOP/SIGCONT the worker may not see a SIGTERM (its
        # main thread waits on an Event with no timeout; see docs/reliability.md).
        stalled.send_signal(signal.SIGCONT)
        stalled.kill()
        stalled.communicate(timeout=10)
        other_output = stop(other) if other else ""
    assert other is not None
    assert other.returncode == 0, other_output
    accounting = account({job_id: [scheduled]}, read_executions(record))
    assert accounting.totals.lost == 0
    assert accounting.totals.duplicated == 1  # the stalled execution: its lease was lost
    run = parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run == recorded  # the stalled worker's late outcome did not overwrite it
    assert run.status == RunStatus.SUCCEEDED
    assert run.lease is None
    assert [a.number for a in run.attempts] == [1, 2]


def _status(parts: Components, job_id: str, scheduled: int) -> RunStatus | None:
    run = parts.runs.get(job_id, scheduled)
    return run.status if run else None
