"""A one-off job's item outlives its run's attempts (duetime.domain.planning.hot_until): a
short hot window (`duetime local --hot-ttl-seconds 5`) expired the job under its retries. Its
run's record leaves a hot window after the run, for the archive within seconds: the reconciler
must not take the job, then without it, for one that never ran (found by a review the same
day: it sent the run again)."""

from __future__ import annotations

from duetime.domain.jobs import parse_job_spec
from duetime.domain.timeutil import rfc3339_ms
from duetime.services.dispatch import Dispatcher
from duetime.services.reconcile import Reconciler
from tests.integration.test_dependencies import T0, TENANT, Engine

HOT_SECONDS = 5


def reap(engine: Engine) -> None:
    """DynamoDB TTL (duetime.local.ttl on the local stack): items past expires_at go."""
    now = engine.now // 1000
    for key, run in list(engine.runs._runs.items()):
        if run.expires_at is not None and run.expires_at <= now:
            del engine.runs._runs[key]
    for job_key, job in list(engine.jobs._jobs.items()):
        if job.expires_at is not None and job.expires_at <= now:
            del engine.jobs._jobs[job_key]


def test_a_one_offs_run_record_gone_before_its_job_does_not_make_the_reconciler_send_it_again() -> (
    None
):
    engine = Engine(run_ttl_seconds=HOT_SECONDS)
    body = {"schedule": {"at": rfc3339_ms(T0)}, "target": {"type": "http", "url": "https://x.io"}}
    job_id = engine.service.create(TENANT, parse_job_spec(body)).id  # 3 attempts: 690 s more
    engine.work()
    run = engine.runs.get(job_id, T0)
    stored = engine.jobs.get(TENANT, job_id)
    assert run is not None
    assert stored is not None
    assert run.expires_at == T0 // 1000 + HOT_SECONDS  # on its way to the archive at once
    assert stored.expires_at is not None
    assert stored.expires_at > run.expires_at  # the job outlives the run's attempts

    settings = engine.settings
    for seconds in range(0, 3_600, 60):  # an hour of reaping and reconciling
        engine.now = T0 + seconds * 1000
        reap(engine)
        dispatcher = Dispatcher(
            engine.jobs, engine.timers, engine.queue, settings, clock=engine.clock
        )
        reconciler = Reconciler(
            engine.jobs, engine.timers, engine.runs, dispatcher, settings, clock=engine.clock
        )
        reconciler.reconcile()
        engine.work()

    assert [i.run_id for i in engine.runs_of(job_id)] == [f"{job_id}-{T0}"]
