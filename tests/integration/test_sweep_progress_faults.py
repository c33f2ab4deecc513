"""A partition's bookkeeping failing while its timers do not: its progress writes and its
lease release throttled (the partition's sweep-state item shares its key with that minute's
timers, so a burst of timer writes into one minute can throttle it). A throttled write is not
a sweeper that died: the timers go out on time, nothing is parked, no stall is counted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.timers import PartitionState, minute_of
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms
from duetime.ports import QueueUnavailable, StoreError
from duetime.services.stuck import PASSING_RETRY_MS
from duetime.services.sweep import MAX_STALLS, Sweeper
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


def throttled_twins(n: int = 300) -> tuple[Twins, ThrottledPartition, list[str], int]:
    """`n` one-offs due in one minute (pages of 100) and the sweep that first reaches it."""
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
    ids = [twins.submit({"at": rfc3339_ms(due + i)}) for i in range(n)]
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
    store.failing = 4  # the first two pages' progress writes, then the release twice

    report = twins.sweeper.sweep()
    state = store.partition_states([(minute_of(due), 0)])[(minute_of(due), 0)]

    assert (state.complete, state.owner, state.stalls) == (True, None, 0)
    assert store.calls == 4
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


def test_given_an_operator_s_retry_during_the_sweep_s_own_then_the_sweep_goes_on() -> None:
    # The operator's `duetime timers stuck --retry` took the entry while the sweep's attempt
    # met the same passing outage: the sweep's write taking its attempt back failed its
    # condition, and the shard's sweep raised.
    twins = Twins(shards=1)
    table_down = {"on": False, "during": None}

    class Outage(MemoryJobStore):
        def get_many(self, keys: Any) -> Any:
            if table_down["on"]:
                hook, table_down["during"] = table_down["during"], None
                if callable(hook):
                    hook()
                raise StoreError("BatchGetItem: ProvisionedThroughputExceededException")
            return super().get_many(keys)

    jobs = Outage()
    twins.jobs = jobs
    twins.service = type(twins.service)(
        jobs, twins.timers, twins.runs, twins.queue, twins.settings, clock=twins.clock
    )
    twins.submit({"rate_seconds": 3600, "start_at": rfc3339_ms(T0 + 300_000)})
    sweeper = Sweeper(jobs, twins.timers, twins.queue, twins.settings, clock=twins.clock)
    operator = Sweeper(jobs, twins.timers, twins.queue, twins.settings, clock=twins.clock)
    twins.clock.now = T0 + 240_000
    table_down["on"] = True
    assert sweeper.sweep_shard(0).parked == 1  # parked passing: no attempt counted
    told: list[Any] = []
    table_down["during"] = lambda: told.extend(operator.retry(operator.stuck()))
    twins.clock.now += PASSING_RETRY_MS

    report = sweeper.sweep_shard(0)  # raised ConditionFailed

    [(_, why)] = told
    assert why is not None
    assert "ProvisionedThroughputExceeded" in why
    [entry] = sweeper.stuck()
    assert not entry.quarantined
    assert report.errors == []


class SlowQueue(MemoryQueue):
    """Each send takes 16 s on the hand clock: a sweep hands over 3 pages before its deadline."""

    def __init__(self, clock: Any) -> None:
        super().__init__(clock)
        self.clock = clock
        self.sent_ids: set[str] = set()

    def send(self, messages: Any) -> None:
        self.clock.now += 16_000
        super().send(messages)
        self.sent_ids |= {message.job_id for message, _ in messages}


def test_given_the_stall_reset_after_an_untried_park_throttled_then_no_second_timer_is_parked() -> (
    None
):
    # The write of stalls=0 after the park failed, the later ones kept the count (4), and the
    # next sweep parked a second, healthy timer untried, with an attempt counted.
    twins, store, ids, due = throttled_twins(600)
    queue = SlowQueue(twins.clock)
    twins.queue = queue
    twins.sweeper = Sweeper(
        twins.jobs, store, queue, twins.settings, clock=twins.clock, page_size=100
    )
    minute = minute_of(due)
    store._partitions[(minute, 0)] = PartitionState(minute, 0, stalls=MAX_STALLS)
    store.failing = 1  # the reset's write only

    twins.sweeper.sweep()
    twins.clock.now = max(twins.clock.now, due)
    twins.sweeper.sweep()

    untried = [s.timer.job_id for s in store.stuck(0) if "stopped" in s.reason]
    assert untried == [ids[0]]  # the one the four deaths pointed at, alone
    assert set(ids[1:]) <= queue.sent_ids


def test_given_a_progress_write_that_fails_slowly_then_the_sweep_stops_within_its_time() -> None:
    # A store that does not answer takes ~40 s to fail a write: the sweep read and handed
    # over one more page past its deadline, then tried its release, 120 s in all, past the
    # sweeper's 90 s timeout (killed there, the next holder would count a stall).
    twins, store, _, _ = throttled_twins()

    def silent(*_: Any, **__: Any) -> bool:
        twins.clock.now += 40_000
        raise StoreError("Read timeout on endpoint URL", transient=True)

    store.advance = silent  # type: ignore[method-assign]
    started = twins.clock.now

    twins.sweeper.sweep_shard(0)

    assert twins.clock.now - started < 90_000


def test_given_a_job_write_refused_on_moto_then_it_is_not_a_passing_store_error(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every failed job write was "transient": a chain whose write was refused for good (an
    # access denied) was tried again every 30 s and never quarantined.
    from botocore.exceptions import ClientError

    job_id = engine.submit({"schedule": {"cron": "* * * * *"}})
    jobs = engine.parts.jobs
    job = jobs.get("tenant-a", job_id)
    assert job is not None
    client = jobs._client  # type: ignore[attr-defined]
    for code, transient in (("AccessDeniedException", False), ("InternalServerError", True)):
        answer = {"Error": {"Code": code, "Message": "no"}}

        def refused(answer: Any = answer, **_: Any) -> Any:
            raise ClientError(answer, "PutItem")

        monkeypatch.setattr(client, "put_item", refused)
        monkeypatch.setattr(client, "get_item", lambda **_: {})  # (not landed)
        with pytest.raises(StoreError) as raised:
            jobs.replace(replace(job, version=job.version + 1), expected=job)
        assert raised.value.transient is transient


@pytest.mark.parametrize(
    ("reasons", "transient"),
    [
        (("None", "TransactionConflict"), True),
        (("ThrottlingError",), True),
        (("ProvisionedThroughputExceeded", "None"), True),
        (("None", "ValidationError"), False),
    ],
)
def test_given_a_transaction_cancelled_by_a_conflict_then_it_is_a_passing_store_error(
    reasons: tuple[str, ...], transient: bool
) -> None:
    # A store_error called every cancelled transaction lasting: a chain whose end met a
    # conflict on its tenant's busy counter was parked as failing on its own (a review).
    from botocore.exceptions import ClientError

    from duetime.adapters.dynamodb.common import store_error

    answer: Any = {
        "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        "CancellationReasons": [{"Code": code} for code in reasons],
    }
    assert store_error(ClientError(answer, "TransactWriteItems")).transient is transient


def at_four_stalls(script: Any) -> tuple[Twins, ThrottledPartition, list[str], int]:
    """A partition four sweeps died in, its progress writes going through `script(n, twins)`
    (n: the write's number) before the store."""
    twins, store, ids, due = throttled_twins()
    store.throttled = None
    calls = [0]

    def advance(minute: int, shard: int, owner: str, watermark: Any, **kw: Any) -> bool:
        calls[0] += 1
        script(calls[0], twins)
        return MemoryTimerStore.advance(store, minute, shard, owner, watermark, **kw)

    store.advance = advance  # type: ignore[method-assign]
    minute = minute_of(due)
    store._partitions[(minute, 0)] = PartitionState(minute, 0, stalls=MAX_STALLS)
    return twins, store, ids, minute


def test_given_the_reset_lost_and_a_slow_write_past_the_deadline_then_the_release_resets() -> None:
    # The release made when a failed write took the time left kept the stored count (4):
    # the next sweep parked a second, healthy timer untried (a review).
    def script(n: int, twins: Twins) -> None:
        if n == 1:  # the reset's write after the park
            raise StoreError("ProvisionedThroughputExceededException")
        if n == 2:  # the first page's: no answer until past the deadline
            twins.clock.now += 46_000
            raise StoreError("Read timeout on endpoint URL")

    twins, store, ids, minute = at_four_stalls(script)
    twins.sweeper.sweep_shard(0)
    state = store.partition_states([(minute, 0)])[(minute, 0)]
    twins.clock.now += MINUTE_MS
    twins.sweeper.sweep_shard(0)

    assert (state.owner, state.stalls) == (None, 0)
    parked = [s.timer.job_id for s in store.stuck(0) if "stopped" in s.reason]
    assert set(parked) <= {ids[0]}  # (retried meanwhile, it may have left the list)


def test_given_the_reset_lost_and_sqs_down_then_the_partition_s_release_resets() -> None:
    def script(n: int, twins: Twins) -> None:
        if n == 1:
            raise StoreError("ProvisionedThroughputExceededException")

    twins, store, _, minute = at_four_stalls(script)

    def down(messages: Any) -> None:
        raise QueueUnavailable("SQS will not take requests")

    twins.queue.send = down  # type: ignore[method-assign]
    twins.sweeper.sweep_shard(0)

    state = store.partition_states([(minute, 0)])[(minute, 0)]
    assert (state.owner, state.stalls) == (None, 0)
