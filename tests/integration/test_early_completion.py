"""A recurring job whose remaining occurrences are all handed over (its end_at within the
dispatch horizon) is `completed` at once; until its last run is due it can still be cancelled,
and its item outlives its runs (found by an outside audit: the cancel was a 409, and with a
short hot window the job expired before its later occurrences ran)."""

from __future__ import annotations

import pytest

from duetime.domain.errors import IllegalTransition
from duetime.domain.jobs import JobStatus, parse_job_spec
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_dependencies import T0, TENANT, Engine


def ending(engine: Engine, seconds: int, jitter: int = 0) -> str:
    """A job every 10 s from T0 + 10 s to T0 + `seconds`: all of it within the horizon."""
    body = {
        "schedule": {
            "rate_seconds": 10,
            "start_at": rfc3339_ms(T0 + 10_000),
            "end_at": rfc3339_ms(T0 + seconds * 1000),
        },
        "target": {"type": "http", "url": "https://example.com/hook"},
        "jitter_seconds": jitter,
    }
    return engine.service.create(TENANT, parse_job_spec(body)).id


def test_given_a_job_completed_early_when_cancelled_then_its_runs_to_come_never_start() -> None:
    engine = Engine()
    job = ending(engine, 40)
    assert engine.service.get(TENANT, job).status == JobStatus.COMPLETED  # all handed over
    assert engine.jobs.recurring_count(TENANT) == 0

    engine.now += 15_000  # the first occurrence runs
    engine.work()
    view = engine.service.cancel(TENANT, job)

    assert view.status == JobStatus.CANCELLED
    engine.now += 60_000
    engine.work()
    assert [i.scheduled_ms for i in engine.runs_of(job)] == [T0 + 10_000]
    assert engine.jobs.recurring_count(TENANT) == 0  # counted once, released once


def test_given_a_job_completed_early_its_item_outlives_its_last_run() -> None:
    engine = Engine()
    job = ending(engine, 40, jitter=5)
    stored = engine.jobs.get(TENANT, job)
    assert stored is not None
    assert stored.expires_at is not None
    assert stored.expires_at >= (T0 + 45_000) // 1000 + engine.settings.run_ttl_seconds


def test_given_a_job_whose_last_run_is_due_then_a_cancel_is_still_a_conflict() -> None:
    engine = Engine()
    job = ending(engine, 40)
    engine.now += 41_000
    engine.work()
    with pytest.raises(IllegalTransition):
        engine.service.cancel(TENANT, job)
    with pytest.raises(IllegalTransition):  # a pause neither: nothing of it is left to hold
        engine.service.pause(TENANT, job)
    assert len(engine.runs_of(job)) == 4
