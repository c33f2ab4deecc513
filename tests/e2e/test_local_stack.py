"""`duetime local` as a real process, over real HTTP: the gateway's JWT authorizer, a job
delivered to a webhook on loopback on time, and a clean stop on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.slow

API_HANDLER = Path(__file__).resolve().parents[2] / "shared" / "duetime" / "entrypoints" / "api.py"


@dataclass
class LocalProcess:
    process: subprocess.Popen[str]
    url: str
    cwd: Path
    output: Path

    def log(self) -> str:
        return self.output.read_text() + "\n--- functions.log (end) ---\n" + self._tail_of_log()

    def _tail_of_log(self) -> str:
        log = self.cwd / ".duetime" / "functions.log"
        return log.read_text()[-4000:] if log.exists() else "(no log)"

    def token(self, tenant: str) -> str:
        result = self.duetime("token", "--tenant", tenant)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def duetime(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`duetime ARGS` in the stack's directory (its state dir), run to its end."""
        return subprocess.run(
            [sys.executable, "-m", "duetime.cli", *args],
            cwd=self.cwd,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def request(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def interrupt(self) -> int:
        """Ctrl-C; the exit status (it must stop within 20 s)."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=20)


@dataclass
class Webhook:
    """A receiver on loopback recording when each delivery arrived, with its headers."""

    url: str = ""
    deliveries: list[tuple[float, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # While set, each answer waits until `answer` is set (a target that takes its time).
    slow: bool = False
    answer: threading.Event = field(default_factory=threading.Event)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DUETIME_"))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalProcess]:
    port = _free_port()
    output = tmp_path / "output.txt"
    with output.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "duetime.cli",
                "local",
                "--port",
                str(port),
                "--tick-seconds",
                "2",
            ],
            cwd=tmp_path,  # its .duetime state (key, log) goes here
            env=_clean_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    stack = LocalProcess(process, f"http://127.0.0.1:{port}", tmp_path, output)
    try:

        def healthy() -> bool:
            assert process.poll() is None, stack.log()
            try:
                return stack.request("GET", "/health")[0] == 200
            except OSError:
                return False

        wait_for(healthy, seconds=30)
        yield stack
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            arrived = time.time()
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with hook.lock:
                hook.deliveries.append((arrived, {k.lower(): v for k, v in self.headers.items()}))
            if hook.slow:
                hook.answer.wait(120)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield hook
    finally:
        hook.answer.set()
        server.shutdown()
        thread.join()
        server.server_close()


def test_given_the_local_stack_then_it_guards_the_api_with_jwt_and_stops_cleanly_on_ctrl_c(
    local: LocalProcess,
) -> None:
    status, body = local.request("GET", "/jobs")
    assert status == 401
    assert body["error"]["code"] == "unauthorized"

    status, body = local.request("GET", "/jobs", token=local.token("tenant-a"))
    if API_HANDLER.exists():
        assert status == 200, body

    assert local.interrupt() == 0, local.log()
    output = local.output.read_text()
    assert "duetime local: stopped" in output
    assert "did not finish" not in output
    assert "Traceback" not in output


@pytest.mark.skipif(not API_HANDLER.exists(), reason="the API handler is not written yet")
def test_given_a_delay_job_with_a_webhook_then_it_is_delivered_once_on_time(
    local: LocalProcess, webhook: Webhook
) -> None:
    token = local.token("tenant-a")

    status, job = local.request(
        "POST",
        "/jobs",
        {"schedule": {"delay_seconds": 2}, "target": {"type": "http", "url": webhook.url}},
        token,
    )

    assert status == 201, job
    wait_for(lambda: len(webhook.deliveries) >= 1, seconds=15)
    time.sleep(2)  # any duplicate would arrive by now
    assert len(webhook.deliveries) == 1, webhook.deliveries
    arrived, headers = webhook.deliveries[0]
    assert headers["duetime-job-id"] == job["id"]
    scheduled = datetime.fromisoformat(headers["duetime-scheduled-for"]).timestamp()
    lateness = arrived - scheduled
    # Within a second is the bench's to measure (docs/performance.md); here the whole stack
    # shares a 2-core CI machine with the rest of the suite, where the same path has been
    # 1.03-1.18 s late (tests/e2e/test_api_e2e.py, LATENESS_ALLOWED_MS): later than 2 s is a fault.
    assert -0.05 <= lateness <= 2.0, lateness
    assert local.interrupt() == 0, local.log()


def test_given_a_run_in_flight_then_a_stop_exits_without_waiting_for_its_target(
    local: LocalProcess, webhook: Webhook
) -> None:
    # It printed "stopped" and then lived on until the target returned (up to a job's
    # timeout: the interpreter's exit joins the worker pools' threads); found by an audit.
    webhook.slow = True
    token = local.token("tenant-a")
    body = {
        "schedule": {"delay_seconds": 0},
        "timeout_seconds": 120,
        "target": {"type": "http", "url": webhook.url},
    }
    status, job = local.request("POST", "/jobs", body, token)
    assert status == 201, job
    wait_for(lambda: len(webhook.deliveries) == 1, seconds=15)

    # The stop gives the worker 15 s, then leaves: far within the target's 120 s
    local.process.send_signal(signal.SIGINT)
    assert local.process.wait(timeout=45) == 0, local.log()
    output = local.output.read_text()
    assert "stopped" in output
    # It says so: a new user saw ~18 s of silence after "stopping...".
    assert "waiting up to 15 s for runs in flight (Ctrl-C again to leave now)" in output
    assert "1 worker did not finish within 15 s (lambda-normal-" in output
    assert "abandoned" in output


def _children(pid: int) -> list[tuple[int, str]]:
    """The processes whose parent is `pid`, with their command lines (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                found.append((int(entry.name), command))
    return found


def test_given_the_emulator_dies_then_the_stack_says_so_and_stops(local: LocalProcess) -> None:
    # Nothing watched the moto process: /health said ok, every other call was a 500, and the
    # terminal said nothing (found by an outside audit).
    wait_for(lambda: "Ctrl-C stops" in local.output.read_text(), seconds=30)  # started
    (moto,) = [pid for pid, command in _children(local.process.pid) if "moto_process" in command]
    os.kill(moto, signal.SIGKILL)

    assert local.process.wait(timeout=45) == 1, local.log()
    assert "the moto server exited" in local.output.read_text()


def test_given_a_stack_running_then_a_second_on_its_state_dir_is_refused(
    local: LocalProcess,
) -> None:
    # The second rewrote the first's log and took over its local.json, which its stop then
    # removed: `duetime dlq` said no stack ran while the first did (found by an outside audit).
    wait_for(lambda: "Ctrl-C stops" in local.output.read_text(), seconds=30)  # started
    endpoint = (local.cwd / ".duetime" / "local.json").read_text()
    second = local.duetime("local", "--port", str(_free_port()))

    assert second.returncode == 2, second.stderr
    assert "another duetime local uses .duetime" in second.stderr
    assert (local.cwd / ".duetime" / "local.json").read_text() == endpoint
    assert local.request("GET", "/health")[0] == 200


def test_health_answers_only_once_the_workers_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by an outside audit: the gateway served before the pollers, the Fargate worker and
    # the stream poller had started, so a script waiting on /health submitted before them.
    import io

    from duetime.local.stack import LocalOptions, LocalStack

    seen: list[str] = []
    start_fargate = LocalStack._start_fargate_worker

    def then_ask_for_health(stack: LocalStack, parts: Any) -> None:
        start_fargate(stack, parts)
        try:  # (bound, so a request waits in the backlog until the gateway serves)
            with urllib.request.urlopen(stack.api_url + "/health", timeout=0.5):
                seen.append("served")
        except OSError:
            seen.append("not yet")

    monkeypatch.setattr(LocalStack, "_start_fargate_worker", then_ask_for_health)
    options = LocalOptions(port=0, tick_seconds=3600, state_dir=tmp_path, figures_seconds=3600)
    with (
        LocalStack(options, log_stream=io.StringIO()) as stack,
        urllib.request.urlopen(stack.api_url + "/health", timeout=10) as reply,
    ):
        assert reply.status == 200

    assert seen == ["not yet"]
