"""A worker that cannot read a tenant's webhook secret for a few seconds (KMS `Decrypt` throttled
or silent, the jobs table's `!whsec` read throttled or silent, its 15-minute cache cold): the
platform's passing fault, not one of the target's attempts. The claim is withdrawn and the
message comes back soon; the run is delivered once the secret can be read. A fault that needs a
person (the key refuses the worker) still fails the attempts, with the reason.

Found by an outside fault audit (round nine): a burst of a few seconds spent the default three
attempts (backoff 2 s), the run ended `failed` in the DLQ ("not sent: cannot decrypt the
webhook secret: ThrottlingException"), its target never called, and its `on: failed` job ran
instead of its `on: succeeded` one. Real adapters on moto (KMS too), the worker handler over
the SQS event-source emulator."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
import time_machine
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from moto import mock_aws

from duetime import wiring
from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.runs import Run, RunStatus
from duetime.entrypoints import worker as worker_handler
from duetime.local.lambda_runtime import SqsEventSource
from duetime.resources import create_resources
from duetime.settings import Settings
from duetime.wiring import Components, build
from tests.conftest import REGION
from tests.integration.conftest import RECORDER, START


@dataclass
class Fault:
    """While `until_ms` is ahead, the worker's secret reads fail as `kind` says."""

    kind: str | None = None
    until_ms: int = 0
    calls: list[str] = field(default_factory=list)
    _params: threading.local = field(default_factory=threading.local)

    def on(self) -> bool:
        return self.kind is not None and wall_ms() < self.until_ms

    def kms(self, **_: Any) -> Any:
        if not self.on() or not self.kind or not self.kind.startswith("kms"):
            return None
        self.calls.append("Decrypt")
        if self.kind == "kms_no_answer":
            raise EndpointConnectionError(endpoint_url="https://kms.us-east-1.amazonaws.com")
        code = "AccessDeniedException" if self.kind == "kms_denied" else "ThrottlingException"
        return _error(code)

    def keep(self, params: dict[str, Any], **_: Any) -> None:
        self._params.value = dict(params)

    def table(self, **_: Any) -> Any:
        params = getattr(self._params, "value", {})
        if not self.on() or not self.kind or not self.kind.startswith("table"):
            return None
        if params.get("Key", {}).get("id", {}).get("S") != "!whsec":
            return None
        self.calls.append("GetItem")
        if self.kind == "table_no_answer":
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        return _error("ProvisionedThroughputExceededException")


def _error(code: str) -> tuple[AWSResponse, dict[str, Any]]:
    parsed = {
        "Error": {"Code": code, "Message": "injected"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }
    return AWSResponse("", 400, {}, None), parsed  # type: ignore[arg-type]


@dataclass
class World:
    settings: Settings
    sqs: Any
    api: Components
    clock: Any
    fault: Fault
    url: str
    received: list[bytes]


@pytest.fixture
def world(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    received: list[bytes] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    fault = Fault()
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        sqs = session.client("sqs")
        settings = create_resources(
            session.client("dynamodb"),
            sqs,
            kms=session.client("kms"),
            timer_shards=1,
            allow_private_targets=True,
            require_https=False,
        )
        # On the session before the clients are built (the faults start after the API's read)
        session.events.register("before-call.kms.Decrypt", fault.kms)
        session.events.register("before-parameter-build.dynamodb.GetItem", fault.keep)
        session.events.register("before-call.dynamodb.GetItem", fault.table)
        for name, value in settings.to_env().items():
            monkeypatch.setenv(name, value)
        wiring.components.cache_clear()
        RECORDER.calls.clear()
        with time_machine.travel(START, tick=False) as clock:
            api = build(settings, session, jitter=lambda: 0.5, release_sleep=clock.shift)
            worker = build(settings, session, jitter=lambda: 0.5, release_sleep=clock.shift)
            monkeypatch.setattr(worker_handler, "components", lambda: worker)
            yield World(settings, sqs, api, clock, fault, url, received)
        wiring.components.cache_clear()
    server.shutdown()
    server.server_close()


def _deliver(w: World) -> None:
    sources = [
        SqsEventSource(
            w.sqs, w.settings.queue(Runtime.LAMBDA, p).url, worker_handler.handler, wait_seconds=0
        )
        for p in Priority
    ]
    while sum(source.poll_once() for source in sources):
        pass


def _dead_letters(w: World) -> int:
    total = 0
    for priority in Priority:
        attributes = w.sqs.get_queue_attributes(
            QueueUrl=w.settings.queue(Runtime.LAMBDA, priority).dlq_url,
            AttributeNames=["ApproximateNumberOfMessages"],
        )["Attributes"]
        total += int(attributes["ApproximateNumberOfMessages"])
    return total


def _run_through(
    w: World, kind: str | None, seconds: int, overlap: str = "allow"
) -> tuple[Run, str, str]:
    """An HTTP job (3 attempts, backoff 2 s) with `after` jobs on succeeded and on failed; the
    worker's secret reads fail as `kind` says for `seconds` from its first delivery; then a
    minute of deliveries, a second apart."""
    w.api.webhook_secrets.get("acme")  # the tenant's secret exists (the API showed it)
    spec = {  # a gated job is recurring: its run here is a run-now
        "schedule": {"delay_seconds": 0} if overlap == "allow" else {"rate_seconds": 3600},
        "target": {"type": "http", "url": w.url},
        "retry": {"max_attempts": 3, "backoff_seconds": 2},
        "overlap": overlap,
    }
    job = w.api.service.create("acme", parse_job_spec(spec))
    ok, bad = (
        w.api.service.create(
            "acme",
            parse_job_spec(
                {
                    "schedule": {"after": {"job_id": job.id, "on": on}},
                    "target": {"type": "handler", "name": "test.record"},
                }
            ),
        ).id
        for on in ("succeeded", "failed")
    )
    due = job.next_due_ms if overlap == "allow" else w.api.service.run_now("acme", job.id)
    w.fault.kind, w.fault.until_ms = kind, wall_ms() + seconds * 1000
    for _ in range(60):
        _deliver(w)
        w.clock.shift(1)
    run = w.api.runs.get(job.id, due)
    assert run is not None
    return run, ok, bad


@pytest.mark.parametrize(
    "kind", ["kms_throttled", "kms_no_answer", "table_throttled", "table_no_answer"]
)
def test_a_passing_fault_reading_the_secret_spends_no_attempt(world: World, kind: str) -> None:
    run, ok, bad = _run_through(world, kind, seconds=8)

    assert world.fault.calls  # the fault was met
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    assert len(world.received) == 1
    assert (len(RECORDER.runs_of(ok)), RECORDER.runs_of(bad)) == (1, [])
    assert _dead_letters(world) == 0


@pytest.mark.parametrize("overlap", ["buffer_one", "skip"])
def test_a_gated_run_handed_back_passes_its_own_gate_later(world: World, overlap: str) -> None:
    """Its claim withdrawn, the run still holds the job's gate: its next delivery goes in."""
    run, ok, _ = _run_through(world, "table_throttled", seconds=8, overlap=overlap)

    assert (run.status, run.attempt, len(world.received)) == (RunStatus.SUCCEEDED, 1, 1)
    assert len(RECORDER.runs_of(ok)) == 1


def test_without_a_fault_the_run_is_delivered_at_once(world: World) -> None:
    run, ok, _ = _run_through(world, None, seconds=0)

    assert (run.status, run.attempt, len(world.received)) == (RunStatus.SUCCEEDED, 1, 1)
    assert len(RECORDER.runs_of(ok)) == 1


def test_a_key_that_refuses_the_worker_fails_the_attempts_with_the_reason(world: World) -> None:
    """Access denied needs a person: the run ends `failed` in the DLQ saying why (the code
    only: AWS's message can name the operator's account)."""
    run, ok, bad = _run_through(world, "kms_denied", seconds=3600)

    assert (run.status, run.attempt, world.received) == (RunStatus.FAILED, 3, [])
    assert run.error == "not sent: cannot decrypt the webhook secret: AccessDeniedException"
    assert (RECORDER.runs_of(ok), len(RECORDER.runs_of(bad))) == ([], 1)
    assert _dead_letters(world) == 1
