"""A worker that cannot read the run messages' keys (Secrets Manager throttled or silent on a
cold container) opens no message: each came back after 2, 4, 8 … s and, at its 10th receive,
the redrive policy moved it to the DLQ, no message at fault, every run a cold worker met in
~20 minutes (an outside fault audit, round nine). It comes back after 2, 4 … minutes now, up
to an hour: its 10 receives last ~4.5 hours."""

from __future__ import annotations

from typing import Any

from duetime.domain.messages import KeysUnavailable
from duetime.services.results import KEYS_WAIT_SECONDS
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins
from tests.integration.test_worker_store_outage import handed_back_waits


class UnreadableKeys:
    def open(self, body: str) -> Any:
        raise KeysUnavailable("the run messages' keys could not be read: throttled")


def test_a_message_no_worker_can_open_for_its_keys_comes_back_in_minutes_not_seconds() -> None:
    twins = Twins()
    twins.create(schedule={"delay_seconds": 5})
    twins.clock.now = T0 + 5_000
    twins.coordinator.tick()
    auth, twins.executor._auth = twins.executor._auth, UnreadableKeys()  # type: ignore[attr-defined]

    waits = handed_back_waits(twins, KeysUnavailable)

    first, most = KEYS_WAIT_SECONDS
    assert waits[0] == first
    assert max(waits) == most
    assert sum(waits) > 4 * 3600  # an outage of hours moves nothing to the DLQ
    twins.executor._auth = auth  # type: ignore[attr-defined]
