"""Ways a job was lost, run twice or left dead — each reproduced first, then fixed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from duetime.adapters.memory import MemoryJobStore
from duetime.domain.jobs import JobStatus
from duetime.domain.timeutil import MINUTE_MS
from duetime.services.sweep import Sweeper
from tests.integration.test_partitioned_sweep import T0, Twins


def test_given_a_pause_and_resume_during_a_sweep_then_the_chain_keeps_running() -> None:
    # Seen: 2 runs in 24 h instead of 143. The sweep read the job, a pause and a resume landed,
    # then the sweep wrote the chain's next timer with the old generation over the resume's.
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 600})
    raced = False

    class Racing(MemoryJobStore):
        def get_many(self, keys: Any) -> Any:
            nonlocal raced
            found = super().get_many(keys)
            if not raced and job_id in found:
                raced = True
                twins.service.pause("t", job_id)
                twins.service.resume("t", job_id)
            return found

    store = Racing()
    store._jobs = twins.jobs._jobs
    sweeper = Sweeper(store, twins.timers, twins.queue, twins.settings, clock=twins.clock)
    sent: Counter[int] = Counter()
    for minute in range(1, 24 * 60 + 1):
        twins.clock.now = T0 - 7_000 + minute * MINUTE_MS
        sweeper.sweep()
        sent.update(instant for job, instant in twins.sent() if job == job_id)

    assert raced
    assert len(sent) >= 143  # every 10 minutes for a day
    assert max(sent.values()) <= 2  # a copy around the race shares its run id


def test_given_a_resume_whose_dispatch_failed_then_resuming_again_arms_the_chain() -> None:
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 600})
    twins.service.pause("t", job_id)
    failing = {"on": True}
    put = twins.timers.put

    def flaky_put(timers: Any) -> None:
        if failing["on"]:
            raise ConnectionError("DynamoDB is unreachable")
        put(timers)

    twins.timers.put = flaky_put  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        twins.service.resume("t", job_id)
    assert twins.jobs.get("t", job_id).status == JobStatus.SCHEDULED  # type: ignore[union-attr]
    failing["on"] = False

    # A scheduled job is resumed again: not a 409, the chain is armed (idempotently)
    view = twins.service.resume("t", job_id)
    assert view.status == JobStatus.SCHEDULED
    twins.clock.now += 3 * 3_600_000
    for _ in range(1, 120):
        twins.clock.now += MINUTE_MS
        twins.sweeper.sweep()
    assert len({instant for job, instant in twins.sent() if job == job_id}) >= 11
