"""scripts/bench.py's job bodies run at any start time: submitted by the real job service (on
the in-memory twins) at a fake `now` anywhere in the minute, and even late, into the scenario's
window, none is refused with "schedule: has no occurrence in the future"."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.timeutil import to_ms
from duetime.services.jobs import JobService
from duetime.settings import QueueUrls, Settings, queue_key
from tests.unit.test_bench import bench

MINUTE = to_ms(datetime(2026, 11, 24, 10, 0, 0, tzinfo=UTC))  # a minute boundary
# Where in the minute the bench starts: on the boundary, just after, mid-minute, 10 s and
# 1 ms before the next boundary.
PHASES_MS = [0, 1, 7_250, 30_000, 49_000, 50_000, 55_000, 59_999]


class Service:
    """The job service on in-memory twins, its clock set by hand."""

    def __init__(self, now: int) -> None:
        self.now = now
        queues = {
            queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"d/{r}/{p}")
            for r in Runtime
            for p in Priority
        }
        settings = Settings("j", "t", "r", queues, timer_shards=2)
        self.service = JobService(
            MemoryJobStore(),
            MemoryTimerStore(shards=2),
            MemoryRunStore(),
            MemoryQueue(lambda: self.now),
            settings,
            clock=lambda: self.now,
        )

    def submit_at(self, now: int, raw: dict[str, Any]) -> Any:
        self.now = now
        return self.service.create("bench", parse_job_spec(raw))


def distinct(raws: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list({json.dumps(r, sort_keys=True): r for r in raws}.values())


@pytest.mark.parametrize("phase", PHASES_MS)
@pytest.mark.parametrize(("rate", "seconds"), [(20, 10), (100, 30)])  # --quick, full
def test_given_any_start_in_the_minute_then_every_steady_body_is_accepted_until_the_window_ends(
    phase: int, rate: int, seconds: int
) -> None:
    # Given the steady plan built at `now`, with the bench's lead
    now = MINUTE + phase
    lead = int(rate * seconds / bench.SUBMIT_RATE * 1000) + 5000
    plan = bench.steady_plan(now, rate, seconds, lead)
    assert plan.start_ms == now + lead
    assert plan.end_ms == plan.start_ms + seconds * 1000
    assert len(plan.raws) == rate * seconds
    assert {kind for _, kind in plan.recurring} == {"rate", "cron"}

    # When each kind of body is submitted at any instant from now to the window's end
    # (a busy machine may still be submitting once the window has begun)
    service = Service(now)
    recurring = distinct([plan.raws[i] for i, _ in plan.recurring])
    one_offs = [plan.raws[i] for i in (plan.one_off[0], plan.one_off[-1])]
    for raw in recurring + one_offs:
        for submitted in range(now, plan.end_ms + 1, 500):
            job = service.submit_at(submitted, raw)

            # Then it is accepted with a first occurrence
            assert job.next_due_ms is not None


@pytest.mark.parametrize("phase", PHASES_MS)
def test_given_a_window_inside_one_minute_then_the_cron_job_still_has_an_occurrence(
    phase: int,
) -> None:
    # 10 s before a boundary, a 10 s window that starts after the boundary crosses none
    now = MINUTE + phase
    plan = bench.steady_plan(now, 20, 10, 8_333)
    cron = next(plan.raws[i] for i, kind in plan.recurring if kind == "cron")

    job = Service(now).submit_at(plan.end_ms, cron)  # submitted as late as the window's end

    assert job.next_due_ms is not None
    assert plan.end_ms <= job.next_due_ms <= plan.end_ms + 60_000
    assert job.next_due_ms % 60_000 == 0


@pytest.mark.parametrize("phase", PHASES_MS)
def test_given_any_start_then_the_steady_one_offs_are_due_in_the_window_at_the_rate(
    phase: int,
) -> None:
    plan = bench.steady_plan(MINUTE + phase, 20, 10, 8_333)
    dues = [plan.dues[i] for i in plan.one_off]
    assert all(plan.start_ms <= d < plan.end_ms for d in dues)
    assert len(plan.one_off) == 180  # 90 % of 200
    assert sum(1 for i in plan.one_off if 2 <= i % 20 < 6) == 40  # submitted as delay_seconds


@pytest.mark.parametrize("phase", PHASES_MS)
def test_given_any_start_then_every_burst_body_is_accepted_at_its_second(phase: int) -> None:
    now = MINUTE + phase
    due = (now + 8_333) // 1000 * 1000
    bodies = bench.burst_bodies(due, 200)
    service = Service(now)

    jobs = [service.submit_at(now + 500, raw) for raw in bodies]

    assert len(jobs) == 200
    assert all(due <= j.next_due_ms < due + 1000 for j in jobs)


@pytest.mark.parametrize("phase", PHASES_MS)
def test_given_any_start_then_the_cron_top_of_minute_job_is_due_at_that_minute_once(
    phase: int,
) -> None:
    now = MINUTE + phase
    lead = 3 * 60_000 + 3_333
    due, raw = bench.cron_top_plan(now, lead)
    assert due % 60_000 == 0
    assert now + lead < due <= now + lead + 60_000

    service = Service(now)
    for submitted in range(now, now + lead, 10_000):
        job = service.submit_at(submitted, raw)
        assert job.next_due_ms == due


@pytest.mark.parametrize("phase", PHASES_MS)
@pytest.mark.parametrize(("rate", "seconds"), [(20, 10), (100, 30)])  # --quick, full
def test_given_any_start_then_every_recurring_body_has_runs_the_bench_expects_by_schedule(
    phase: int, rate: int, seconds: int
) -> None:
    # Given the steady plan built at any phase, its recurring bodies submitted at any instant
    # from now to the window's end
    now = MINUTE + phase
    lead = int(rate * seconds / bench.SUBMIT_RATE * 1000) + 5000
    plan = bench.steady_plan(now, rate, seconds, lead)
    # every recurring occurrence is awaited: at most a minute after the window
    assert plan.end_ms + 10_000 <= plan.recurring_end_ms <= plan.end_ms + 60_000
    service = Service(now)
    by_kind = {kind: plan.raws[i] for i, kind in plan.recurring}
    for kind, raw in by_kind.items():
        for submitted in range(now, plan.end_ms + 1, 1_000):
            job = service.submit_at(submitted, raw)

            # When the bench builds its expected runs from the job's schedule
            runs = bench.recurring_occurrences(
                job.id, job.spec.schedule, job.created_ms, plan.recurring_end_ms
            )

            # Then each job (the cron share too, whether or not the window crosses a minute)
            # has at least one, the first being the one the job service planned, all within
            # the job's life and none before its creation
            assert runs, (kind, submitted)
            assert runs[0][1] == job.next_due_ms
            assert all(submitted <= ms <= plan.recurring_end_ms for _, ms in runs)
            if kind == "cron":
                assert all(ms % 60_000 == 0 for _, ms in runs)
            else:
                assert [ms for _, ms in runs] == list(
                    range(submitted + 10_000, plan.end_ms + 10_001, 10_000)
                )
