"""Nothing secret in logs: a job's HTTP target credentials never reach the functions' logs.

A job whose HTTP target carries an `Authorization` header is submitted through the API
handler, run by the worker handler (a success, then a refused attempt, then a retried one),
and read back, all in process with the Powertools logger at DEBUG writing to stdout; the
captured output (capfd) holds the functions' log lines but never the header's value.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from duetime.entrypoints import worker as worker_handler
from duetime.observability import logger
from duetime.wiring import build
from tests.integration.test_api import Api

TOKEN = "s3cr3t-d2b1c9f0e8a7"  # the header value: must not appear in any log line
MARKER = "payload-marker-5e4d"  # in the payload: proves the deliveries happened


class Receiver(http.server.BaseHTTPRequestHandler):
    """`/ok` answers 200, `/denied` 401 and `/busy` 503, recording what arrived."""

    received: list[tuple[str, str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.received.append((self.path, self.headers.get("Authorization", ""), body))
        status = {"/ok": 200, "/denied": 401}.get(self.path, 503)
        text = b"nope" if status >= 400 else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("Handler", (Receiver,), {"received": received})
    )
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


@pytest.fixture
def verbose_logs() -> Iterator[None]:
    """The functions' logger at DEBUG, writing to file descriptor 1 (where capfd listens).

    Its handler was built at import time around whatever sys.stdout was then (under pytest, a
    capture buffer of its own), so it is pointed at the process's real stdout for the test."""
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    level = logger.log_level
    stream = handler.setStream(sys.__stdout__)
    logger.setLevel(logging.DEBUG)
    yield
    logger.setLevel(level)
    if stream is not None:
        handler.setStream(stream)


@pytest.fixture
def signing_worker(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker with a key for webhook signing secrets (a moto KMS key), when the shared
    moto account has none: without it, HTTP deliveries are not sent at all."""
    settings = api.engine.aws.settings
    if getattr(settings, "secrets_key_arn", None) != "":
        return
    kms = api.engine.aws.session.client("kms")
    arn = kms.create_key(Description="webhook secrets")["KeyMetadata"]["Arn"]
    parts = build(
        dataclasses.replace(settings, secrets_key_arn=arn),
        api.engine.aws.session,
        jitter=lambda: 0.5,
    )
    monkeypatch.setattr(worker_handler, "components", lambda: parts)


def test_given_a_target_with_an_authorization_header_then_its_value_never_reaches_the_logs(
    api: Api,
    receiver: tuple[str, list[tuple[str, str, bytes]]],
    signing_worker: None,
    verbose_logs: None,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, received = receiver
    capfd.readouterr()  # start from nothing

    # Given jobs whose target sends an Authorization header: one that succeeds, one refused
    # for good, one that fails and is retried
    ids = {}
    for path in ("/ok", "/denied", "/busy"):
        job = api.create(
            {
                "schedule": {"delay_seconds": 0},
                "target": {
                    "type": "http",
                    "url": url + path,
                    "headers": {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": TOKEN},
                },
                "payload": {"marker": MARKER},
                "retry": {"max_attempts": 2, "backoff_seconds": 0},
            }
        )
        ids[path] = job["id"]

    # When the worker runs them (the retry too) and the tenant reads them and their runs
    api.engine.drain()
    api.engine.advance(1)
    api.engine.drain()
    errors: list[str | None] = []
    for job_id in ids.values():
        assert api.call("GET", f"/jobs/{job_id}").status == 200
        runs = api.call("GET", f"/jobs/{job_id}/runs")
        assert runs.status == 200
        errors.append(runs.json["items"][0]["error"])
    # A submission refused for a bad header logs nothing of the header either
    refused = api.call(
        "POST",
        "/jobs",
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "http", "url": url, "headers": {"Host": TOKEN}},
        },
    )
    assert refused.status == 400
    logs = capfd.readouterr()

    # Then the deliveries happened, with the header, and the functions logged them...
    assert [(p, a) for p, a, _ in received if p == "/ok"] == [("/ok", f"Bearer {TOKEN}")], errors
    assert len([p for p, _, _ in received if p == "/busy"]) == 2  # retried once
    assert all(MARKER.encode() in body for _, _, body in received)
    lines = [json.loads(line) for line in logs.out.splitlines() if line.startswith('{"level"')]
    messages = {line.get("message") for line in lines}
    assert {"run succeeded", "run failed", "run failed; retrying"} <= messages, messages
    assert any(ids["/ok"] in json.dumps(line) for line in lines)
    # ...but no line, on stdout or stderr, carries the header's value
    assert TOKEN not in logs.out
    assert TOKEN not in logs.err
