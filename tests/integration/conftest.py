"""An engine on moto driven like AWS drives it: the real sweeper and worker handlers, a
clock we move with time-machine (moto's SQS delays and visibility timeouts follow it), and
the SQS event-source emulator invoking the worker with Lambda-shaped batches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine

from duetime import wiring
from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.entrypoints import sweeper as sweeper_handler
from duetime.entrypoints import worker as worker_handler
from duetime.local.lambda_runtime import FakeContext, SqsEventSource
from duetime.targets import DEFAULT_HANDLERS, Invocation
from duetime.wiring import Components, build
from tests.conftest import Aws

START = datetime(2026, 11, 21, 10, 0, 5, tzinfo=UTC)


@dataclass
class Recorder:
    """A handler target that records every execution: what the 'outside world' saw."""

    calls: list[Invocation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, invocation: Invocation) -> None:
        with self.lock:
            self.calls.append(invocation)

    def runs_of(self, job_id: str) -> list[int]:
        return [c.scheduled_ms for c in self.calls if c.job_id == job_id]


RECORDER = Recorder()
DEFAULT_HANDLERS.register("test.record", RECORDER)


@dataclass
class Engine:
    aws: Aws
    parts: Components
    clock: Any  # time_machine.Traveller
    recorder: Recorder

    def submit(self, body: dict[str, Any], tenant: str = "tenant-a") -> str:
        body.setdefault("target", {"type": "handler", "name": "test.record"})
        return self.parts.service.create(tenant, parse_job_spec(body)).id

    def tick(self) -> dict[str, Any]:
        """What the EventBridge rate(1 minute) rule and the coordinator do: one sweeper
        invocation per shard (here one after another). Their figures, added up."""
        reports = [
            sweeper_handler.handler({"shard": shard}, FakeContext())
            for shard in range(self.parts.timers.shard_count())
        ]
        total: dict[str, Any] = {
            key: sum(r[key] for r in reports)
            for key in ("messages_sent", "timers_read", "partitions")
        }
        total["backlog_minutes"] = max(r["backlog_minutes"] for r in reports)
        return total

    def run_minutes(self, minutes: int) -> None:
        """Let the system run: each minute the sweeper ticks and the workers drain the queues."""
        for _ in range(minutes):
            self.tick()
            self.advance(60)
            self.drain()

    def advance(self, seconds: float) -> None:
        self.clock.shift(seconds)

    def advance_to(self, instant_ms: int) -> None:
        self.clock.shift((instant_ms - wall_ms()) / 1000)

    def stand_at(self, instant_ms: int) -> None:
        """The clock at `instant_ms`, standing for the rest of the test: advance and advance_to
        move it, and it stands again where they leave it. A step's own time, slow on a loaded
        machine, does not count."""
        self.clock.move_to(datetime.fromtimestamp(instant_ms / 1000, UTC), tick=False)

    def drain(self, runtime: Runtime = Runtime.LAMBDA) -> int:
        """What the SQS event source mappings do, until no queue has a visible message."""
        delivered = 0
        sources = [
            SqsEventSource(
                self.aws.sqs,
                self.aws.settings.queue(runtime, p).url,
                worker_handler.handler,
                wait_seconds=0,
            )
            for p in Priority
        ]
        while True:
            batch = sum(source.poll_once() for source in sources)
            if batch == 0:
                return delivered
            delivered += batch

    def queue_messages(self, runtime: Runtime, priority: Priority, dead: bool = False) -> int:
        urls = self.aws.settings.queue(runtime, priority)
        attrs = self.aws.sqs.get_queue_attributes(
            QueueUrl=urls.dlq_url if dead else urls.url, AttributeNames=["All"]
        )["Attributes"]
        return sum(
            int(attrs[a])
            for a in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesDelayed",
                "ApproximateNumberOfMessagesNotVisible",
            )
        )


@pytest.fixture
def engine(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    for name, value in aws.settings.to_env().items():
        monkeypatch.setenv(name, value)
    wiring.components.cache_clear()
    RECORDER.calls.clear()
    with time_machine.travel(START, tick=True) as traveller:
        # Backoff jitter fixed at half the ceiling, so retry timing is deterministic.
        # The sweeper's held sends (duetime.services.release) move the clock, not wait.
        parts = build(aws.settings, aws.session, jitter=lambda: 0.5, release_sleep=traveller.shift)
        # The handlers' composition root returns these same components.
        monkeypatch.setattr(sweeper_handler, "components", lambda: parts)
        monkeypatch.setattr(worker_handler, "components", lambda: parts)
        yield Engine(aws, parts, traveller, RECORDER)
    wiring.components.cache_clear()
