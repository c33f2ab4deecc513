"""A run that ends with an attempt whose worker died, its retry dropped by a pause or a cancel
during the backoff, ends when that attempt's lease ended at the latest (history.md: its
`finished_at`, and `duration_ms` an upper bound, the job's timeout and 30 s). Until 2026-12-01
it ended when a later delivery noticed the dead worker, the queue's visibility timeout later:
a 90-minute `duration_ms` for a target that never ran (an outside history audit, round two).
(A retry's claim withdrawn the same way, and a redrive's reopen, still keep that moment.)"""

from __future__ import annotations

from tests.integration.conftest import Engine
from tests.integration.test_engine import claimed_by_a_worker_that_dies, engine_visibility
from tests.integration.test_history import History, history  # noqa: F401 (fixture)

LEASE_MS = 60_000  # the job's 30 s timeout + the lease's 30 s margin (the helper's job)


def test_a_run_ended_by_its_abandoned_attempt_reports_at_most_the_lease(
    engine: Engine,
    history: History,  # noqa: F811
) -> None:
    job_id, scheduled = claimed_by_a_worker_that_dies(engine)  # the target never called
    engine.advance(engine_visibility(engine) + 1)  # the message comes back: attempt abandoned
    engine.drain()
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run.status.value == "retrying"
    engine.parts.service.cancel("tenant-a", job_id)  # during the retry's backoff
    engine.advance(600)
    engine.drain()
    assert engine.recorder.calls == []
    engine.advance(31 * 86_400)
    history.expire_and_archive()

    [row] = history.query(
        "SELECT status, error, epoch_ms(finished_at) AS f, duration_ms"
        f" FROM runs WHERE job_id = '{job_id}'"
    )
    assert row["status"] == "failed"
    assert row["error"].startswith("the worker stopped during the attempt")
    assert row["f"] <= scheduled + LEASE_MS, row
    assert row["duration_ms"] <= LEASE_MS, row
