"""`duetime local --hot-ttl-seconds` as a real process: a job's run expires from the runs table
within seconds, the TTL reaper and the stream poller carry it to the archiver, and
`duetime history query` (another process, finding the stack through its state directory)
returns it; the stack still stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Webhook, free_port
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

HOT_TTL_SECONDS = 3


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DUETIME_"))}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duetime.cli", *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass
class HotStack:
    url: str
    cwd: Path
    process: subprocess.Popen[str]

    def log(self) -> str:
        return (self.cwd / "local.log").read_text()[-3000:]

    def post(self, path: str, body: Any, token: str) -> Any:
        request = urllib.request.Request(
            self.url + path,
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.loads(reply.read())


@pytest.fixture
def hot_stack(tmp_path: Path) -> Iterator[HotStack]:
    port = free_port()
    log = (tmp_path / "local.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "duetime.cli",
            "local",
            "--port",
            str(port),
            "--hot-ttl-seconds",
            str(HOT_TTL_SECONDS),
            "--tick-seconds",
            "5",
        ],
        cwd=tmp_path,
        env=clean_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stack = HotStack(f"http://127.0.0.1:{port}", tmp_path, process)

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(stack.url + "/health", timeout=1) as reply:
                return bool(reply.status == 200)
        except OSError:
            return process.poll() is not None

    try:
        wait_for(healthy, 30)
        assert process.poll() is None, stack.log()
        yield stack
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()


def test_given_a_hot_window_of_seconds_when_a_job_runs_then_history_query_returns_its_run(
    hot_stack: HotStack, webhook: Webhook
) -> None:
    token = cli("token", "--tenant", "tenant-h", cwd=hot_stack.cwd).stdout.strip()
    job = hot_stack.post(
        "/jobs",
        {
            "name": "archived",
            "schedule": {"delay_seconds": 1},
            "target": {"type": "http", "url": f"{webhook.url}/history-e2e"},
        },
        token,
    )
    sql = (
        "SELECT job_id, tenant, job_name, status, attempts, lateness_ms, dt "
        f"FROM runs WHERE job_id = '{job['id']}'"
    )
    rows: list[dict[str, Any]] = []

    def archived() -> bool:
        nonlocal rows
        result = cli("history", "query", "--json", sql, cwd=hot_stack.cwd)
        assert result.returncode == 0, result.stderr + hot_stack.log()
        rows = json.loads(result.stdout)
        if not rows:
            time.sleep(0.5)
        return bool(rows)

    wait_for(archived, 25)
    assert len(webhook.to("/history-e2e")) == 1
    (row,) = rows
    assert row["job_id"] == job["id"]
    assert row["tenant"] == "tenant-h"
    assert row["job_name"] == "archived"
    assert row["status"] == "succeeded"
    assert row["attempts"] == 1
    assert 0 <= row["lateness_ms"] < 5000
    assert row["dt"] == job["next_run_at"][:10]

    hot_stack.process.send_signal(signal.SIGINT)
    assert hot_stack.process.wait(timeout=20) == 0, hot_stack.log()
    assert not (hot_stack.cwd / ".duetime" / "local.json").exists()
