"""A worker whose own tables or queues fail for a while (throttled or silent past the SDK's
retries) hands each message back: after 2, 4, 8 s, then 1, 2, 4 … minutes, so its 10 receives
(the redrive policy's) last about an hour. With 2 … 300 s every run a worker met in an outage of
~13.5 minutes was moved to the DLQ, no message at fault, its one-offs back only by an operator's
redrive (until 2026-12-01; an outside fault audit, round nine). A failure that is the message's
own (a store refusing for good, a bug) keeps the quick schedule: to the DLQ in ~13.5 minutes."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import RunStatus
from duetime.ports import QueueUnavailable, SecretsUnavailable, StoreError
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins


def _waits(twins: Twins, error: Exception) -> list[int]:
    """The seconds each of the first 9 receives of a run's message waits to come back while
    reading its job raises `error`."""
    twins.create(schedule={"delay_seconds": 5})
    twins.clock.now = T0 + 5_000
    twins.coordinator.tick()

    def failing(*_: Any, **__: Any) -> Any:
        raise error

    twins.executor._reads._jobs = type("Failing", (), {"get_with_dependents": failing})()  # type: ignore[attr-defined]
    return handed_back_waits(twins, type(error))


def handed_back_waits(twins: Twins, raised: type[Exception]) -> list[int]:
    """The seconds a run's queued message waits to come back after each of its first 9
    receives (all but the redrive policy's 10th), each failing with `raised`."""
    waits = []
    (delivery,) = twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    for _ in range(9):
        with pytest.raises(raised):
            twins.executor.handle(delivery)
        before = twins.clock.now
        while not (back := twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)):
            twins.clock.now += 1_000
        (delivery,) = back
        waits.append((twins.clock.now - before) // 1000)
    return waits


@pytest.mark.parametrize(
    "error",
    [
        StoreError("ProvisionedThroughputExceededException", transient=True),
        StoreError("Read timeout on endpoint URL", transient=True, unknown=True),
        QueueUnavailable("SQS took no request"),
        SecretsUnavailable("cannot read the webhook secret: x", passing=True),
    ],
    ids=["throttled", "silent", "queue", "secret"],
)
def test_a_passing_outage_hands_a_message_back_for_about_an_hour(error: Exception) -> None:
    waits = _waits(Twins(), error)

    assert waits[:3] == [2, 4, 8]  # a blip: back in seconds
    assert waits[3:] == [60, 120, 240, 480, 960, 1920]
    assert sum(waits) > 3600  # an outage of an hour moves nothing to the DLQ


@pytest.mark.parametrize(
    "error",
    [StoreError("AccessDeniedException", transient=False), RuntimeError("a bug")],
    ids=["refused", "bug"],
)
def test_a_failure_of_the_message_own_keeps_the_quick_schedule(error: Exception) -> None:
    waits = _waits(Twins(), error)

    assert waits == [2, 4, 8, 16, 32, 64, 128, 256, 300]  # the DLQ in ~13.5 minutes


# An outside fault audit (round eleven): a finished run whose `after` dependents could not be
# read or sent through such an outage came back on the quick schedule (the DLQ in ~13.5
# minutes, the dependents never run without a redrive): its failure now says when.
@pytest.mark.parametrize(
    "error",
    [
        QueueUnavailable("SQS took no request"),
        StoreError("ProvisionedThroughputExceededException", transient=True),
        StoreError("Read timeout on endpoint URL", transient=True, unknown=True),
    ],
    ids=["queue-silent", "table-throttled", "table-silent"],
)
def test_an_outage_while_triggering_dependents_hands_back_for_about_an_hour(
    error: Exception,
) -> None:
    twins = Twins()
    up = twins.create(schedule={"delay_seconds": 5})
    twins.create(schedule={"after": {"job_id": up, "on": "succeeded"}})
    twins.clock.now = T0 + 5_000
    twins.coordinator.tick()

    deps = twins.executor._dependencies
    real_queue, real_jobs = deps._queue, deps._jobs

    class Failing:  # the dependents' reads (jobs table) or their send (SQS) meet the outage
        def __init__(self, real: Any, name: str) -> None:
            self._real, self._name = real, name

        def __getattr__(self, attr: str) -> Any:
            if attr == self._name:

                def failing(*_: Any, **__: Any) -> Any:
                    raise error

                return failing
            return getattr(self._real, attr)

    if isinstance(error, QueueUnavailable):
        deps._queue = Failing(real_queue, "send")
    else:
        deps._jobs = Failing(real_jobs, "get_many")
    (delivery,) = twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    waits = []
    for _ in range(9):
        result = twins.executor.handle(delivery)
        assert "dependents not triggered" in result.detail
        before = twins.clock.now
        while not (back := twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)):
            twins.clock.now += 1_000
        (delivery,) = back
        waits.append((twins.clock.now - before) // 1000)
    assert twins.statuses(up)[T0 + 5_000] == RunStatus.SUCCEEDED
    # architecture.md / runbook: a passing outage waits 2, 4, 8 s then 1, 2, 4 ... minutes
    assert sum(waits) > 3600, (
        f"the upstream's message reaches the DLQ after {sum(waits)} s: {waits}"
    )
