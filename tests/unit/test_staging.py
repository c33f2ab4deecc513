"""`stage_seconds`: validated, stored with the job and with a one-off's timer, carried by the
run message (and absent from it when 0, so messages signed before it still verify), and sent
by the CLI's `--stage`."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from duetime.adapters.codec import job_from_values, job_to_values
from duetime.adapters.dynamodb.timer_items import (
    stuck_from_values,
    stuck_to_values,
    timer_from_values,
    timer_values,
)
from duetime.cli.job_body import job_body
from duetime.cli.jobs import register
from duetime.domain.errors import ValidationError
from duetime.domain.jobs import Job, JobStatus, Priority, Runtime, parse_job_spec, rearms
from duetime.domain.messages import MessageAuth, RunMessage, run_message
from duetime.domain.timers import StuckTimer, Timer

NOW = 1_795_000_000_000
JOB = "01KAAAAAAAAAAAAAAAAAAAAAAA"
TARGET = {"type": "handler", "name": "test.record"}


def job(stage: int) -> Job:
    spec = parse_job_spec(
        {"schedule": {"at": "2026-11-21T10:00:00Z"}, "target": TARGET}
        | ({"stage_seconds": stage} if stage else {})
    )
    return Job("t", JOB, spec, JobStatus.SCHEDULED, NOW, NOW)


@pytest.mark.parametrize("value", [-1, 11, "5", True, 1.5, None])
def test_stage_seconds_is_validated(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({"schedule": {"rate_seconds": 60}, "target": TARGET, "stage_seconds": value})
    assert caught.value.field == "stage_seconds"


def test_a_stored_job_keeps_its_stage_and_a_change_of_it_rearms() -> None:
    assert job_from_values(job_to_values(job(7))).spec.stage_seconds == 7
    assert "stage" not in job_to_values(job(0))["spec"]
    assert rearms(job(0).spec, job(7).spec)
    assert not rearms(job(7).spec, job(7).spec)


def test_the_run_message_carries_the_stage_and_is_visible_that_much_earlier() -> None:
    message = run_message(job(4), NOW)
    assert (message.stage_ms, message.visible_ms) == (4_000, NOW - 4_000)
    # Runs due within one second become visible together, at its start less the stage
    later = replace(message, due_ms=NOW + 999)
    assert later.visible_ms == NOW - 4_000
    auth = MessageAuth.ephemeral()
    assert auth.open(auth.seal(message)) == message


def test_an_unstaged_message_is_written_as_before() -> None:
    # A message of a job without staging has no stage_ms: what was signed before still verifies.
    message = run_message(job(0), NOW)
    assert "stage_ms" not in message.to_json()
    assert RunMessage.from_json(message.to_json()) == message
    assert message.visible_ms == message.due_ms


def test_a_one_off_timer_item_keeps_its_stage_and_its_message_carries_it() -> None:
    timer = Timer("t", JOB, NOW, 2, runtime=Runtime.LAMBDA, priority=Priority.HIGH, stage_ms=3_000)
    values = timer_values(timer, 0, 3_600)
    assert values["stg"] == 3_000
    again = timer_from_values(values, NOW // 60_000)
    assert again.stage_ms == 3_000
    message = again.message()
    assert message is not None
    assert message.visible_ms == NOW - 3_000
    stuck = StuckTimer(timer, 0, 1, "boom", NOW, NOW, NOW + 60_000)
    assert stuck_from_values(stuck_to_values(stuck)).timer.stage_ms == 3_000


def test_the_cli_sends_stage_as_stage_seconds() -> None:
    parser = argparse.ArgumentParser(prog="duetime")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["jobs", "create", "--rate", "60", "--handler", "h", "--stage", "3"])
    assert job_body(args) == {
        "schedule": {"rate_seconds": 60},
        "target": {"type": "handler", "name": "h"},
        "stage_seconds": 3,
    }
