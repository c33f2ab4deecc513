"""A worker that cannot read the run messages' keys (Secrets Manager throttled or silent on a
cold container) opens no message: each came back after 2, 4, 8 … s and, at its 10th receive,
the redrive policy moved it to the DLQ, no message at fault, every run a cold worker met in
~20 minutes (an outside fault audit, round nine). It comes back after 2, 4 … minutes now, up
to an hour: its 10 receives last ~4.5 hours."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import KeysUnavailable
from duetime.services.results import KEYS_WAIT_SECONDS
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins


class UnreadableKeys:
    def open(self, body: str) -> Any:
        raise KeysUnavailable("the run messages' keys could not be read: throttled")


def test_a_message_no_worker_can_open_for_its_keys_comes_back_in_minutes_not_seconds() -> None:
    twins = Twins()
    twins.create(schedule={"delay_seconds": 5})
    twins.clock.now = T0 + 5_000
    twins.coordinator.tick()
    auth, twins.executor._auth = twins.executor._auth, UnreadableKeys()  # type: ignore[attr-defined]

    waits = []
    (delivery,) = twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    for _ in range(9):  # every receive but the redrive policy's 10th
        with pytest.raises(KeysUnavailable):
            twins.executor.handle(delivery)
        before = twins.clock.now
        while not (back := twins.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)):
            twins.clock.now += 1_000
        (delivery,) = back
        waits.append((twins.clock.now - before) // 1000)

    first, most = KEYS_WAIT_SECONDS
    assert waits[0] == first
    assert max(waits) == most
    assert sum(waits) > 4 * 3600  # an outage of hours moves nothing to the DLQ
    twins.executor._auth = auth  # type: ignore[attr-defined]
