"""A gated job's run delivered again after later occurrences took its gate (an outside
lifecycle audit, round seven): a run whose worker died mid-attempt, its message back after a
Lambda queue's visibility timeout, is failed and retried; a finished run whose dependents'
send failed sends them on its redelivery. Until 2026-12-01 the gate dropped both as late
copies: the first stayed `running` for good, the second's `after` run never existed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from duetime.domain.invocation import Invocation
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import RunStatus
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import StoreError
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins, every_ten_seconds

LAMBDA_VISIBILITY_S = 6 * 900  # the Lambda worker's queues: 6 x its timeout


class Crash(BaseException):
    """The worker process dies mid-attempt: no outcome, no delete."""


@dataclass
class CrashingTwins(Twins):
    """Twins whose worker dies in the first attempt of the occurrences in `crash` (seconds
    after T0), 2 s in."""

    crash: set[int] = field(default_factory=set)

    def execute(self, target: Target, invocation: Invocation) -> None:
        occurrence = (invocation.scheduled_ms - T0) // 1000
        if invocation.attempt == 1 and occurrence in self.crash:
            self.crash.discard(occurrence)
            self.started.append((occurrence * 1000, 1, self.clock.now - T0))
            for _ in range(2):
                self.clock.now += 1000
                self.work()
            raise Crash
        super().execute(target, invocation)

    def work(self) -> None:
        for instant in sorted(i for i in self.hooks if i <= self.clock.now):
            for action in self.hooks.pop(instant):
                action()
        self.coordinator.tick()
        while deliveries := self.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0):
            try:
                result = self.executor.handle(deliveries[0])
            except Crash:
                continue  # its message comes back after the visibility timeout
            if result.disposition == "done":
                self.queue.delete(deliveries)


@pytest.mark.parametrize(("overlap", "seconds"), [("skip", 50), ("buffer_one", 50), ("skip", 5)])
def test_a_run_whose_worker_died_is_retried_when_its_message_comes_back(
    overlap: str, seconds: int
) -> None:
    # 50 s runs every minute: the message is back at ~+5430, while +5400 holds the gate (5 s
    # runs: the gate is free then, as it always was handled).
    twins = CrashingTwins(crash={30})
    twins.queue._visibility_ms = LAMBDA_VISIBILITY_S * 1000
    job = twins.create(
        schedule={"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 3 * 3600_000)},
        payload={"seconds": seconds},
        timeout_seconds=60,
        retry={"max_attempts": 2, "backoff_seconds": 1},
        overlap=overlap,
    )
    twins.at(30, lambda: twins.service.run_now("t", job))
    twins.run_for(LAMBDA_VISIBILITY_S + 200)

    assert [a for o, a, _ in twins.started if o == 30_000] == [1, 2]
    run = twins.runs.get(job, T0 + 30_000)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED


def _with_a_failed_trigger(twins: Twins, occurrence_s: int) -> list[int]:
    deps = twins.executor._dependencies
    trigger = deps.trigger
    failed: list[int] = []

    def throttled_once(job: Any, run: Any, ids: Any) -> int:
        if run.scheduled_ms == T0 + occurrence_s * 1000 and not failed:
            failed.append((twins.clock.now - T0) // 1000)
            raise StoreError("ProvisionedThroughputExceededException", transient=True)
        return trigger(job, run, ids)

    deps.trigger = throttled_once  # type: ignore[method-assign, assignment]
    return failed


@pytest.mark.parametrize("overlap", ["buffer_one", "skip"])
def test_a_finished_run_whose_trigger_failed_sends_its_after_run_on_its_redelivery(
    overlap: str,
) -> None:
    # buffer_one: +10 ends at +25 and starts +20; its message is back at ~+27, while +20 runs.
    # skip, 3 s runs every 2 s: +2 ends at +5, back at ~+7, while +6 runs.
    twins = Twins()
    if overlap == "buffer_one":
        upstream, occurrence, ended = twins.create(**every_ten_seconds()), 10, 25
    else:
        schedule = {"rate_seconds": 2, "end_at": rfc3339_ms(T0 + 60_000)}
        upstream = twins.create(schedule=schedule, payload={"seconds": 3}, overlap="skip")
        occurrence, ended = 2, 5
    dependent = twins.create(
        schedule={"after": {"job_id": upstream, "on": "succeeded"}}, payload={"seconds": 0}
    )
    failed = _with_a_failed_trigger(twins, occurrence)
    twins.run_for(120)

    assert failed == [ended]
    run = twins.runs.get(dependent, T0 + occurrence * 1000)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
