"""Staged runs (`stage_seconds`): a job's run message becomes visible that long before the
second its instant is in, on the fast path and through a timer; the worker that holds it reads
the job and claims the run then, and starts the target on the instant
(duetime.services.execute). And a lambda-runtime job with the longest timeout the runtime
allows still starts after waiting for its instant."""

from __future__ import annotations

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import RECORDING_MARGIN_SECONDS, Priority, Runtime
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import Delivery
from duetime.services.execute import PRE_START_ALLOWANCE_MS
from duetime.services.results import Disposition
from tests.integration.conftest import Engine
from tests.integration.test_acknowledged_before_claim import worker
from tests.integration.test_api import Api, api

__all__ = ["api"]  # the fixture, shared with test_api

TENANT = "tenant-a"


def visible(engine: Engine) -> list[Delivery]:
    return engine.parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 10, 0, 60)


def whole_second_ahead(engine: Engine) -> int:
    """The clock standing on the next whole second: submissions take no time."""
    now = wall_ms() // 1000 * 1000 + 1000
    engine.stand_at(now)
    return now


@pytest.mark.parametrize("value", [-1, 11, "5", True, 1.5, None])
def test_a_bad_stage_is_a_400_naming_it(api: Api, value: object) -> None:
    reply = api.call(
        "POST",
        "/jobs",
        {
            "schedule": {"rate_seconds": 60},
            "stage_seconds": value,
            "target": {"type": "handler", "name": "test.record"},
        },
    )
    assert reply.status == 400
    assert reply.error["field"] == "stage_seconds"
    assert api.job_items() == []


def test_the_job_shows_its_stage_none_by_default_and_a_patch_changes_it(api: Api) -> None:
    plain = api.create({"schedule": {"rate_seconds": 60}})
    staged = api.create({"schedule": {"rate_seconds": 60}, "stage_seconds": 10})
    assert (plain["stage_seconds"], staged["stage_seconds"]) == (0, 10)

    patched = api.call("PATCH", f"/jobs/{plain['id']}", {"stage_seconds": 3})

    assert patched.status == 200, patched.json
    assert api.call("GET", f"/jobs/{plain['id']}").json["stage_seconds"] == 3


def test_a_staged_fast_path_run_is_visible_its_stage_before_its_instant(engine: Engine) -> None:
    now = whole_second_ahead(engine)
    due = now + 20_500
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}, "stage_seconds": 5})

    # Sent with a delay of 15 s: visible 5.5 s before the instant (unstaged: 0.5 s before it)
    engine.stand_at(due - 5_600)
    assert visible(engine) == []
    engine.stand_at(due - 5_500)
    [delivery] = visible(engine)
    message = engine.parts.auth.open(delivery.body)
    assert (message.job_id, message.due_ms, message.stage_ms) == (job_id, due, 5_000)


def test_a_staged_worker_claims_before_the_instant_and_starts_the_target_on_it(
    engine: Engine,
) -> None:
    now = whole_second_ahead(engine)
    due = now + 20_500
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}, "stage_seconds": 5})
    engine.stand_at(due - 5_500)
    [delivery] = visible(engine)

    # When the worker holds it: each wait notes whether the run was claimed yet
    claimed: list[bool] = []

    def wait(seconds: float) -> None:
        claimed.append(engine.parts.runs.get(job_id, due) is not None)
        engine.advance(seconds)

    result = worker(engine, wait).handle(delivery)

    # Then: a wait to the stage's start (its claim lead is 1 s, the stage 5 s), the claim,
    # a wait to the instant, the target on it
    assert claimed == [False, True]
    assert result.detail == "succeeded"
    assert engine.recorder.runs_of(job_id) == [due]
    run = engine.parts.runs.get(job_id, due)
    assert run is not None
    assert run.attempts[0].started_ms == due
    assert (run.lateness_ms, run.early_wait_ms) == (0, 5_500)


def test_a_staged_one_off_through_a_timer_is_released_its_stage_early(engine: Engine) -> None:
    now = whole_second_ahead(engine)
    due = now + 600_000  # beyond the sweep's horizon: a timer
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}, "stage_seconds": 3})
    items = engine.aws.dynamodb.scan(TableName=engine.aws.settings.timers_table)["Items"]
    [timer] = [i for i in items if job_id in i["sk"]["S"]]
    assert timer["stg"] == {"N": "3000"}

    for ahead in (130_000, 70_000, 10_000):  # sweeps up to the one that hands its minute over
        engine.stand_at(due - ahead)
        engine.tick()

    # Visible 3 s before its instant (unstaged: at most 1 s before it); the clock stood
    # while the sweep held the send, so it was sent when due in exactly 7 s
    engine.stand_at(due - 4_001)
    assert visible(engine) == []
    engine.stand_at(due - 2_999)
    [delivery] = visible(engine)
    assert engine.parts.auth.open(delivery.body).job_id == job_id


@pytest.mark.parametrize(("left_ms", "runs"), [(None, True), (-1, False)])
def test_a_job_with_the_longest_lambda_timeout_starts_after_waiting_for_its_instant(
    engine: Engine, left_ms: int | None, runs: bool
) -> None:
    settings = engine.parts.settings
    longest = settings.worker_timeout_seconds - RECORDING_MARGIN_SECONDS
    now = whole_second_ahead(engine)
    due = now + 20_500
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}, "timeout_seconds": longest})
    engine.stand_at(due - 500)
    [delivery] = visible(engine)
    start = wall_ms()
    # A fresh invocation has (almost) its whole timeout; `-1`: 1 ms less than the run needs
    # once it has waited for the instant (its timeout and the margin's share to record it).
    whole = settings.worker_timeout_seconds * 1000 - 100
    needed = (longest + RECORDING_MARGIN_SECONDS) * 1000 - PRE_START_ALLOWANCE_MS + 500
    budget = whole if left_ms is None else needed + left_ms

    def remaining() -> int:
        return budget - (wall_ms() - start)

    result = worker(engine, engine.advance).handle(delivery, remaining_ms=remaining)

    if runs:
        assert result.detail == "succeeded"
        assert engine.recorder.runs_of(job_id) == [due]
    else:
        assert result.disposition == Disposition.RETRY_LATER
        assert result.detail == "not enough time left in this invocation"
        assert engine.recorder.runs_of(job_id) == []
        engine.advance(0.001)  # (moto: visible once the clock has moved past the change)
        assert [d.message_id for d in visible(engine)] == [delivery.message_id]
