"""A one-off job's item outlives its run's attempts (duetime.domain.planning.hot_until): a
short hot window (`duetime local --hot-ttl-seconds 5`) expired the job under its retries. Its
run's record leaves a hot window after the run, for the archive within seconds: the reconciler
must not take the job, then without it, for one that never ran (found by a review the same
day: it sent the run again)."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.invocation import Invocation
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.targets import Target
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.services.dispatch import Dispatcher
from duetime.services.execute import RunExecutor
from duetime.services.jobs import JobService
from duetime.services.reconcile import Reconciler
from duetime.settings import QueueUrls, Settings, queue_key

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC))
HOT_SECONDS = 5


class World:
    def __init__(self) -> None:
        self.now = T0
        queues = {
            queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}")
            for r in Runtime
            for p in Priority
        }
        self.settings = Settings(
            "jobs", "timers", "runs", queues, timer_shards=1, run_ttl_seconds=HOT_SECONDS
        )
        self.jobs, self.runs = MemoryJobStore(), MemoryRunStore()
        self.timers = MemoryTimerStore(shards=1)
        self.queue = MemoryQueue(self.clock)
        self.service = JobService(
            self.jobs, self.timers, self.runs, self.queue, self.settings, clock=self.clock
        )
        self.executor = RunExecutor(
            self.jobs,
            self.runs,
            self.queue,
            self,
            self.settings,
            clock=self.clock,
            auth=self.queue.auth,
            sleep=lambda seconds: None,
            jitter=lambda: 0.5,
        )
        self.ran: list[str] = []

    def clock(self) -> int:
        return self.now

    def execute(self, target: Target, invocation: Invocation) -> None:
        self.ran.append(invocation.run_id)

    def work(self) -> None:
        while deliveries := self.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0):
            self.executor.handle(deliveries[0])
            self.queue.delete(deliveries)

    def reap(self) -> None:
        """DynamoDB TTL (duetime.local.ttl on the local stack): items past expires_at go."""
        now = self.now // 1000
        for key, run in list(self.runs._runs.items()):
            if run.expires_at is not None and run.expires_at <= now:
                del self.runs._runs[key]
        for job_key, job in list(self.jobs._jobs.items()):
            if job.expires_at is not None and job.expires_at <= now:
                del self.jobs._jobs[job_key]


def test_a_one_offs_run_record_gone_before_its_job_does_not_make_the_reconciler_send_it_again() -> (
    None
):
    world = World()
    body = {"schedule": {"at": rfc3339_ms(T0)}, "target": {"type": "http", "url": "https://x.io"}}
    job = world.service.create("t", parse_job_spec(body))
    world.work()
    run = world.runs.get(job.id, T0)
    stored = world.jobs.get("t", job.id)
    assert run is not None
    assert stored is not None
    assert run.expires_at == T0 // 1000 + HOT_SECONDS  # on its way to the archive at once
    assert stored.expires_at is not None
    assert stored.expires_at > run.expires_at  # the job outlives the run's attempts

    for seconds in range(0, 3_600, 60):  # an hour of reaping and daily-style checks
        world.now = T0 + seconds * 1000
        world.reap()
        dispatcher = Dispatcher(
            world.jobs, world.timers, world.queue, world.settings, clock=world.clock
        )
        Reconciler(
            world.jobs, world.timers, world.runs, dispatcher, world.settings, clock=world.clock
        ).reconcile()
        world.work()

    assert world.ran == [f"{job.id}-{T0}"]
