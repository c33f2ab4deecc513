"""Issue 15: POST /schedules/preview through the API handler on moto. The occurrences are
those a job submitted now would run (its first is POST /jobs's next_run_at); the schedule is
refused with the fields POST /jobs names. Every reply is validated against the OpenAPI document.
The clock is the engine's: 2026-11-21T10:00:05Z, a Saturday."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration import test_api
from tests.integration.test_api import Api

api = test_api.api  # the fixture: the API handler over the moto engine


def preview(api: Api, schedule: object, **extra: Any) -> test_api.Reply:
    return api.call("POST", "/schedules/preview", {"schedule": schedule, **extra})


def test_cron_in_a_zone_that_changes_to_summer_time(api: Api) -> None:
    # Given 09:00 daily in Berlin from two days before the clocks go forward (28 March 2027)
    schedule = {
        "cron": "0 9 * * *",
        "timezone": "Europe/Berlin",
        "start_at": "2027-03-26T00:00:00Z",
    }

    reply = preview(api, schedule, count=4)

    # Then 09:00 in Berlin is 08:00 UTC, then 07:00 UTC
    assert reply.status == 200
    assert reply.json == {
        "occurrences": [
            "2027-03-26T08:00:00.000Z",
            "2027-03-27T08:00:00.000Z",
            "2027-03-28T07:00:00.000Z",
            "2027-03-29T07:00:00.000Z",
        ]
    }


def test_five_by_default_and_the_first_is_the_next_run_of_a_job_submitted_now(api: Api) -> None:
    schedule = {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}

    shown = preview(api, schedule).json["occurrences"]
    job = api.create({"schedule": schedule})

    assert shown == [f"2026-11-{day}T08:00:00.000Z" for day in (23, 24, 25, 26, 27)]
    assert job["next_run_at"] == shown[0]


def test_rate_on_its_start_grid_and_fewer_when_it_ends(api: Api) -> None:
    schedule = {
        "rate_seconds": 3600,
        "start_at": "2026-11-21T09:30:00Z",
        "end_at": "2026-11-21T12:30:00Z",
    }
    reply = preview(api, schedule, count=20)
    assert reply.json == {
        "occurrences": [
            "2026-11-21T10:30:00.000Z",
            "2026-11-21T11:30:00.000Z",
            "2026-11-21T12:30:00.000Z",
        ]
    }


def test_at_is_its_one_instant(api: Api) -> None:
    reply = preview(api, {"at": "2026-12-01T12:00:00+01:00"}, count=3)
    assert (reply.status, reply.json) == (200, {"occurrences": ["2026-12-01T11:00:00.000Z"]})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"schedule": {"cron": "61 * * * *"}}, "schedule.cron"),
        ({"schedule": {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}}, "schedule.timezone"),
        ({"schedule": {"rate_seconds": 0}}, "schedule.rate_seconds"),
        ({"schedule": {"cron": "* * * * *", "every": 1}}, "schedule.every"),
        ({"schedule": {"after": {"job_id": "01KAAAAAAAAAAAAAAAAAAAAAAA"}}}, "schedule.after"),
        ({"schedule": {"rate_seconds": 60}, "count": 0}, "count"),
        ({"schedule": {"rate_seconds": 60}, "count": 21}, "count"),
        ({"schedule": {"rate_seconds": 60}, "count": "5"}, "count"),
        ({"schedule": {"rate_seconds": 60}, "count": True}, "count"),
        ({"count": 5}, "schedule"),
        ({"schedule": {"rate_seconds": 60}, "target": {}}, "target"),
        ([], "body"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api: Api, body: object, field: str) -> None:
    reply = api.call("POST", "/schedules/preview", body)
    assert reply.status == 400
    assert (reply.error["code"], reply.error["field"]) == ("invalid", field)


def test_the_request_schema_admits_what_is_previewed_and_not_after() -> None:
    # Found by an outside contract audit: the document's request schema admitted `after`,
    # which is always a 400 (it has no occurrences of its own).
    schema = test_api._validator("/components/schemas/SchedulePreviewRequest", None)
    schema.validate({"schedule": {"cron": "0 9 * * *"}, "count": 3})
    after = {"schedule": {"after": {"job_id": "01KAAAAAAAAAAAAAAAAAAAAAAA"}}}
    assert not schema.is_valid(after)


def test_the_same_field_as_post_jobs_names(api: Api) -> None:
    bad = {"cron": "0 9 * * 8"}
    job = api.call("POST", "/jobs", {"schedule": bad, "target": test_api.HANDLER_TARGET})
    shown = preview(api, bad)
    assert shown.json == job.json


def test_a_token_naming_a_tenant_is_needed(api: Api) -> None:
    reply = api.call("POST", "/schedules/preview", {"schedule": {"rate_seconds": 60}}, tenant=None)
    assert reply.status == 401


def test_a_misspelt_field_of_the_preview_or_the_batch_body_names_the_closest(api: Api) -> None:
    # The bodies' own fields got a bare "unknown field" (HTTP contract, round seven).
    for path, body, meant in [
        ("/schedules/preview", {"schedul": {"rate_seconds": 60}}, "schedule"),
        ("/schedules/preview", {"schedule": {"rate_seconds": 60}, "cont": 3}, "count"),
        ("/jobs/batch", {"job": []}, "jobs"),
    ]:
        reply = api.call("POST", path, body)
        assert reply.status == 400
        assert reply.error["message"] == f"unknown field; did you mean {meant}?"
