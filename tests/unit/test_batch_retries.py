"""Unprocessed batch items are sent again after a backoff, and a batch that never goes through
fails instead of looping."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.adapters.dynamodb import common as dynamodb
from duetime.adapters.dynamodb.jobs import DynamoJobStore
from duetime.ports import StoreError


class Throttled:
    """A DynamoDB client that leaves every key unprocessed `throttled` times, then serves."""

    def __init__(self, throttled: int) -> None:
        self.throttled = throttled
        self.calls = 0

    def batch_get_item(self, RequestItems: Any) -> Any:  # boto3's parameter name
        self.calls += 1
        if self.calls <= self.throttled:
            return {"Responses": {"jobs": []}, "UnprocessedKeys": RequestItems}
        return {"Responses": {"jobs": []}}


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(dynamodb.time, "sleep", slept.append)
    return slept


def test_unprocessed_keys_are_sent_again_after_a_growing_backoff(sleeps: list[float]) -> None:
    client = Throttled(throttled=3)
    store = DynamoJobStore(client, "jobs")  # type: ignore[arg-type]

    assert store.get_many([("t", "01KAAAAAAAAAAAAAAAAAAAAAAA")]) == {}

    assert client.calls == 4
    assert len(sleeps) == 3  # one backoff before each resend, none before the first call
    ceilings = [dynamodb.UNPROCESSED_BACKOFF_S * 2**n for n in (1, 2, 3)]
    assert all(0 <= s <= c for s, c in zip(sleeps, ceilings, strict=True))


def test_keys_that_stay_unprocessed_fail_the_call_instead_of_looping(sleeps: list[float]) -> None:
    client = Throttled(throttled=10**6)
    store = DynamoJobStore(client, "jobs")  # type: ignore[arg-type]

    with pytest.raises(StoreError, match="unprocessed"):
        store.get_many([("t", "01KAAAAAAAAAAAAAAAAAAAAAAA")])

    assert client.calls == dynamodb.UNPROCESSED_ROUNDS
