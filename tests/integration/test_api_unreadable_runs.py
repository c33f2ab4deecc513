"""A run record that does not decode (a status a later version writes, during a deploy or
after a rollback; an attribute missing from an item written by hand) is left out of what
reads it, as a job item that does not decode is (api.md, Pagination): until 2026-12-01 every
`GET /jobs` page holding its job was a `500`, and the job could be neither read, cancelled,
paused nor updated (each reads its view first), its runs not listed (an outside HTTP contract
audit, round ten)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from tests.integration import test_api
from tests.integration.test_api import Api

api = test_api.api  # the fixture: the API handler over the moto engine

Damage = Callable[[dict[str, Any]], dict[str, Any]]
DAMAGES: dict[str, Damage] = {
    "a status this version does not know": lambda item: {**item, "status": {"S": "abandoned"}},
    "an attribute missing": lambda item: {k: v for k, v in item.items() if k != "attempt"},
}


def damaged_job(api: Api, damage: Damage, schedule: dict[str, Any]) -> tuple[str, str]:
    """A healthy job, and a job whose one run record was damaged after it ran."""
    healthy = api.create({"schedule": {"delay_seconds": 0}})["id"]
    bad = api.create({"schedule": schedule})["id"]
    if "rate_seconds" in schedule:
        assert api.call("POST", f"/jobs/{bad}/run").status == 202
    api.engine.drain()
    aws = api.engine.aws
    table = aws.settings.runs_table
    (item,) = [i for i in aws.dynamodb.scan(TableName=table)["Items"] if i["job_id"]["S"] == bad]
    aws.dynamodb.put_item(TableName=table, Item=damage(item))
    return healthy, bad


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_the_tenants_listing_and_the_jobs_runs_leave_the_record_out(api: Api, damage: str) -> None:
    healthy, bad = damaged_job(api, DAMAGES[damage], {"rate_seconds": 3600})
    page = api.call("GET", "/jobs")
    assert page.status == 200, page.json
    assert {healthy, bad} <= {job["id"] for job in page.json["items"]}
    runs = api.call("GET", f"/jobs/{bad}/runs")
    assert (runs.status, runs.json["items"]) == (200, [])


@pytest.mark.parametrize("schedule", [{"rate_seconds": 3600}, {"delay_seconds": 0}])
def test_the_job_can_still_be_read_changed_and_cancelled(
    api: Api, schedule: dict[str, Any]
) -> None:
    _, bad = damaged_job(api, DAMAGES["a status this version does not know"], schedule)
    assert api.call("GET", f"/jobs/{bad}").status == 200
    assert api.call("PATCH", f"/jobs/{bad}", {"name": "renamed"}).status == 200
    if "rate_seconds" in schedule:
        assert api.call("POST", f"/jobs/{bad}/pause").status == 200
    cancelled = api.call("DELETE", f"/jobs/{bad}")
    assert (cancelled.status, cancelled.json["status"]) == (200, "cancelled")


def test_a_one_off_whose_record_does_not_decode_is_not_taken_for_one_that_never_ran(
    api: Api,
) -> None:
    """Left out of listings, such a record still exists for the reconciler's check of lost
    one-offs (a review of this change: it sent the run again, to fail into the DLQ)."""
    damaged_job(api, DAMAGES["a status this version does not know"], {"delay_seconds": 0})
    api.engine.advance(6 * 3600)  # the daily run, hours after its instant
    report = api.engine.parts.reconciler.reconcile()
    assert report.rearmed == 0, report
    assert api.engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0
