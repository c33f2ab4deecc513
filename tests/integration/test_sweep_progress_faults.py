"""A partition's bookkeeping failing while its timers do not: its progress writes and its
lease release throttled (the partition's sweep-state item shares its key with that minute's
timers, so a burst of timer writes into one minute can throttle it). A throttled write is not
a sweeper that died: the timers go out on time, nothing is parked, no stall is counted."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.timers import minute_of
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms
from duetime.ports import StoreError
from duetime.services.sweep import Sweeper
from tests.integration.conftest import Engine
from tests.integration.test_partitioned_sweep import T0, Twins


class ThrottledPartition(MemoryTimerStore):
    """`advance` of one partition fails as a throttled write would, after the SDK's retries,
    while `failing` says so (a count of calls, or for good: None)."""

    def __init__(self, shards: int) -> None:
        super().__init__(shards=shards)
        self.throttled: tuple[int, int] | None = None
        self.failing: int | None = None  # calls left to fail; None: every call
        self.transient = True
        self.calls = 0

    def advance(self, minute: int, shard: int, owner: str, watermark: Any, **kw: Any) -> bool:
        if (minute, shard) == self.throttled and self.failing != 0:
            self.calls += 1
            if self.failing is not None:
                self.failing -= 1
            raise StoreError("ProvisionedThroughputExceededException", transient=self.transient)
        return super().advance(minute, shard, owner, watermark, **kw)


def throttled_twins() -> tuple[Twins, ThrottledPartition, list[str], int]:
    """300 one-offs due in one minute (3 pages of 100) and the sweep that first reaches it."""
    twins = Twins(shards=1)
    store = ThrottledPartition(shards=1)
    twins.use_timers(store)
    twins.sweeper = Sweeper(
        twins.jobs,
        store,
        twins.queue,
        twins.settings,
        clock=twins.clock,
        page_size=100,
    )
    due = T0 + 10 * MINUTE_MS
    ids = [twins.submit({"at": rfc3339_ms(due + i)}) for i in range(300)]
    store.throttled = (minute_of(due), 0)
    twins.clock.now = due - MINUTE_MS  # the first sweep that reaches its minute
    return twins, store, ids, due


def test_given_a_partition_s_progress_writes_throttled_for_minutes_then_its_runs_go_on_time() -> (
    None
):
    # The first page's progress write failed and the partition was abandoned: the next holder
    # waited out the unreleased lease (120 s), counted a stall, shrank its pages, and at 4
    # stalls parked a healthy timer untried; 200 of the 300 runs went out 9 minutes late.
    twins, store, ids, due = throttled_twins()
    sent: dict[str, int] = {}
    messages = 0
    for step in range(12):
        if step == 6:
            store.throttled = None  # the throttle ends
        twins.sweeper.sweep()
        for (job_id, _instant), copies in twins.sent().items():
            sent.setdefault(job_id, twins.clock.now)
            messages += copies
        twins.clock.now += MINUTE_MS

    assert set(sent) == set(ids)
    assert max(sent.values()) < due  # every run handed over by a sweep before it was due
    assert messages == 300  # once each: the shard moved past the minute its sweep finished
    assert store.stuck(0) == []  # none parked: not untried, not for a stall
    state = store.partition_states([(minute_of(due), 0)])[(minute_of(due), 0)]
    assert state.stalls == 0


def test_given_a_passing_throttle_on_a_partition_then_its_lease_is_released_with_no_stall() -> None:
    twins, store, ids, due = throttled_twins()
    store.failing = 3  # the first page's progress write, then the release twice

    report = twins.sweeper.sweep()
    state = store.partition_states([(minute_of(due), 0)])[(minute_of(due), 0)]

    assert (state.complete, state.owner, state.stalls) == (True, None, 0)
    assert store.calls == 3
    assert report.errors == []
    assert {job_id for job_id, _ in twins.sent()} == set(ids)


def test_given_a_partition_s_progress_write_refused_for_good_then_the_partition_stops() -> None:
    # Not a passing condition (access denied): the sweep stops there as before, the next
    # sweep resumes from what was recorded; it is not tried again in place.
    twins, store, _, _ = throttled_twins()
    store.transient = False

    report = twins.sweeper.sweep()

    assert report.errors
    assert store.calls == 2  # the page's write and one release, neither tried again
    assert len(twins.sent()) == 100  # the first page went out; the rest waits


def test_given_a_progress_write_on_moto_without_an_answer_then_it_is_a_passing_store_error(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write with no answer escaped as botocore's error, and every failed write was
    # "transient", an access denied too: the sweep could not tell which to try again.
    from botocore.exceptions import ClientError, EndpointConnectionError

    timers = engine.parts.timers
    client = timers._client  # type: ignore[attr-defined]

    def unanswered(**_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://dynamodb")

    monkeypatch.setattr(client, "update_item", unanswered)
    with pytest.raises(StoreError) as raised:
        timers.advance(1, 0, "me", None, release=True)
    assert raised.value.transient
    denied = {"Error": {"Code": "AccessDeniedException", "Message": "no"}}

    def refused(**_: Any) -> Any:
        raise ClientError(denied, "UpdateItem")  # type: ignore[arg-type]

    monkeypatch.setattr(client, "update_item", refused)
    with pytest.raises(StoreError) as raised:
        timers.advance(1, 0, "me", None, release=True)
    assert not raised.value.transient
