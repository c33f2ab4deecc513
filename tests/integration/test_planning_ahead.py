"""Planning ahead on moto: the sweeper plans a per-minute chain to the next 10-minute line, so
its timer is written once per line, and every occurrence still runs once
(duetime.domain.planning, "Planning ahead")."""

from __future__ import annotations

from duetime.clock import wall_ms
from duetime.domain.jobs import JobStatus
from duetime.domain.planning import CHAIN_GRID_MS
from duetime.domain.timers import minute_of
from duetime.domain.timeutil import MINUTE_MS
from duetime.services.dispatch import Dispatcher
from duetime.services.reconcile import Reconciler
from tests.integration.conftest import Engine
from tests.integration.test_engine import timer_items


def chain_timers(engine: Engine, job_id: str) -> list[int]:
    """The due instants of the job's timers ever written (moto never expires them)."""
    return sorted(
        int(str(i["sk"]["S"]).split("#")[0])  # type: ignore[index]
        for i in timer_items(engine)
        if job_id in str(i["sk"]["S"])  # type: ignore[index]
    )


def test_given_a_per_minute_cron_then_its_timer_is_written_once_per_ten_minutes(
    engine: Engine,
) -> None:
    job_id = engine.submit({"schedule": {"cron": "* * * * *"}})
    start = wall_ms()
    engine.run_minutes(25)

    runs = engine.recorder.runs_of(job_id)
    assert len(runs) == len(set(runs))  # none twice
    first, last = min(runs), max(runs)
    assert runs == sorted(runs)
    assert sorted(runs) == list(range(first, last + 1, MINUTE_MS))  # none missed
    assert len(runs) >= 23
    timers = chain_timers(engine, job_id)
    # The submission's timer, then one per line: not one per minute.
    assert len(timers) <= 4
    assert all(t % CHAIN_GRID_MS == 0 for t in timers[1:])
    assert timers[-1] > wall_ms()  # the chain goes on
    assert start < timers[1] <= start + 20 * MINUTE_MS


def test_given_a_chain_planned_ahead_when_cancelled_then_none_of_its_sent_runs_start(
    engine: Engine,
) -> None:
    job_id = engine.submit({"schedule": {"cron": "* * * * *"}})
    engine.run_minutes(3)
    ran = len(engine.recorder.runs_of(job_id))
    # Runs up to the next line are already in SQS, delayed.
    assert engine.queue_messages(*_queue(engine, job_id)) >= 3

    engine.parts.service.cancel("tenant-a", job_id)
    cancelled_at = wall_ms()
    engine.run_minutes(12)

    assert all(s <= cancelled_at for s in engine.recorder.runs_of(job_id))
    assert len(engine.recorder.runs_of(job_id)) == ran
    assert engine.queue_messages(*_queue(engine, job_id)) == 0  # drained, and dropped


def test_given_a_chain_planned_ahead_then_the_reconciler_finds_its_timer(engine: Engine) -> None:
    job_id = engine.submit({"schedule": {"cron": "* * * * *"}})
    engine.run_minutes(12)  # older than the reconciler's settle time
    timers_before = chain_timers(engine, job_id)
    # Its timer waits on a line beyond the minutes the reconciler looks at one by one.
    beyond = minute_of(wall_ms()) + engine.aws.settings.lookahead_minutes + 3
    assert timers_before[-1] > beyond * MINUTE_MS
    parts = engine.parts
    reconciler = Reconciler(
        parts.jobs,
        parts.timers,
        parts.runs,
        Dispatcher(parts.jobs, parts.timers, parts.queue, engine.aws.settings, clock=wall_ms),
        engine.aws.settings,
        clock=wall_ms,
    )

    job = parts.jobs.get("tenant-a", job_id)
    assert job is not None
    # The pending timer is one of the keys it looks for (an earlier line's, swept, may be
    # older than its lookback).
    assert timers_before[-1] in [t.due_ms for t in reconciler.candidates(job, wall_ms())]

    report = reconciler.reconcile()

    assert report.recurring == 1
    assert report.rearmed == 0
    assert chain_timers(engine, job_id) == timers_before
    assert job.status == JobStatus.SCHEDULED


def _queue(engine: Engine, job_id: str):  # type: ignore[no-untyped-def]
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    return job.spec.runtime, job.spec.priority
