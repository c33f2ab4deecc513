"""The daily reconciler when some of its reads fail (a throttled BatchGetItem, a scan page that
does not come): the other jobs are still checked, and a one-off it could not check then is
still checked by the next day's run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.jobs import Job
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms
from duetime.ports import CounterRead, KeyCount, StoreError
from tests.integration.test_partitioned_sweep import T0, Twins

HOUR = 60 * MINUTE_MS


class ThrottledFind(MemoryTimerStore):
    def __init__(self, shards: int) -> None:
        super().__init__(shards=shards)
        self.fail_next = 0

    def find(self, timers: Any, *, anywhere: bool = False) -> Any:
        if self.fail_next:
            self.fail_next -= 1
            raise StoreError("BatchGetItem: keys still unprocessed after 8 rounds")
        return super().find(timers, anywhere=anywhere)


def with_a_lost_one_off() -> tuple[Twins, ThrottledFind, str]:
    """A healthy recurring job (its chain is read by the check) created before a one-off whose
    timer was lost; the clock at the daily run, 6 hours after the one-off's instant."""
    twins = Twins(shards=1)
    store = ThrottledFind(shards=1)
    twins.use_timers(store)
    twins.submit({"rate_seconds": 3600, "start_at": rfc3339_ms(T0 + HOUR)})
    due = T0 + 30 * MINUTE_MS
    lost = twins.submit({"at": rfc3339_ms(due)})
    for partition in store._timers.values():  # its timer removed (by hand, say)
        for key in [k for k, t in partition.items() if t.job_id == lost]:
            del partition[key]
    assert not twins.sent()
    twins.clock.now = due + 6 * HOUR
    return twins, store, lost


def sent_jobs(twins: Twins) -> set[str]:
    return {job_id for job_id, _ in twins.sent()}


def test_given_a_throttled_timer_read_then_the_overdue_one_offs_are_still_sent() -> None:
    # One failed read aborted the segment: the one-offs gathered so far were not checked, the
    # run raised, and the next (24 h on) found the one-off out of its 26-hour window: lost.
    twins, store, lost = with_a_lost_one_off()
    store.fail_next = 1

    report = twins.reconciler(segments=1).reconcile()

    assert lost in sent_jobs(twins)
    assert report.failed == 1  # the recurring job whose chain could not be read


def test_given_a_reconcile_that_could_not_check_a_one_off_then_the_next_day_s_does() -> None:
    twins, store, lost = with_a_lost_one_off()
    store.fail_next = 10**6  # every chain read fails today
    original = twins.runs.get_many
    twins.runs.get_many = lambda keys: (_ for _ in ()).throw(StoreError("throttled"))  # type: ignore[method-assign]
    twins.reconciler(segments=1).reconcile()
    assert lost not in sent_jobs(twins)

    twins.runs.get_many = original  # type: ignore[method-assign]
    store.fail_next = 0
    twins.clock.now += 24 * HOUR  # 30 hours after its instant
    twins.reconciler(segments=1).reconcile()

    assert lost in sent_jobs(twins)


def test_given_a_scan_that_fails_part_way_then_no_counter_is_set_from_a_partial_count() -> None:
    # A counter set from the jobs counted before the scan failed would be too low: the
    # tenant could then go past its quota. Left as it is, the next run sets it.
    twins = Twins(shards=1)
    for _ in range(3):
        twins.submit({"rate_seconds": 3600})

    class FailingScan(MemoryJobStore):
        def scan_active(
            self,
            segment: int,
            segments: int,
            counters: dict[str, CounterRead] | None = None,
            keys: Callable[[KeyCount], None] | None = None,
        ) -> Iterator[Job]:
            for n, job in enumerate(super().scan_active(segment, segments, counters, keys)):
                if n == 1:
                    raise StoreError("Scan: throttled")
                yield job

    failing = FailingScan()
    failing.__dict__.update(twins.jobs.__dict__)
    failing._recurring["t"] = 4  # one leaked: the recount would set 3
    twins.jobs = failing

    report = twins.reconciler(segments=2).reconcile()

    assert report.incomplete
    assert failing.recurring_count("t") == 4  # not 1 (what the scan counted before it failed)
