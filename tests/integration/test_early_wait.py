"""The early wait: how long a run's delivery waits for its due instant before it is claimed.

SQS delays count whole seconds. The sweeper holds its sends to the moment that makes a message
visible 40-150 ms before its instant (duetime.services.release); the worker waits out the rest
and records it on the run (`early_wait_ms`, and the EarlyWaitMs metric)."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.api.views import run_json
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import RELEASE_LEAD_MS, RELEASE_MARGIN_MS
from duetime.domain.runs import RunStatus
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.observability import Metric
from duetime.services import execute
from tests.integration.conftest import START, Engine

START_MS = to_ms(START)


def visible(engine: Engine) -> int:
    urls = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL)
    attrs = engine.aws.sqs.get_queue_attributes(
        QueueUrl=urls.url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"])


def test_a_swept_run_is_released_just_before_its_instant_and_records_its_short_wait(
    engine: Engine,
) -> None:
    # Given a one-off due at a whole second five minutes ahead: stored as a timer
    due = START_MS + 300_000
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}})

    # When the sweeper hands it over (at a moment that would release it 0.6 s early unheld)
    # (the clock stands at each step, and the held send moves it: a loaded machine's own
    # time does not count)
    engine.stand_at(START_MS + 235_400)
    assert engine.tick()["messages_sent"] == 1

    # Then it is not visible a quarter of a second before its instant, and is 100 ms before
    engine.stand_at(due - 250 - RELEASE_LEAD_MS)
    assert visible(engine) == 0
    engine.stand_at(due - RELEASE_MARGIN_MS)
    assert visible(engine) == 1

    # And the worker waits only what is left, which the run records
    assert engine.drain() == 1
    run = engine.parts.runs.get(job_id, due)
    assert run is not None
    assert run.early_wait_ms is not None
    assert 0 <= run.early_wait_ms <= RELEASE_MARGIN_MS
    assert run_json(run)["early_wait_ms"] == run.early_wait_ms
    assert [c.job_id for c in engine.recorder.calls] == [job_id]


def test_a_run_sent_at_submission_waits_the_fraction_of_a_second_its_delay_could_not_cover(
    engine: Engine,
) -> None:
    # Given a one-off due 10.6 s after its submission: sent at once, with DelaySeconds 10
    # (the clock stands at each step: the submission's own time, slow on a loaded machine,
    # would move the message's visibility past the moment the worker looks)
    due = START_MS + 60_000
    engine.stand_at(due - 10_600)
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}})

    # When the worker receives it as soon as it is visible (0.6 s early)
    engine.stand_at(due - 590)
    assert engine.drain() == 1

    # Then it waited for the instant, and the run says how long
    run = engine.parts.runs.get(job_id, due)
    assert run is not None
    assert run.early_wait_ms is not None
    assert 450 <= run.early_wait_ms <= 600
    assert run.lateness_ms is not None
    assert run.lateness_ms < 100


def test_a_claim_whose_write_takes_long_records_the_target_s_real_start(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start and lateness were taken before the claim's write: a write slowed 3 s (the
    # SDK's retries of a throttled put) started the target 3 s late, and the record and the
    # StartLatenessMs metric said it started on time (an outside audit of the worker).
    due = START_MS + 60_000
    engine.stand_at(due - 10_000)
    job_id = engine.submit({"schedule": {"at": rfc3339_ms(due)}})
    claim = engine.parts.runs.claim

    def slow_claim(request: Any) -> Any:
        engine.advance(3)
        return claim(request)

    monkeypatch.setattr(engine.parts.runs, "claim", slow_claim)
    lateness: list[float] = []
    monkeypatch.setattr(
        execute,
        "milliseconds",
        lambda name, value: lateness.append(value) if name == Metric.START_LATENESS else None,
    )
    engine.stand_at(due + 20)

    assert engine.drain() == 1

    run = engine.parts.runs.get(job_id, due)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert run.lateness_ms is not None
    assert run.started_ms is not None
    assert 3_020 <= run.lateness_ms <= 3_200
    assert run.started_ms == due + run.lateness_ms
    assert lateness == [run.lateness_ms]
    assert run_json(run)["lateness_ms"] == run.lateness_ms
