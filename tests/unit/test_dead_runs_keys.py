"""The DLQ tools meeting messages signed with a key since retired (or forged): listed as not
signed, skipped by a redrive ("never sent back"), deleted on request. A review of this
session's change found the second such message stopped every tool (the keys reader handed it
back as KeysUnavailable); `duetime dlq redrive` met KeysUnavailable with a traceback."""

from __future__ import annotations

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryDeadLetters, MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.message_keys import KeysOnFirstUse
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.services.dead_letters import QUEUE_KEYS, DeadRuns

NOW = 1_795_255_200_000
QUEUE = "lambda/normal"
RETIRED, CURRENT = "r" * 32, "c" * 32


def _dlq() -> tuple[DeadRuns, MemoryDeadLetters]:
    now = [NOW]

    def clock() -> int:  # the CLI's wall clock: a millisecond between reads of it
        now[0] += 1
        return now[0]

    auth = KeysOnFirstUse(lambda: CURRENT, clock=clock)  # as wiring.message_auth builds it
    letters = MemoryDeadLetters(clock)
    for i in (1, 2):  # two runs signed with a key since retired (or forged: the same to a worker)
        message = RunMessage(
            "t", f"01JOB{i}", NOW - 60_000, 1, NOW - 60_000, Runtime.LAMBDA, Priority.NORMAL
        )
        letters.add(QUEUE, MessageAuth.from_text(RETIRED).seal(message), None)
    queue = MemoryQueue(clock, auth=auth)
    return DeadRuns(MemoryJobStore(), MemoryRunStore(), queue, letters, auth), letters


def test_dlq_list_shows_them_as_not_signed() -> None:
    dead_runs, _ = _dlq()
    dead, total = dead_runs.read(QUEUE_KEYS, 100)
    assert total == 2
    assert [d.signed for d in dead] == [False, False]


def test_dlq_redrive_skips_them() -> None:
    dead_runs, _ = _dlq()
    report = dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=NOW + 1_000)
    assert report.redriven == []
    assert [why for _, why in report.skipped] == [
        "the message is not signed by duetime: never sent back"
    ] * 2


def test_dlq_delete_removes_them() -> None:
    dead_runs, letters = _dlq()
    deleted = dead_runs.delete(QUEUE_KEYS, {"d1", "d2"})
    assert len(deleted) == 2
    assert letters.approximate_count(QUEUE) == 0


def test_dlq_redrive_command_ends_with_its_report_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cli/dlq.py run_redrive catches (BotoCoreError, ClientError, StoreError, QueueError,
    # KeyboardInterrupt): KeysUnavailable (a RuntimeError) goes through as a traceback.
    import argparse

    from duetime import wiring
    from duetime.cli import dlq

    dead_runs, _ = _dlq()
    monkeypatch.setattr(dlq, "deployment", lambda args: None)
    monkeypatch.setattr(wiring, "dead_runs", lambda parts: dead_runs)
    args = argparse.Namespace(queues=None, run_ids=None, limit=None)
    assert dlq.run_redrive(args) in (0, 1)  # the report, or "redrive stopped: …"
