"""End-to-end fixtures: `duetime local` in a subprocess (once per session), real HTTP, and a
webhook receiver on loopback that records every delivery."""

from __future__ import annotations

import contextlib
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes
    received: float  # epoch seconds

    @property
    def lateness_ms(self) -> float:
        due = datetime.fromisoformat(self.headers["duetime-scheduled-for"].replace("Z", "+00:00"))
        return (self.received - due.timestamp()) * 1000


@dataclass
class Webhook:
    """Records deliveries; `/flaky/<n>/<name>` answers 500 to its first n requests."""

    url: str
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def to(self, path: str) -> list[Delivery]:
        with self.lock:
            return [d for d in self.deliveries if d.path == path]


@pytest.fixture(scope="session")
def webhook() -> Iterator[Webhook]:
    hook = Webhook(url="")
    attempts: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received = time.time()
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            with hook.lock:
                hook.deliveries.append(
                    Delivery(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body, received
                    )
                )
                attempts[self.path] = attempts.get(self.path, 0) + 1
                seen = attempts[self.path]
            parts = self.path.strip("/").split("/")
            failing = parts[0] == "flaky" and seen <= int(parts[1])
            self.send_response(500 if failing else 200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield hook
    server.shutdown()


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Stack:
    url: str
    state_dir: Path
    process: subprocess.Popen[str]
    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, tenant: str) -> str:
        if tenant not in self.tokens:
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "duetime.cli",
                    "token",
                    "--tenant",
                    tenant,
                    "--state-dir",
                    str(self.state_dir),
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            self.tokens[tenant] = out.stdout.strip().splitlines()[-1]
        return self.tokens[tenant]

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        tenant: str | None = "tenant-a",
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Response:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if tenant is not None:
            request.add_header("authorization", f"Bearer {self.token(tenant)}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                payload = reply.read()
                status, reply_headers = reply.status, dict(reply.headers)
        except urllib.error.HTTPError as error:
            payload = error.read()
            status, reply_headers = error.code, dict(error.headers)
        return Response(status, reply_headers, json.loads(payload) if payload else None)


@contextlib.contextmanager
def local_stack(state: Path, *options: str, port: int | None = None) -> Iterator[Stack]:
    """`duetime local` in a subprocess on `port` (default: a free one) with `options`, state
    under `state`; stopped (Ctrl-C) and checked to exit cleanly on leaving."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DUETIME_"))}
    log = (state / "local.log").open("w")  # a file, not a pipe: a full pipe would block it
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "duetime.cli",
            "local",
            "--port",
            str(port),
            "--tick-seconds",
            "5",
            "--state-dir",
            str(state),
            *options,
        ],
        cwd=state,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as reply:
                return bool(reply.status == 200)
        except OSError:
            return process.poll() is not None  # stop waiting if it died

    try:
        wait_for(healthy, 60)
        assert process.poll() is None, (state / "local.log").read_text()
        yield Stack(url, state, process)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0, (state / "local.log").read_text()[-3000:]
    finally:
        process.kill()
        log.close()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # AWS targets scoped by tenant, as an operator sharing a deployment would run it.
    state = tmp_path_factory.mktemp("duetime-local")
    with local_stack(state, "--tenant-target-names", "{tenant}-*") as started:
        yield started
