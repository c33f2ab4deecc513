"""A cancel, pause or reschedule acknowledged before an occurrence is claimed means that
occurrence never starts, even when its message was already handed over and is in a worker's
hands, waiting for its instant (the early wait). The worker reads the job after that wait,
right before the claim (duetime.services.execute): no saving of calls per run may move this
check before the wait."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.services.execute import Disposition, RunExecutor
from duetime.targets import TargetExecutor
from tests.integration.conftest import Engine

TENANT = "tenant-a"

CHANGES: dict[str, Callable[[Engine, str], object]] = {
    "cancel": lambda engine, job_id: engine.parts.service.cancel(TENANT, job_id),
    "pause": lambda engine, job_id: engine.parts.service.pause(TENANT, job_id),
    "reschedule": lambda engine, job_id: engine.parts.service.update(
        TENANT, job_id, {"schedule": {"rate_seconds": 3600}}
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_acknowledged_while_the_message_waits_for_its_instant_stops_the_run(
    engine: Engine, change: str
) -> None:
    # Given a recurring job whose next occurrence was handed over to SQS and received
    job_id = engine.submit({"schedule": {"rate_seconds": 60}})
    job = engine.parts.jobs.get(TENANT, job_id)
    assert job is not None
    assert job.next_due_ms is not None
    engine.advance_to(job.next_due_ms - 500)
    (delivery,) = engine.parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0, 60)
    scheduled_ms = engine.parts.auth.open(delivery.body).scheduled_ms

    # When the owner's change is acknowledged while the worker waits for the instant
    acknowledged: list[object] = []

    def wait(seconds: float) -> None:
        acknowledged.append(CHANGES[change](engine, job_id))
        engine.advance(seconds)

    parts = engine.parts
    worker = RunExecutor(
        parts.jobs,
        parts.runs,
        parts.queue,
        TargetExecutor(allow_private=True),
        parts.settings,
        clock=wall_ms,
        auth=parts.auth,
        sleep=wait,
    )
    result = worker.handle(delivery)

    # Then the occurrence never starts: no target call, no run record, the message is done
    assert acknowledged, "the worker did not wait for the instant"
    assert result.disposition == Disposition.DONE
    assert result.detail.startswith("dropped"), result.detail
    assert engine.recorder.calls == []
    assert parts.runs.get(job_id, scheduled_ms) is None
