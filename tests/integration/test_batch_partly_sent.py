"""POST /jobs/batch whose first runs SQS takes for some items and not for others (a queue that
does not answer, one request of 10 refused), or for none it can name: every job stands, and the
runs SQS did not take become timers the next sweep sends (late, not lost; a recurring job's
chain goes on from its first unsent occurrence). Until 2026-11-30 every job of the request was
withdrawn and the request answered 500: runs that had executed belonged to jobs answered as
never submitted, and a retry without keys ran them twice (an outside fault audit, round
seven). Only a failure that names no message still withdraws them all."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.jobs import JobStatus, Priority, parse_job_spec
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError, QueueUnavailable
from duetime.services.batch import BatchJob, BatchSubmitter
from duetime.services.jobs import JobView
from tests.integration.test_partitioned_sweep import T0, Twins


def item(n: int, priority: str, **schedule: Any) -> BatchJob:
    body = {
        "schedule": schedule or {"at": rfc3339_ms(T0)},
        "target": {"type": "handler", "name": "duetime.noop"},
        "payload": n,
        "priority": priority,
    }
    return BatchJob(parse_job_spec(body))


@pytest.mark.parametrize("error", [QueueUnavailable, QueueError, None])
def test_runs_sqs_did_not_take_are_sent_by_the_next_sweeps_and_every_job_stands(
    error: type[QueueError] | None,
) -> None:
    twins = Twins(shards=1)
    real_send = twins.queue.send
    down = [True]

    def send(messages: Any) -> None:
        high = [(m, d) for m, d in messages if m.priority == Priority.HIGH]
        real_send([(m, d) for m, d in messages if m.priority != Priority.HIGH])
        if error is not None and high and down[0]:
            raise error("SQS did not take a batch", [m for m, _ in high])
        real_send(high)

    twins.queue.send = send  # type: ignore[method-assign]
    items = [item(n, "normal") for n in range(3)] + [item(3, "high")]
    items.append(item(4, "high", rate_seconds=5, end_at=rfc3339_ms(T0 + 40_000)))
    items.append(item(5, "normal", rate_seconds=5, end_at=rfc3339_ms(T0 + 40_000)))
    items.append(item(6, "high", rate_seconds=20, end_at=rfc3339_ms(T0 + 600_000)))

    results = BatchSubmitter(twins.service).create("t", items)

    assert all(isinstance(r, JobView) for r in results)
    ids = [r.job.id for r in results if isinstance(r, JobView)]
    stood = [twins.jobs.get("t", i).status for i in ids]  # type: ignore[union-attr]
    assert set(stood[:4]) == {JobStatus.SCHEDULED} == {stood[6]}
    # A chain whose schedule ended within its first sends is completed at once, whether they
    # all went out or some were rescued (it held a recurring count until the reconciler).
    assert stood[5] == stood[4] == JobStatus.COMPLETED
    down[0] = False  # SQS takes requests again
    for _ in range(66):
        twins.sweeper.sweep_shard(0)
        twins.clock.now += 10_000
    sent = twins.sent()
    assert [sent[(i, T0)] for i in ids[:4]] == [1, 1, 1, 1]

    # Each occurrence of the chains once: the unsent ones from their own timers, the rest
    # from the chain's (no second chain beside it, no catch-up skipping the late ones).
    def counts(job_id: str) -> dict[int, int]:
        return {at - T0: n for (job, at), n in sent.items() if job == job_id}

    assert counts(ids[4]) == dict.fromkeys(range(5_000, 40_001, 5_000), 1)
    assert counts(ids[6]) == dict.fromkeys(range(20_000, 600_001, 20_000), 1)


def test_a_failure_that_names_no_message_withdraws_every_job_as_before() -> None:
    twins = Twins(shards=1)

    def send(messages: Any) -> None:
        raise QueueUnavailable("SQS did not take a batch", [])  # which ones: unknown

    twins.queue.send = send  # type: ignore[method-assign]
    with pytest.raises(QueueUnavailable):
        BatchSubmitter(twins.service).create("t", [item(n, "normal") for n in range(3)])
    assert {j.status for j in twins.jobs.list("t", 100, None).items} == {JobStatus.CANCELLED}
