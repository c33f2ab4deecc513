"""One sweeper death (a Lambda timeout, an out-of-memory kill: the invocation dies holding a
partition's lease) made a per-minute cron skip an occurrence (an outside sweep audit, round
two): the partition is taken over once its 120 s lease has run out, at the second or third
tick after the death, and with a 60 s misfire grace its occurrences were *missed* by then, so
the catch-up (`latest`, a tick a second early; `none`, always) dropped them. The default
grace is the lease and a tick (180 s) since 2026-12-01: a recovery by design is no outage.

On the twins with a hand-driven clock; the death is a BaseException (no `except Exception`
stops it), raised when the sweep hands over the page holding the chain's timer."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.timeutil import MINUTE_MS, from_ms, to_ms
from duetime.services import handover as handover_module
from duetime.services.jobs import JobService
from duetime.services.sweep import Sweeper
from duetime.settings import QueueUrls, Settings, queue_key
from tests.integration.test_overlap import Clock

T0 = to_ms(datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC))


class Died(BaseException):
    """The sweeper invocation dies here."""


def _run(monkeypatch: pytest.MonkeyPatch, catchup: str, early_tick_ms: int) -> list[str]:
    clock = Clock(T0 + 5_000)
    queues = {
        queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"d/{r}/{p}") for r in Runtime for p in Priority
    }
    settings = Settings("jobs", "timers", "runs", queues, timer_shards=1)
    jobs, timers, runs = MemoryJobStore(), MemoryTimerStore(shards=1), MemoryRunStore()
    sent: list[int] = []

    class Recording(MemoryQueue):
        def send(self, messages: Any) -> None:
            super().send(messages)
            sent.extend(m.scheduled_ms for m, _ in messages)

    queue = Recording(clock)
    service = JobService(jobs, timers, runs, queue, settings, clock=clock)
    body = {
        "schedule": {"cron": "* * * * *"},
        "target": {"type": "handler", "name": "duetime.noop"},
        "catchup": {"mode": catchup},
    }
    service.create("tenant-a", parse_job_spec(body))
    sweeper = Sweeper(jobs, timers, queue, settings, clock=clock)
    real = handover_module.HandOver.hand_over
    armed = {"die": False}

    def hand_over(self: Any, page: Any, deadline: int, report: Any) -> Any:
        if armed["die"] and any(t.message() is None for t in page):  # the chain's timer
            armed["die"] = False
            raise Died
        return real(self, page, deadline, report)

    monkeypatch.setattr(handover_module.HandOver, "hand_over", hand_over)
    death = 9  # the sweep at 10:09:05 reads bucket 10:10, the chain's timer (planned ahead)
    for minute in range(1, 40):
        clock.now = T0 + minute * MINUTE_MS + 5_000
        if minute == death + 2:
            clock.now -= early_tick_ms  # EventBridge's tick a little before the lease's end
        armed["die"] = minute == death
        with contextlib.suppress(Died):
            sweeper.sweep_shard(0)
    due = [T0 + m * MINUTE_MS for m in range(1, 36)]
    return [from_ms(d).strftime("%H:%M") for d in due if d not in sent]


@pytest.mark.parametrize(
    ("catchup", "early_tick_ms"),
    [("latest", 1_000), ("none", 0), ("latest", 0)],
    ids=["latest-tick-1s-early", "none", "latest-control"],
)
def test_one_sweeper_death_skips_no_occurrence(
    monkeypatch: pytest.MonkeyPatch, catchup: str, early_tick_ms: int
) -> None:
    never_sent = _run(monkeypatch, catchup, early_tick_ms)
    assert never_sent == []
