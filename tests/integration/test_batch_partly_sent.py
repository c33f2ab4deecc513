"""POST /jobs/batch whose first runs SQS takes for some items and not for others (a queue that
does not answer, one batch of 10 refused): the items whose runs went out are created (they may
have run already), only the others are withdrawn and answered `503 unavailable`, to be sent
again. Until 2026-11-30 every job of the request was withdrawn and the request answered 500:
runs that had executed belonged to jobs answered as never submitted, and a retry without keys
ran them twice (an outside fault audit, round seven)."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.errors import DomainError
from duetime.domain.jobs import JobStatus, Priority, parse_job_spec
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError, QueueUnavailable
from duetime.services.batch import BatchJob, BatchSubmitter
from duetime.services.jobs import JobView
from tests.integration.test_dependencies import T0, TENANT, Engine


def item(n: int, priority: str) -> BatchJob:
    body = {
        "schedule": {"at": rfc3339_ms(T0)},
        "target": {"type": "handler", "name": "duetime.noop"},
        "payload": n,
        "priority": priority,
    }
    return BatchJob(parse_job_spec(body))


@pytest.mark.parametrize("error", [QueueUnavailable, QueueError, None])
def test_a_batch_whose_high_queue_fails_keeps_the_jobs_whose_runs_went_out(
    error: type[QueueError] | None,
) -> None:
    engine = Engine()
    real_send = engine.queue.send

    def send(messages: Any) -> None:
        high = [(m, d) for m, d in messages if m.priority == Priority.HIGH]
        real_send([(m, d) for m, d in messages if m.priority != Priority.HIGH])
        engine.work()  # meanwhile (the failing batch's tries) the workers run what went out
        if error is not None and high:
            raise error("SQS did not take a batch", [m for m, _ in high])
        real_send(high)

    engine.queue.send = send  # type: ignore[method-assign]
    items = [item(n, "normal") for n in range(9)] + [item(9, "high")]

    results = BatchSubmitter(engine.service).create(TENANT, items)
    engine.work()

    created = [r for r in results if isinstance(r, JobView)]
    refused = [r for r in results if isinstance(r, DomainError)]
    assert len(created) == (10 if error is None else 9)
    assert {engine.service.get(TENANT, v.job.id).job.status for v in created} <= {
        JobStatus.SCHEDULED,
        JobStatus.COMPLETED,
    }
    normal = {v.job.id for v in created if v.job.spec.priority == Priority.NORMAL}
    assert sorted(i.job_id for i in engine.ran) == sorted(normal)  # each ran, once
    if error is not None:
        [unsent] = refused
        assert (unsent.code, getattr(unsent, "retry_after_seconds", None)) == ("unavailable", 1)
        jobs = engine.jobs.list(TENANT, 100, None).items
        withdrawn = [j for j in jobs if j.status == JobStatus.CANCELLED]
        assert [j.spec.payload for j in withdrawn] == [9]


def test_a_batch_whose_every_send_fails_is_refused_whole_as_before() -> None:
    engine = Engine()

    def send(messages: Any) -> None:
        raise QueueUnavailable("SQS did not take a batch", [])  # which ones: unknown

    engine.queue.send = send  # type: ignore[method-assign]
    with pytest.raises(QueueUnavailable):
        BatchSubmitter(engine.service).create(TENANT, [item(n, "normal") for n in range(3)])
    assert {j.status for j in engine.jobs.list(TENANT, 100, None).items} == {JobStatus.CANCELLED}
