"""Jitter through the API on moto: `jitter_seconds` is validated and shown, a run's message
becomes visible at its jittered instant (`due_at`), and lateness is measured from it."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import jitter_offset_ms
from duetime.domain.timers import minute_of
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms
from tests.integration.test_api import Api, api, at, to_ms_of

__all__ = ["api"]  # the fixture, shared with test_api


def runs(api: Api, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.call("GET", f"/jobs/{job_id}/runs").json["items"]
    return items


@pytest.mark.parametrize("value", [-1, 901, "60", True, 2.5, None])
def test_a_bad_jitter_is_a_400_naming_it(api: Api, value: object) -> None:
    reply = api.call(
        "POST",
        "/jobs",
        {
            "schedule": {"rate_seconds": 60},
            "jitter_seconds": value,
            "target": {"type": "handler", "name": "test.record"},
        },
    )
    assert reply.status == 400
    assert reply.error["field"] == "jitter_seconds"
    assert api.job_items() == []


def test_the_job_shows_its_jitter_and_none_by_default(api: Api) -> None:
    plain = api.create({"schedule": {"rate_seconds": 60}})
    spread = api.create({"schedule": {"rate_seconds": 60}, "jitter_seconds": 900})
    assert (plain["jitter_seconds"], spread["jitter_seconds"]) == (0, 900)
    assert api.call("GET", f"/jobs/{spread['id']}").json["jitter_seconds"] == 900


def test_a_fast_path_one_off_is_released_at_its_jittered_instant(api: Api) -> None:
    # (The clock stands at each step: a loaded machine's own time would release or start the
    # run at other moments than the test's.)
    api.engine.stand_at(wall_ms())
    job = api.create({"schedule": {"at": at(20)}, "jitter_seconds": 60})
    nominal = to_ms_of(at(20))
    due = nominal + jitter_offset_ms(job["id"], nominal, 60)

    api.engine.stand_at(due - 1_500)  # SQS releases it at most a second early
    api.engine.drain()
    assert api.engine.recorder.runs_of(job["id"]) == []
    api.engine.stand_at(due + 100)
    api.engine.drain()

    assert api.engine.recorder.runs_of(job["id"]) == [nominal]
    [run] = runs(api, job["id"])
    assert run["run_id"] == f"{job['id']}-{nominal}"  # the nominal instant, as without jitter
    assert (run["scheduled_for"], run["due_at"]) == (rfc3339_ms(nominal), rfc3339_ms(due))
    assert to_ms_of(run["started_at"]) >= due
    assert run["lateness_ms"] < 1_000  # from due_at, not from scheduled_for
    assert api.call("GET", f"/jobs/{job['id']}").json["last_run"]["due_at"] == rfc3339_ms(due)


def test_a_timer_one_off_waits_in_the_bucket_of_its_jittered_minute(api: Api) -> None:
    api.engine.stand_at(wall_ms())  # standing at each step, as above
    job = api.create({"schedule": {"at": at(3_600)}, "jitter_seconds": 900})
    nominal = to_ms_of(at(3_600))
    due = nominal + jitter_offset_ms(job["id"], nominal, 900)

    # A sweep half a minute before the nominal minute reads up to that minute only.
    api.engine.stand_at(minute_of(nominal) * MINUTE_MS - 30_000)
    sent = api.engine.tick()["messages_sent"]
    assert sent == (1 if minute_of(due) == minute_of(nominal) else 0)
    api.engine.stand_at(minute_of(due) * MINUTE_MS - 30_000)
    assert api.engine.tick()["messages_sent"] == 1 - sent

    api.engine.stand_at(due - 1_500)
    api.engine.drain()
    assert api.engine.recorder.runs_of(job["id"]) == []
    api.engine.stand_at(due + 100)
    api.engine.drain()
    [run] = runs(api, job["id"])
    assert (run["scheduled_for"], run["due_at"], run["status"]) == (
        rfc3339_ms(nominal),
        rfc3339_ms(due),
        "succeeded",
    )


def test_a_recurring_jobs_runs_are_due_at_their_own_offsets_and_late_from_them(api: Api) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}, "jitter_seconds": 45})
    api.engine.run_minutes(4)

    done = runs(api, job["id"])
    assert len(done) >= 3
    for run in done:
        nominal = to_ms_of(run["scheduled_for"])
        due = nominal + jitter_offset_ms(job["id"], nominal, 45)
        assert run["due_at"] == rfc3339_ms(due)
        assert run["run_id"] == f"{job['id']}-{nominal}"
        # Lateness is measured from due_at (the drain comes at the end of each minute).
        assert run["lateness_ms"] == to_ms_of(run["started_at"]) - due
    assert len({to_ms_of(r["due_at"]) - to_ms_of(r["scheduled_for"]) for r in done}) > 1


def test_a_run_now_is_not_jittered(api: Api) -> None:
    job = api.create({"schedule": {"rate_seconds": 3_600}, "jitter_seconds": 900})
    reply = api.call("POST", f"/jobs/{job['id']}/run")
    api.engine.drain()
    [run] = runs(api, job["id"])
    assert run["due_at"] == run["scheduled_for"] == reply.json["scheduled_for"]
    assert to_ms_of(run["started_at"]) <= wall_ms()


LAST_INSTANT = "9999-12-31T23:59:59.999Z"  # any jitter but 0 ms goes past the end of year 9999


def timer_keys(api: Api) -> list[str]:
    items = api.engine.aws.dynamodb.scan(TableName=api.engine.aws.settings.timers_table)["Items"]
    return [item["pk"]["S"] for item in items if "#" in item["pk"]["S"]]


def test_a_job_at_the_end_of_year_9999_is_not_jittered_past_it(api: Api) -> None:
    job = api.create({"schedule": {"at": LAST_INSTANT}, "jitter_seconds": 900})
    assert api.call("GET", f"/jobs/{job['id']}").json["next_run_at"] == rfc3339_ms(
        to_ms_of(LAST_INSTANT)
    )
    # Its timer waits in a minute of year 9999 (the jittered instant stops at its last ms)
    assert [key for key in timer_keys(api) if key.startswith("9999")] != []


def test_one_such_job_in_a_batch_leaves_the_others_created(api: Api) -> None:
    reply = api.call(
        "POST",
        "/jobs/batch",
        {
            "jobs": [
                {"schedule": {"delay_seconds": 3600}, "target": {"type": "handler", "name": "x"}},
                {
                    "schedule": {"at": LAST_INSTANT},
                    "jitter_seconds": 900,
                    "target": {"type": "handler", "name": "x"},
                },
            ]
        },
    )
    assert reply.status == 200, reply.json
    ids = [item["job"]["id"] for item in reply.json["items"]]
    assert [api.call("GET", f"/jobs/{i}").json["status"] for i in ids] == ["scheduled"] * 2


def test_a_patch_to_the_end_of_year_9999_with_jitter_is_stored_with_its_timer(api: Api) -> None:
    job = api.create({"schedule": {"at": at(3_600)}, "jitter_seconds": 5})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"at": LAST_INSTANT}})
    assert reply.status == 200, reply.json
    assert reply.json["next_run_at"] == LAST_INSTANT
    assert [key for key in timer_keys(api) if key.startswith("999912312359")] != []
