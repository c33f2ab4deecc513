"""Dead runs (duetime.services.dead_letters) on the in-memory twins: the DLQs read without being
consumed, and runs redriven as one more attempt (the same rules on moto and through the CLI:
tests/integration/test_cli_dlq.py)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryDeadLetters, MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.cli.dlq import run_redrive
from duetime.domain.ids import run_id
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.messages import RunMessage
from duetime.domain.overlap import Gate
from duetime.domain.runs import Lease, RunClaim, RunOutcome, RunStatus
from duetime.domain.timeutil import to_ms
from duetime.ports import QueueError
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

    def failed_run(self, *, signed: bool = True, **spec: Any) -> RunMessage:
        """A job whose run failed its last attempt (1 of 1): its message is in the DLQ."""
        body = {"schedule": {"delay_seconds": 600}, "target": {"type": "handler", "name": "x.y"}}
        job = self.service.create("acme", parse_job_spec(body | spec))
        assert job.next_due_ms is not None
        message = RunMessage("acme", job.id, job.next_due_ms, 1, job.next_due_ms)
        self.ended(message, RunStatus.FAILED)
        body_text = self.queue.auth.seal(message) if signed else message.to_json()
        self.letters.add(DLQ, body_text, "attempt 1 of 1: boom")
        return message

    def ended(self, message: RunMessage, status: RunStatus | None) -> None:
        """Its run claimed, and ended so (None: left running)."""
        lease = Lease("m-1", 1, message.scheduled_ms + 60_000)
        claim = RunClaim(
            "acme", message.job_id, message.scheduled_ms, 1, lease, message.due_ms, 0, 0
        )
        self.runs.claim(claim)
        run = self.runs.get(message.job_id, message.scheduled_ms)
        assert run is not None
        if status is not None:
            self.runs.finish(run, RunOutcome(status, message.scheduled_ms + 10, "boom"))


def test_given_a_failed_run_when_redriven_then_it_is_sent_as_the_next_attempt_and_leaves() -> None:
    parts = Parts()
    message = parts.failed_run()
    parts.now = T0 + 3_600_000

    report = parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    assert [(d.run_id, attempt) for d, attempt, _ in report.redriven] == [
        (run_id(message.job_id, message.scheduled_ms), 2)
    ]
    assert report.skipped == []
    (delivery,) = parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 10, 0)
    sent = parts.queue.auth.open(delivery.body)
    assert (sent.job_id, sent.attempt, sent.due_ms) == (message.job_id, 2, parts.now)
    assert sent.redriven  # (signed: it goes on beside an overlap gate's holder)
    assert not message.redriven
    assert '"redriven"' not in message.to_json()
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

    assert [d.message for d, *_ in report.redriven] == [second]
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


def test_given_a_job_moved_to_another_queue_then_its_redriven_run_goes_to_the_new_one() -> None:
    # Found by an outside audit: sent back to the lambda queue it died on, a run of a job moved
    # to fargate (for a timeout Lambda cannot hold) could never run there.
    parts = Parts()
    message = parts.failed_run()
    job = parts.jobs.get("acme", message.job_id)
    assert job is not None
    moved = replace(job.spec, runtime=Runtime.FARGATE, priority=Priority.HIGH)
    parts.jobs.replace(replace(job, spec=moved, version=job.version + 1), expected=job)

    report = parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    assert [queue for *_, queue in report.redriven] == ["fargate/high"]
    assert parts.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 10, 0) == []
    (delivery,) = parts.queue.receive(Runtime.FARGATE, Priority.HIGH, 10, 0)
    assert parts.queue.auth.open(delivery.body).attempt == 2


def test_given_another_occurrence_holding_the_gate_then_a_gated_run_is_redriven_all_the_same() -> (
    None
):
    # Refused until another occurrence had ended (the worker dropped the attempt as a late copy
    # then: an outside audit), it could never go back for a job whose runs outlast their
    # period. A later attempt of its run goes on beside the holder since 2026-12-01 (a review).
    parts = Parts()
    message = parts.failed_run(schedule={"rate_seconds": 60}, overlap="skip")
    holder = replace(message, scheduled_ms=message.scheduled_ms + 60_000)
    parts.now = holder.scheduled_ms + 1_000
    parts.ended(holder, None)  # running
    assert parts.jobs.put_gate("acme", message.job_id, Gate(holder.scheduled_ms, parts.now), 0)

    report = parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    assert [attempt for _, attempt, _ in report.redriven] == [2]
    assert report.skipped == []
    assert parts.letters.approximate_count(DLQ) == 0


def test_given_a_redrive_that_stops_on_a_failed_send_then_its_whole_batch_is_visible_again() -> (
    None
):
    parts = Parts()
    for _ in range(3):
        parts.failed_run()

    def refused(messages: object) -> None:
        raise QueueError("SQS did not take the batch")

    parts.queue.send = refused  # type: ignore[method-assign]
    with pytest.raises(QueueError):
        parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    assert len(parts.letters.receive(DLQ, 10, 0)) == 3  # none left hidden for a minute


@pytest.mark.parametrize("status", [RunStatus.FAILED, None])
def test_given_a_redrive_whose_send_fails_then_the_run_stays_failed(
    status: RunStatus | None,
) -> None:
    # It was reopened (`retrying`) before the send, and stayed so with no retry coming: a
    # one-off read `scheduled` again (an outside fault audit, round ten). None: a run left
    # `running` by a worker that died, its lease over.
    parts = Parts()
    message = parts.failed_run()
    if status is None:
        parts.runs._runs.clear()
        parts.ended(message, None)
        parts.now += 3_600_000

    def refused(messages: object) -> None:
        raise QueueError("SQS did not take the batch")

    parts.queue.send = refused  # type: ignore[method-assign]
    with pytest.raises(QueueError):
        parts.dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=parts.now)

    run = parts.runs.get(message.job_id, message.scheduled_ms)
    assert run is not None
    assert (run.status, run.attempt) == (RunStatus.FAILED, 1)
    assert parts.service.get("acme", message.job_id).status.value == "failed"


def test_given_a_limit_then_the_wanted_runs_it_leaves_are_reported_as_left() -> None:
    parts = Parts()
    first, second = parts.failed_run(), parts.failed_run()
    wanted = {run_id(m.job_id, m.scheduled_ms) for m in (first, second)}

    report = parts.dead_runs.redrive(QUEUE_KEYS, run_ids=wanted, limit=1, now_ms=parts.now)

    assert len(report.redriven) == 1
    assert [d.run_id for d in report.deferred] == sorted(wanted - {report.redriven[0][0].run_id})


def test_given_a_limit_then_the_oldest_dead_runs_of_every_queue_are_listed() -> None:
    parts = Parts()
    older = parts.failed_run()  # lambda/normal
    parts.now += 60_000
    newer = replace(older, runtime=Runtime.LAMBDA, priority=Priority.HIGH)
    parts.letters.add(queue_key(Runtime.LAMBDA, Priority.HIGH), parts.queue.auth.seal(newer))

    dead, total = parts.dead_runs.read(QUEUE_KEYS, 1)  # lambda/high is read first

    assert total == 2
    assert [d.message for d in dead] == [older]


def test_given_a_limit_then_a_named_run_it_stops_before_is_left_not_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # (Found by review: a run in a queue read after the limit was reached was "not in the
    # DLQs", exit 1.)
    parts = Parts()
    first = parts.failed_run()  # lambda/normal
    second = replace(first, job_id=parts.failed_run().job_id)
    for letter in parts.letters.receive(DLQ, 10, 0):
        parts.letters.delete(letter)
    parts.letters.add(DLQ, parts.queue.auth.seal(first))
    parts.letters.add(queue_key(Runtime.FARGATE, Priority.LOW), parts.queue.auth.seal(second))
    wanted = sorted(run_id(m.job_id, m.scheduled_ms) for m in (first, second))
    monkeypatch.setattr("duetime.wiring.dead_runs", lambda _: parts.dead_runs)
    monkeypatch.setattr("duetime.cli.dlq.deployment", lambda _: None)

    code = run_redrive(argparse.Namespace(queues=None, run_ids=wanted, limit=1))

    out = capsys.readouterr().out
    assert code == 0
    assert f"left      {run_id(second.job_id, second.scheduled_ms)}" in out
