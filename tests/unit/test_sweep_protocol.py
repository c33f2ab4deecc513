"""Properties of the sweep protocol, on the in-memory twins with a hand-driven clock.

Whatever the pattern of ticks — regular, skipped (the sweeper was down), doubled (two
sweepers, or a retried invocation) — every occurrence due is handed to SQS exactly once.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.messages import LATE_SEND_MS, RunMessage
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.services.jobs import JobService
from duetime.services.sweep import Sweeper
from duetime.settings import QueueUrls, Settings, queue_key

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 7, tzinfo=UTC))
MINUTES = 20
END = T0 + 15 * 60_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def engine(clock: Clock) -> tuple[JobService, Sweeper, MemoryQueue]:
    queues = {
        queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}") for r in Runtime for p in Priority
    }
    config = Settings("jobs", "timers", "runs", queues, timer_shards=3)
    jobs, timers, runs = MemoryJobStore(), MemoryTimerStore(shards=3), MemoryRunStore()
    queue = MemoryQueue(clock)
    service = JobService(jobs, timers, runs, queue, config, clock=clock)
    sweeper = Sweeper(jobs, timers, queue, config, clock=clock, parallelism=2)
    return service, sweeper, queue


def sent(queue: MemoryQueue, clock: Clock) -> Counter[tuple[str, int]]:
    clock.now += 3_600_000  # everything delayed is visible by now
    counts: Counter[tuple[str, int]] = Counter()
    for runtime in Runtime:
        for priority in Priority:
            while deliveries := queue.receive(runtime, priority, 10, 0):
                for d in deliveries:
                    message = RunMessage.from_json(d.body)
                    counts[(message.job_id, message.scheduled_ms)] += 1
                queue.delete(deliveries)
    return counts


TICKS = st.lists(st.sampled_from(["tick", "skip", "double"]), min_size=MINUTES, max_size=MINUTES)


@settings(max_examples=60, deadline=None)
# Found by this property: timers written before the very first sweep, which came late.
@example(one_offs=[], rates=[30], ticks=["skip"] * 5 + ["tick"] * (MINUTES - 5), offset_ms=0)
@given(
    one_offs=st.lists(st.integers(0, 14 * 60_000), max_size=25),
    rates=st.lists(st.integers(30, 300), max_size=4),
    ticks=TICKS,
    offset_ms=st.integers(0, 59_999),
)
def test_every_occurrence_is_sent_exactly_once_whatever_the_ticks(
    one_offs: list[int], rates: list[int], ticks: list[str], offset_ms: int
) -> None:
    clock = Clock(T0)
    service, sweeper, queue = engine(clock)
    expected: Counter[tuple[str, int]] = Counter()
    for delay in one_offs:
        job = service.create("t", parse_job_spec(body({"at": rfc3339_ms(T0 + delay)})))
        expected[(job.id, T0 + delay)] += 1
    for rate in rates:
        schedule = {"rate_seconds": rate, "end_at": rfc3339_ms(END)}
        job = service.create("t", parse_job_spec(body(schedule, catchup="all")))
        first = T0 + rate * 1000
        for k in range((END - first) // (rate * 1000) + 1):
            expected[(job.id, first + k * rate * 1000)] += 1

    for minute, action in enumerate(ticks, start=1):
        clock.now = T0 - 7_000 + minute * 60_000 + offset_ms
        if action != "skip":
            sweeper.sweep(owner="a")
        if action == "double":
            sweeper.sweep(owner="b")
    clock.now = T0 + (MINUTES + 5) * 60_000
    sweeper.sweep()  # the sweeper is back: whatever was still pending is caught up

    assert sent(queue, clock) == expected


def body(schedule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"schedule": schedule, "target": {"type": "handler", "name": "duetime.noop"}, **extra}


@settings(max_examples=30, deadline=None)
@given(one_offs=st.lists(st.integers(3 * 60_000, 14 * 60_000), min_size=1, max_size=20))
def test_with_regular_ticks_every_timer_is_released_around_its_instant(
    one_offs: list[int],
) -> None:
    clock = Clock(T0)
    service, sweeper, queue = engine(clock)
    for delay in one_offs:
        service.create("t", parse_job_spec(body({"at": rfc3339_ms(T0 + delay)})))
    for minute in range(1, 16):
        clock.now = T0 - 7_000 + minute * 60_000
        sweeper.sweep()
    released = queue.visibility_times()
    assert sorted(due for _, due in released) == sorted(T0 + d for d in one_offs)
    for visible_at, due in released:  # within the second before it, or a little after
        assert due - 1000 + LATE_SEND_MS < visible_at <= due + LATE_SEND_MS


class TickingClock(Clock):
    """A clock that moves on by `step` ms at every read: the milliseconds a request spends
    between reading it for a job's instant and sending that job's message."""

    def __init__(self, now: int, step: int) -> None:
        super().__init__(now)
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


def test_a_delay_seconds_job_is_visible_on_its_instant_not_a_second_before_it() -> None:
    clock = TickingClock(T0, step=7)
    service, _, queue = engine(clock)
    job = service.create("t", parse_job_spec(body({"delay_seconds": 5})))
    [(visible_at, due)] = queue.visibility_times()
    assert due == job.next_due_ms
    assert due <= visible_at <= due + LATE_SEND_MS  # floored: ~990 ms early


def test_a_first_occurrence_sent_after_slow_timer_writes_is_at_most_a_little_late() -> None:
    # A rate job's first occurrence is whole seconds after the clock read; its chain's timer
    # is written before the send, and that write took 150 ms (a slow store). The delay is
    # taken when the message goes out, not when the request read the clock.
    clock = Clock(T0)
    service, _, queue = engine(clock)
    put = service._timers.put

    def slow_put(timers: Any) -> None:
        put(timers)
        clock.now += 150

    service._timers.put = slow_put  # type: ignore[method-assign]
    service.create("t", parse_job_spec(body({"rate_seconds": 10})))
    released = queue.visibility_times()  # the occurrences planned ahead, sent together
    assert min(due for _, due in released) == T0 + 10_000
    for visible_at, due in released:  # they were 150 ms late
        assert due - 1000 < visible_at <= due + LATE_SEND_MS


class FlakyQueue(MemoryQueue):
    """A queue whose `fail_on`-th send raises, as when the sweeper crashes mid-sweep."""

    def __init__(self, clock: Clock, fail_on: int) -> None:
        super().__init__(clock)
        self.sends = 0
        self.fail_on = fail_on

    def send(self, messages: Any) -> None:
        self.sends += 1
        if self.sends == self.fail_on:
            raise ConnectionError("network down")
        super().send(messages)


def test_given_a_send_that_fails_once_mid_minute_then_the_sweep_retries_it_in_halves() -> None:
    clock = Clock(T0)
    queues = {
        queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}") for r in Runtime for p in Priority
    }
    config = Settings("jobs", "timers", "runs", queues, timer_shards=1)
    jobs, timers, runs = MemoryJobStore(), MemoryTimerStore(shards=1), MemoryRunStore()
    queue = FlakyQueue(clock, fail_on=2)
    service = JobService(jobs, timers, runs, queue, config, clock=clock)
    created = [
        service.create("t", parse_job_spec(body({"at": rfc3339_ms(T0 + 300_000 + i)}))).id
        for i in range(12)
    ]
    sweeper = Sweeper(jobs, timers, queue, config, clock=clock, page_size=5)
    clock.now = T0 + 240_000

    first = sweeper.sweep()
    second = sweeper.sweep()

    # The second page's send failed; its halves went through in the same sweep.
    assert first.errors == []
    assert first.parked == 0
    assert first.messages_sent == 12
    assert second.messages_sent == 0
    assert sent(queue, clock) == Counter({(j, T0 + 300_000 + i): 1 for i, j in enumerate(created)})


class FailingStore(MemoryTimerStore):
    """A timer store whose read of a second page fails once, as when DynamoDB is unreachable
    for a moment."""

    def __init__(self, shards: int) -> None:
        super().__init__(shards)
        self.failed = False

    def read_due(
        self, minute: int, shard: int, after_key: str | None, before_ms: int, limit: int
    ) -> Any:
        if after_key is not None and not self.failed:
            self.failed = True
            raise ConnectionError("network down")
        return super().read_due(minute, shard, after_key, before_ms, limit)


def test_given_a_store_that_fails_mid_minute_then_the_next_sweep_resumes_from_the_watermark() -> (
    None
):
    clock = Clock(T0)
    queues = {
        queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}") for r in Runtime for p in Priority
    }
    config = Settings("jobs", "timers", "runs", queues, timer_shards=1)
    jobs, timers, runs = MemoryJobStore(), FailingStore(shards=1), MemoryRunStore()
    queue = MemoryQueue(clock)
    service = JobService(jobs, timers, runs, queue, config, clock=clock)
    created = [
        service.create("t", parse_job_spec(body({"at": rfc3339_ms(T0 + 300_000 + i)}))).id
        for i in range(12)
    ]
    sweeper = Sweeper(jobs, timers, queue, config, clock=clock, page_size=5)
    clock.now = T0 + 240_000

    first = sweeper.sweep()  # the read of page 2 fails
    second = sweeper.sweep()

    assert first.errors
    assert first.messages_sent == 5
    assert second.errors == []
    assert second.messages_sent == 7  # resumed after the first page, not from the start
    assert sent(queue, clock) == Counter({(j, T0 + 300_000 + i): 1 for i, j in enumerate(created)})
