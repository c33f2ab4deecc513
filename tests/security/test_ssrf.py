"""SSRF at delivery time: what the HTTP target connects to, not only what the guard says.

The range-by-range refusals are in tests/unit/test_address_guard.py. Here: the connection goes
to the address that was checked, with no second name resolution (DNS rebinding), over http
and https; redirects are refused even towards the metadata service; and a deployment that
keeps duetime's defaults (https only, guard on) refuses plain http and private addresses for
good, end to end through the worker. No packet leaves the machine: every dial is recorded and
refused, or goes to a server on loopback.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import RunStatus
from duetime.domain.targets import HttpTarget
from duetime.entrypoints import worker as worker_handler
from duetime.settings import Env, Settings, queue_key
from duetime.targets import Invocation, TargetError, TargetExecutor, address_guard
from duetime.wiring import build
from tests.integration.conftest import Engine

PUBLIC = "93.184.216.34"
PUBLIC_2 = "2606:4700::1111"
METADATA = "169.254.169.254"


def invocation() -> Invocation:
    return Invocation(
        tenant="acme",
        job_id="01JOB",
        run_id="01JOB-1700000000000",
        scheduled_ms=1_700_000_000_000,
        attempt=1,
        payload={"n": 1},
        timeout_seconds=2.0,
    )


class ScriptedDns:
    """An attacker's DNS server: one scripted answer per query, the last one repeated."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.queries: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.queries.append((host, port))
        return self.answers[min(len(self.queries), len(self.answers)) - 1]


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every TCP connection attempted, each refused: nothing leaves the machine."""
    attempts: list[tuple[str, int]] = []

    def refuse(address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        attempts.append(address)
        raise ConnectionRefusedError("refused by the test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


@pytest.mark.parametrize(("scheme", "port"), [("http", 80), ("https", 443)])
@pytest.mark.parametrize("rebound_to", ["127.0.0.1", METADATA, "10.0.0.1", "::1", "fd00::1"])
def test_given_dns_answering_public_then_private_when_delivered_then_only_public_is_dialled(
    monkeypatch: pytest.MonkeyPatch,
    dialled: list[tuple[str, int]],
    scheme: str,
    port: int,
    rebound_to: str,
) -> None:
    # Given a name whose first answer is public and every later one private
    dns = ScriptedDns([PUBLIC], [rebound_to])
    monkeypatch.setattr(address_guard, "resolve_host", dns)

    # When an attempt is made (the guard on, as deployed)
    with pytest.raises(TargetError) as caught:
        TargetExecutor().execute(HttpTarget(url=f"{scheme}://rebind.example/hook"), invocation())

    # Then the name was resolved once and only the checked address was dialled
    assert dns.queries == [("rebind.example", port)]
    assert dialled == [(PUBLIC, port)]
    assert caught.value.retryable  # refused by the (test) network: transient


def test_given_several_checked_answers_when_none_connects_then_each_is_tried_without_asking_dns(
    monkeypatch: pytest.MonkeyPatch, dialled: list[tuple[str, int]]
) -> None:
    dns = ScriptedDns([PUBLIC, PUBLIC_2], [METADATA])
    monkeypatch.setattr(address_guard, "resolve_host", dns)

    with pytest.raises(TargetError):
        TargetExecutor().execute(HttpTarget(url="https://two.example/"), invocation())

    assert dns.queries == [("two.example", 443)]
    assert dialled == [(PUBLIC, 443), (PUBLIC_2, 443)]


@pytest.mark.parametrize("bad", [METADATA, "169.254.170.2", "10.0.0.1", "::ffff:127.0.0.1"])
def test_given_one_private_answer_among_public_ones_when_delivered_then_nothing_is_dialled(
    monkeypatch: pytest.MonkeyPatch, dialled: list[tuple[str, int]], bad: str
) -> None:
    monkeypatch.setattr(address_guard, "resolve_host", ScriptedDns([PUBLIC, bad, PUBLIC_2]))

    with pytest.raises(TargetError, match="refused") as caught:
        TargetExecutor().execute(HttpTarget(url="https://mixed.example/"), invocation())

    assert not caught.value.retryable
    assert dialled == []


# --- redirects -------------------------------------------------------------------------------


class Redirector(http.server.BaseHTTPRequestHandler):
    """Answers every request with a redirect to the instance metadata service."""

    seen: list[str]

    def _redirect(self) -> None:
        self.seen.append(self.path)
        self.send_response(int(self.path.strip("/")))
        self.send_header("Location", f"http://{METADATA}/latest/meta-data/iam/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _redirect

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def redirector() -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("Handler", (Redirector,), {"seen": seen})
    )
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_given_a_redirect_to_the_metadata_service_then_it_is_refused_and_never_followed(
    monkeypatch: pytest.MonkeyPatch,
    redirector: tuple[int, list[str]],
    status: int,
    method: str,
) -> None:
    # Given a target on loopback (local mode lets it through the guard) redirecting to
    # 169.254.169.254, and a network that records every connection
    port, seen = redirector
    monkeypatch.setattr(address_guard, "resolve_host", ScriptedDns(["127.0.0.1"]))
    real = socket.create_connection
    dials: list[tuple[str, int]] = []

    def recording(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        dials.append(address)
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)

    # When
    with pytest.raises(TargetError, match="redirects are not followed") as caught:
        TargetExecutor(allow_private=True).execute(
            HttpTarget(url=f"http://hooks.example:{port}/{status}", method=method), invocation()
        )

    # Then the failure is final, and the only connection was the one to the checked address
    assert not caught.value.retryable
    assert METADATA in str(caught.value)  # the error says where it wanted to go
    assert seen == [f"/{status}"]
    assert dials == [("127.0.0.1", port)]


# --- https only, and the guard on, outside local mode ------------------------------------------


def test_given_no_setting_then_a_deployment_requires_https_and_refuses_private_targets() -> None:
    queues = {queue_key(r, p): {"url": "u", "dlq_url": "d"} for r in Runtime for p in Priority}
    env = {
        Env.JOBS_TABLE: "jobs",
        Env.TIMERS_TABLE: "timers",
        Env.RUNS_TABLE: "runs",
        Env.QUEUES: json.dumps(queues),
    }

    settings = Settings.from_env(env)

    assert settings.require_https is True
    assert settings.allow_private_targets is False


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/plain", "only https"),
        ("https://127.0.0.1:9/loopback", "loopback"),
        (f"https://{METADATA}/latest/meta-data/", "link-local"),
        ("https://[::ffff:10.0.0.1]/mapped", "private"),
    ],
)
def test_given_deployed_settings_when_a_job_targets_http_or_private_then_the_run_fails_for_good(
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    dialled: list[tuple[str, int]],
    url: str,
    reason: str,
) -> None:
    # Given the worker of a deployment with duetime's defaults (the tests' engine runs as the
    # local stack does: private targets allowed, plain http allowed)
    deployed = dataclasses.replace(
        engine.aws.settings, require_https=True, allow_private_targets=False
    )
    parts = build(deployed, engine.aws.session, jitter=lambda: 0.5)
    monkeypatch.setattr(worker_handler, "components", lambda: parts)

    # When a job with such a target comes due, with retries to spare
    job_id = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "http", "url": url},
            "retry": {"max_attempts": 5},
        }
    )
    engine.drain()

    # Then its one attempt failed without a retry, saying why, and nothing was dialled
    (run,) = parts.runs.list(job_id, 10, None).items
    assert run.status == RunStatus.FAILED
    assert run.attempt == 1
    assert run.error is not None
    assert reason in run.error
    assert dialled == []
