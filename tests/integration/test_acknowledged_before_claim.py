"""A cancel, pause or reschedule acknowledged before an occurrence is claimed means that
occurrence never starts, even when its message was already handed over and is in a worker's
hands, waiting for its instant (the early wait). The worker reads the job right before the
claim, which it writes at most the claim lead (Settings.claim_lead_ms) before the instant
(duetime.services.execute): a change acknowledged after the claim no longer stops the
occurrence, which starts on its instant, not before."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import Delivery
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
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine)

    # When the owner's change is acknowledged while the worker waits for the instant
    acknowledged: list[object] = []

    def wait(seconds: float) -> None:
        if not acknowledged:
            acknowledged.append(CHANGES[change](engine, job_id))
        engine.advance(seconds)

    # (claiming 200 ms before its instant: the wait is before the claim)
    result = worker(engine, wait, claim_lead_ms=200).handle(delivery)

    # Then the occurrence never starts: no target call, no run record, the message is done
    assert acknowledged, "the worker did not wait before the claim"
    assert result.disposition == Disposition.DONE
    assert result.detail.startswith("dropped"), result.detail
    assert engine.recorder.calls == []
    assert engine.parts.runs.get(job_id, scheduled_ms) is None


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_acknowledged_after_the_claim_leaves_the_run_to_start_on_its_instant(
    engine: Engine, change: str
) -> None:
    # Given a received occurrence, within the claim lead of its instant
    assert engine.parts.settings.claim_lead_ms > 500
    job_id, due, delivery = received_half_a_second_early(engine)

    # When the change is acknowledged after the worker claimed, while it waits for the instant
    claimed_before: list[bool] = []

    def wait(seconds: float) -> None:
        claimed_before.append(engine.parts.runs.get(job_id, due) is not None)
        CHANGES[change](engine, job_id)
        engine.advance(seconds)

    result = worker(engine, wait).handle(delivery)

    # Then the claimed occurrence runs once, started on its instant (not up to a lead early)
    assert claimed_before == [True]
    assert result.detail == "succeeded"
    assert engine.recorder.runs_of(job_id) == [due]
    run = engine.parts.runs.get(job_id, due)
    assert run is not None
    assert run.attempts[0].started_ms == due
    assert run.lateness_ms == 0
    assert run.early_wait_ms is not None
    assert run.early_wait_ms == 500


def received_half_a_second_early(engine: Engine) -> tuple[str, int, Delivery]:
    """A rate job's next occurrence, received 500 ms before its instant (the clock standing):
    its job id, its instant and the delivery.

    The clock stands during the submission, on a whole second, and the first instant is
    60.5 s on: the message is sent with a 60 s delay and so becomes visible exactly 500 ms
    before its instant, however long the submission takes on a loaded machine."""
    sent_ms = wall_ms() // 1000 * 1000 + 1000
    engine.stand_at(sent_ms)
    first = rfc3339_ms(sent_ms + 60_500)
    job_id = engine.submit({"schedule": {"rate_seconds": 60, "start_at": first}})
    job = engine.parts.jobs.get(TENANT, job_id)
    assert job is not None
    assert job.next_due_ms == sent_ms + 60_500
    engine.stand_at(job.next_due_ms - 500)
    (delivery,) = engine.parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0, 60)
    assert engine.parts.auth.open(delivery.body).scheduled_ms == job.next_due_ms
    return job_id, job.next_due_ms, delivery


def worker(
    engine: Engine, sleep: Callable[[float], None], claim_lead_ms: int | None = None
) -> RunExecutor:
    parts = engine.parts
    settings = parts.settings
    if claim_lead_ms is not None:
        settings = replace(settings, claim_lead_ms=claim_lead_ms)
    return RunExecutor(
        parts.jobs,
        parts.runs,
        parts.queue,
        TargetExecutor(allow_private=True),
        settings,
        clock=wall_ms,
        auth=parts.auth,
        sleep=sleep,
    )
