"""Dead runs (duetime.services.dead_letters) on the in-memory twins: the DLQs read without being
consumed, and runs redriven as one more attempt (the same rules on moto and through the CLI:
tests/integration/test_cli_dlq.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryDeadLetters, MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.ids import run_id
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.messages import RunMessage
from duetime.domain.runs import Lease, RunClaim, RunOutcome, RunStatus
from duetime.domain.timeutil import to_ms
from duetime.services.dead_letters import QUEUE_KEYS, DeadRuns
from duetime.services.jobs import JobService
from duetime.settings import QueueUrls, Settings, queue_key

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 7, tzinfo=UTC))
DLQ = queue_key(Runtime.LAMBDA, Priority.NORMAL)


class Parts:
    def __init__(self) -> None:
        self.now = T0
        queues = {
            queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"d/{r}/{p}")
            for r in Runtime
            for p in Priority
        }
        settings = Settings("j", "t", "r", queues, timer_shards=2)
        self.jobs = MemoryJobStore()
        self.runs = MemoryRunStore()
        self.queue = MemoryQueue(lambda: self.now)
        self.letters = MemoryDeadLetters(lambda: self.now)
        self.service = JobService(
            self.jobs, MemoryTimerStore(shards=2), self.runs, self.queue, settings, clock=self.clock
        )
        self.dead_runs = DeadRuns(self.jobs, self.runs, self.queue, self.letters, self.queue.auth)

    def clock(self) -> int:
        return self.now

    def failed_run(self, *, signed: bool = True) -> RunMessage:
        """A job whose run failed its last attempt (1 of 1): its message is in the DLQ."""
        job = self.service.create(
            "acme",
            parse_job_spec(
                {"schedule": {"delay_seconds": 600}, "target": {"type": "handler", "name": "x.y"}}
            ),
        )
        assert job.next_due_ms is not None
        message = RunMessage("acme", job.id, job.next_due_ms, 1, job.next_due_ms)
        lease = Lease("m-1", 1, job.next_due_ms + 60_000)
        self.runs.claim(RunClaim("acme", job.id, job.next_due_ms, 1, lease, job.next_due_ms, 0, 0))
        run = self.runs.get(job.id, job.next_due_ms)
        assert run is not None
        self.runs.finish(run, RunOutcome(RunStatus.FAILED, job.next_due_ms + 10, "boom"))
        body = self.queue.auth.seal(message) if signed else message.to_json()
        self.letters.add(DLQ, body, "attempt 1 of 1: boom")
        return message


def test_given_a_failed_run_when_redriven_then_it_is_sent_as_the_next_attempt_and_leaves() -> None:
    parts = Parts()
    message = parts.failed_run()
    parts.now = T0 + 3_600_000

    report = parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    assert [(d.run_id, attempt) for d, attempt in report.redriven] == [
        (run_id(message.job_id, message.scheduled_ms), 2)
    ]
    assert report.skipped == []
    (delivery,) = parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 10, 0)
    sent = parts.queue.auth.open(delivery.body)
    assert (sent.job_id, sent.attempt, sent.due_ms) == (message.job_id, 2, parts.now)
    run = parts.runs.get(message.job_id, message.scheduled_ms)
    assert run is not None
    assert run.status == RunStatus.RETRYING  # reopened: the claim admits attempt 2
    assert parts.letters.approximate_count(DLQ) == 0
    assert parts.letters.receive(DLQ, 10, 0) == []


def test_given_an_unsigned_message_when_redriven_then_it_is_skipped_and_stays_in_the_dlq() -> None:
    parts = Parts()
    parts.failed_run(signed=False)

    report = parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    assert report.redriven == []
    assert [why for _, why in report.skipped] == [
        "the message is not signed by duetime: never sent back"
    ]
    assert parts.queue.depth() == 0
    assert parts.letters.approximate_count(DLQ) == 1


def test_given_dead_runs_when_redriven_by_run_id_then_only_that_one_moves() -> None:
    parts = Parts()
    first = parts.failed_run()
    second = parts.failed_run()

    report = parts.dead_runs.redrive(
        [DLQ],
        run_ids={run_id(second.job_id, second.scheduled_ms)},
        limit=None,
        now_ms=parts.now,
    )

    assert [d.message for d, _ in report.redriven] == [second]
    (left,) = parts.letters.receive(DLQ, 10, 0)
    assert parts.queue.auth.open(left.body) == first


def test_given_dead_runs_when_read_then_they_come_oldest_first_and_stay_in_the_dlq() -> None:
    parts = Parts()
    older = parts.failed_run()
    parts.now += 5_000
    newer = parts.failed_run()
    parts.now += 5_000
    parts.letters.add(queue_key(Runtime.FARGATE, Priority.LOW), "not json")

    dead, total = parts.dead_runs.read(QUEUE_KEYS, 10)

    assert total == 3
    assert [(d.queue, d.message) for d in dead] == [
        (DLQ, older),
        (DLQ, newer),
        ("fargate/low", None),
    ]
    assert [d.signed for d in dead] == [True, True, False]
    assert parts.letters.approximate_count(DLQ) == 2  # read, then released at once
    assert [d.message for d in parts.dead_runs.read([DLQ], 1)[0]] == [older]
