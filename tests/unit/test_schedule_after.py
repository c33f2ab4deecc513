"""The `after` schedule kind (job dependencies): parsing, its JSON form, the CLI flags, and the
upstream run id a dependent's message and delivery carry."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from duetime.cli.job_body import job_body
from duetime.cli.jobs import register
from duetime.domain.errors import ValidationError
from duetime.domain.invocation import Invocation, delivery_metadata, envelope
from duetime.domain.jobs import parse_job_spec
from duetime.domain.messages import RunMessage
from duetime.domain.schedule import (
    After,
    is_recurring,
    is_triggered,
    next_occurrence,
    parse_schedule,
    previous_occurrence,
    schedule_to_dict,
)

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("on", ["succeeded", "failed", "finished"])
def test_an_after_schedule_parses_and_round_trips(on: str) -> None:
    schedule = parse_schedule({"after": {"job_id": "01UP", "on": on}})

    assert schedule == After("01UP", on)
    assert schedule_to_dict(schedule) == {"after": {"job_id": "01UP", "on": on}}
    assert parse_schedule(schedule_to_dict(schedule)) == schedule


def test_on_defaults_to_succeeded() -> None:
    assert parse_schedule({"after": {"job_id": "01UP"}}) == After("01UP", "succeeded")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"after": "01UP"}, "schedule.after"),
        ({"after": {}}, "schedule.after.job_id"),
        ({"after": {"job_id": ""}}, "schedule.after.job_id"),
        ({"after": {"job_id": 7}}, "schedule.after.job_id"),
        ({"after": {"job_id": "x" * 65}}, "schedule.after.job_id"),
        ({"after": {"job_id": "01UP", "on": "cancelled"}}, "schedule.after.on"),
        ({"after": {"job_id": "01UP", "on": None}}, "schedule.after.on"),
        ({"after": {"job_id": "01UP", "extra": 1}}, "schedule.after.extra"),
        ({"after": {"job_id": "01UP"}, "timezone": "UTC"}, "schedule.timezone"),
        ({"after": {"job_id": "01UP"}, "cron": "* * * * *"}, "schedule"),
    ],
)
def test_bad_after_schedules_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_schedule(raw)
    assert caught.value.field == field


@pytest.mark.parametrize("job_id", ["x", "x" * 64])
def test_a_job_id_of_1_to_64_characters_is_accepted(job_id: str) -> None:
    assert parse_schedule({"after": {"job_id": job_id}}) == After(job_id, "succeeded")


def test_a_bad_outcome_is_refused_with_the_outcomes_allowed() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_schedule({"after": {"job_id": "01UP", "on": "cancelled"}})

    assert caught.value.field == "schedule.after.on"
    assert caught.value.message == "must be one of succeeded, failed, finished"


def test_an_after_schedule_has_no_occurrence_of_its_own() -> None:
    schedule = After("01UP")

    assert is_triggered(schedule)
    assert not is_recurring(schedule)
    assert next_occurrence(schedule, created_at=NOW, after=None) is None
    assert previous_occurrence(schedule, created_at=NOW, before=NOW) is None


def test_an_after_job_may_not_have_an_overlap_policy() -> None:
    body = {"schedule": {"after": {"job_id": "01UP"}}, "target": {"type": "handler", "name": "h"}}
    assert parse_job_spec(body).triggered
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({**body, "overlap": "skip"})
    assert caught.value.field == "overlap"
    # It said "for a one-off job", which an `after` job is not (a new user's walk, round two).
    assert "an `after` job" in caught.value.message


def test_the_upstream_run_id_travels_in_the_message_and_the_delivery() -> None:
    message = RunMessage("t", "01DOWN", 5, 1, 9, upstream_run_id="01UP-5")
    assert RunMessage.from_json(message.to_json()) == message
    assert "upstream_run_id" not in RunMessage("t", "01DOWN", 5, 1, 9).to_json()

    invocation = Invocation("t", "01DOWN", "01DOWN-5", 5, 1, None, 30.0, upstream_run_id="01UP-5")
    assert delivery_metadata(invocation)["duetime-upstream-run-id"] == "01UP-5"
    assert envelope(invocation)["upstream_run_id"] == "01UP-5"
    plain = Invocation("t", "01DOWN", "01DOWN-5", 5, 1, None, 30.0)
    assert "duetime-upstream-run-id" not in delivery_metadata(plain)
    assert "upstream_run_id" not in envelope(plain)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="duetime")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["jobs", *argv])


def test_the_cli_sends_after_and_on() -> None:
    args = parse("create", "--after", "01UP", "--on", "failed", "--handler", "h")
    assert job_body(args)["schedule"] == {"after": {"job_id": "01UP", "on": "failed"}}
    assert job_body(parse("create", "--after", "01UP", "--handler", "h"))["schedule"] == {
        "after": {"job_id": "01UP"}
    }
    update = parse("update", "01DOWN", "--after", "01X")
    assert job_body(update)["schedule"] == {"after": {"job_id": "01X"}}
    with pytest.raises(SystemExit):
        parse("create", "--after", "01UP", "--rate", "60", "--handler", "h")
    with pytest.raises(SystemExit):
        parse("create", "--after", "01UP", "--on", "sometimes", "--handler", "h")
