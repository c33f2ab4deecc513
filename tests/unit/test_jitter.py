"""Jitter: the pure offset of an occurrence, and where it shows (messages, timers, runs)."""

from __future__ import annotations

import argparse
from collections import Counter

import pytest

from duetime.cli.job_body import job_body
from duetime.cli.jobs import register
from duetime.domain.errors import ValidationError
from duetime.domain.jobs import Job, JobStatus, jitter_offset_ms, parse_job_spec
from duetime.domain.messages import run_message
from duetime.domain.runs import Lease, RunClaim, claimed_run
from duetime.domain.timers import Timer

NOW = 1_795_000_000_000
JOB = "01KAAAAAAAAAAAAAAAAAAAAAAA"
TARGET = {"type": "handler", "name": "test.record"}


def job(jitter: int) -> Job:
    spec = parse_job_spec(
        {"schedule": {"rate_seconds": 60}, "target": TARGET, "jitter_seconds": jitter}
    )
    return Job("t", JOB, spec, JobStatus.SCHEDULED, NOW, NOW)


def test_the_offset_is_a_pure_function_of_job_and_occurrence() -> None:
    first = [jitter_offset_ms(JOB, NOW + i * 60_000, 600) for i in range(100)]
    again = [jitter_offset_ms(JOB, NOW + i * 60_000, 600) for i in range(100)]
    assert first == again
    # Another job at the same instants is spread differently.
    assert first != [
        jitter_offset_ms("01KBBBBBBBBBBBBBBBBBBBBBBB", NOW + i * 60_000, 600) for i in range(100)
    ]


@pytest.mark.parametrize("jitter", [1, 7, 60, 900])
def test_the_offset_is_whole_milliseconds_in_zero_to_the_window(jitter: int) -> None:
    offsets = [jitter_offset_ms(f"job-{i}", NOW, jitter) for i in range(2_000)]
    assert all(isinstance(o, int) and 0 <= o < jitter * 1000 for o in offsets)


def test_no_jitter_is_no_offset() -> None:
    assert {jitter_offset_ms(f"job-{i}", NOW + i, 0) for i in range(100)} == {0}


def test_the_offsets_of_one_instant_spread_evenly_over_the_window() -> None:
    # 10,000 jobs sharing a top-of-the-minute instant, over a 100 s window in 10 bins.
    bins = Counter(jitter_offset_ms(f"job-{i}", NOW, 100) // 10_000 for i in range(10_000))
    assert sorted(bins) == list(range(10))
    assert all(850 <= n <= 1_150 for n in bins.values()), bins
    # And one job's occurrences spread too.
    own = Counter(jitter_offset_ms(JOB, NOW + i * 1000, 100) // 10_000 for i in range(10_000))
    assert all(850 <= n <= 1_150 for n in own.values()), own


@pytest.mark.parametrize("value", [-1, 901, "5", True, 1.5, None])
def test_jitter_seconds_is_validated(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec(
            {"schedule": {"rate_seconds": 60}, "target": TARGET, "jitter_seconds": value}
        )
    assert caught.value.field == "jitter_seconds"


def test_a_run_message_is_due_at_the_jittered_instant_and_keeps_the_nominal_run() -> None:
    jittered = job(300)
    message = run_message(jittered, NOW)
    assert message.scheduled_ms == NOW
    assert message.due_ms == NOW + jitter_offset_ms(JOB, NOW, 300) == jittered.due_ms(NOW)
    assert run_message(jittered, NOW, jittered=False).due_ms == NOW  # a run-now
    assert run_message(job(0), NOW).due_ms == NOW


def test_a_one_off_timer_carries_its_offset_into_its_message() -> None:
    timer = Timer(
        "t", JOB, NOW, runtime=job(0).spec.runtime, priority=job(0).spec.priority, jitter_ms=4_321
    )
    message = timer.message()
    assert message is not None
    assert (message.scheduled_ms, message.due_ms) == (NOW, NOW + 4_321)


def test_a_run_keeps_the_due_instant_of_its_first_claim() -> None:
    def claim(attempt: int, due_ms: int) -> RunClaim:
        lease = Lease(f"m{attempt}", 1, NOW + 60_000)
        return RunClaim("t", JOB, NOW, attempt, lease, NOW + 9_000, 0, 0, due_ms=due_ms)

    first = claimed_run(None, claim(1, NOW + 7_000))
    second = claimed_run(first, claim(2, NOW + 99_000))
    assert (first.due_ms, second.due_ms) == (NOW + 7_000, NOW + 7_000)


def test_the_cli_sends_jitter_as_jitter_seconds() -> None:
    parser = argparse.ArgumentParser(prog="duetime")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        ["jobs", "create", "--rate", "60", "--handler", "h", "--jitter", "120"]
    )
    assert job_body(args) == {
        "schedule": {"rate_seconds": 60},
        "target": {"type": "handler", "name": "h"},
        "jitter_seconds": 120,
    }
