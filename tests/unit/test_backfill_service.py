"""The backfill service (duetime.services.backfill) over the in-memory twins: which occurrences
it sends, as what messages, in what batches, and which jobs it refuses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from duetime.domain.errors import IllegalTransition, NotFound, ValidationError
from duetime.domain.jobs import parse_job_spec
from duetime.domain.messages import RunMessage, delay_seconds
from duetime.domain.runs import Run, RunStatus
from duetime.domain.timeutil import rfc3339_ms
from duetime.services.backfill import SEND_CHUNK, Backfill
from tests.unit.test_job_service import T0, Parts

MINUTE = 60_000


class SpyQueue:
    """Records each send (one list per call) and passes it on to the twin."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.sends: list[list[tuple[RunMessage, int]]] = []

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        self.sends.append(list(messages))
        self.parts.queue.send(messages)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parts.queue, name)


@pytest.fixture
def parts() -> Parts:
    return Parts()


def backfiller(parts: Parts) -> tuple[Backfill, SpyQueue]:
    spy = SpyQueue(parts)
    return Backfill(parts.service, parts.runs, spy, parts.settings, clock=lambda: parts.now), spy


def create(parts: Parts, schedule: dict[str, Any], **extra: Any) -> str:
    body = {"schedule": schedule, "target": {"type": "handler", "name": "x.y"}, **extra}
    return parts.service.create("tenant-a", parse_job_spec(body)).id


def body(start: int, end: int) -> Any:
    return lambda: {"from": rfc3339_ms(start), "to": rfc3339_ms(end)}


def test_only_occurrences_without_a_run_record_are_sent_as_first_attempts(parts: Parts) -> None:
    job_id = create(parts, {"rate_seconds": 60}, jitter_seconds=300)
    parts.now = T0 + 10 * MINUTE + 500
    occurrences = [T0 + k * MINUTE for k in range(1, 11)]
    for ms, status in ((occurrences[0], RunStatus.SUCCEEDED), (occurrences[3], RunStatus.SKIPPED)):
        parts.runs.record(Run("tenant-a", job_id, ms, status, 1))
    service, spy = backfiller(parts)

    sent = service.backfill("tenant-a", job_id, body(T0, parts.now))

    job = parts.jobs.get("tenant-a", job_id)
    assert job is not None
    expected = [ms for ms in occurrences if ms not in (occurrences[0], occurrences[3])]
    assert sent == len(expected) == 8
    (batch,) = spy.sends
    assert [m.scheduled_ms for m, _ in batch] == expected
    ahead = 0
    for message, delay in batch:
        assert (message.attempt, message.generation) == (1, job.generation)
        assert (message.tenant, message.job_id) == ("tenant-a", job_id)
        if job.due_ms(message.scheduled_ms) <= parts.now:
            assert (message.due_ms, delay, message.asked_ms) == (parts.now, 0, parts.now)
        else:  # one whose jittered start is still to come: for that start, a copy of its own
            ahead += 1  # (not asked: which of the two is claimed first, its `after` runs are
            # those of the jobs there are then; a review)
            assert (message.due_ms, message.asked_ms) == (job.due_ms(message.scheduled_ms), None)
            assert delay == delay_seconds(message.due_ms, parts.now) > 0
    assert 0 < ahead < 8


def on_its_way(parts: Parts) -> tuple[str, int]:
    """A minutely job with 900 s of jitter, and the clock just past the instant of one of its
    occurrences whose jittered start is still to come: (its id, that instant)."""
    job_id = create(parts, {"rate_seconds": 60}, jitter_seconds=900)
    job = parts.jobs.get("tenant-a", job_id)
    assert job is not None
    ahead = next(k for k in range(1, 50) if job.due_ms(T0 + k * MINUTE) > T0 + k * MINUTE + 2000)
    instant = T0 + ahead * MINUTE
    parts.now = instant + 500  # past its instant, before its jittered start
    return job_id, instant


def test_an_occurrence_whose_jittered_start_is_still_to_come_is_sent_for_that_start(
    parts: Parts,
) -> None:
    # It was sent at once: it ran early, and under `skip` met the backfill's others at the
    # gate and was recorded `skipped` (an outside lifecycle audit, round five). Then it was
    # left to its own message, which the catch-up after downtime may have dropped (round
    # seven): sent for its start, a copy of one on its way makes one run with it.
    job_id, instant = on_its_way(parts)
    job = parts.jobs.get("tenant-a", job_id)
    assert job is not None
    service, spy = backfiller(parts)

    sent = service.backfill("tenant-a", job_id, body(instant, instant + 1))

    assert sent == 1
    ((message, delay),) = spy.sends[0]
    assert (message.scheduled_ms, message.due_ms) == (instant, job.due_ms(instant))
    assert delay == delay_seconds(job.due_ms(instant), parts.now) > 0


def test_an_occurrence_on_its_way_before_a_pause_and_resume_is_sent_its_message_is_dropped(
    parts: Parts,
) -> None:
    # Its message, of the generation before, is dropped by the worker: left to it, the
    # occurrence never ran (an outside lifecycle audit, round six).
    job_id, instant = on_its_way(parts)
    parts.service.pause("tenant-a", job_id)
    parts.service.resume("tenant-a", job_id)
    service, spy = backfiller(parts)

    sent = service.backfill("tenant-a", job_id, body(instant, instant + 1))

    assert sent == 1
    assert [m.scheduled_ms for m, _ in spy.sends[0]] == [instant]


def test_many_occurrences_go_out_in_chunks(parts: Parts) -> None:
    job_id = create(parts, {"rate_seconds": 1})
    parts.now = T0 + 1000 * 1000
    service, spy = backfiller(parts)

    sent = service.backfill("tenant-a", job_id, body(T0, T0 + 1000 * 1000))

    assert sent == 999
    assert [len(s) for s in spy.sends] == [SEND_CHUNK] * 9 + [99]


def test_an_empty_range_sends_nothing(parts: Parts) -> None:
    job_id = create(parts, {"rate_seconds": 3600})
    parts.now = T0 + 10 * MINUTE
    service, spy = backfiller(parts)

    assert service.backfill("tenant-a", job_id, body(T0, parts.now)) == 0
    assert spy.sends == []


def test_the_job_is_checked_before_the_body_is_read(parts: Parts) -> None:
    service, _ = backfiller(parts)

    def unreadable() -> object:
        raise AssertionError("the body was read")

    with pytest.raises(NotFound):
        service.backfill("tenant-a", "01KAAAAAAAAAAAAAAAAAAAAAAA", unreadable)
    job_id = create(parts, {"rate_seconds": 60})
    with pytest.raises(NotFound):
        service.backfill("tenant-b", job_id, unreadable)


def test_one_off_paused_and_cancelled_jobs_are_refused(parts: Parts) -> None:
    one_off = create(parts, {"delay_seconds": 600})
    paused = create(parts, {"rate_seconds": 60})
    parts.service.pause("tenant-a", paused)
    cancelled = create(parts, {"rate_seconds": 60})
    parts.service.cancel("tenant-a", cancelled)
    parts.now = T0 + 10 * MINUTE
    service, spy = backfiller(parts)

    for job_id in (one_off, paused, cancelled):
        with pytest.raises(IllegalTransition):
            service.backfill("tenant-a", job_id, body(T0, parts.now))
    assert spy.sends == []


def test_from_before_the_hot_window_is_refused(parts: Parts) -> None:
    job_id = create(parts, {"rate_seconds": 60})
    parts.now = T0 + parts.settings.run_ttl_seconds * 1000 + MINUTE
    service, _ = backfiller(parts)

    with pytest.raises(ValidationError) as raised:
        service.backfill("tenant-a", job_id, body(T0, parts.now))

    assert raised.value.field == "from"
