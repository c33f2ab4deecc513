"""Issue 14, items 4 and 1, through real HTTP on the local stack: tags and the list filter,
and PATCH /jobs/{id} (ETag, If-Match, rescheduling a job whose message is already queued)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest

from tests.e2e.conftest import Stack, Webhook
from tests.e2e.test_api_e2e import job, rfc3339, unique
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def test_jobs_are_found_by_their_tags_and_name_prefix(stack: Stack, webhook: Webhook) -> None:
    run = uuid.uuid4().hex[:8]  # this test's own tag value: the stack is shared
    bodies = [
        ("nightly-a", {"run": run, "team": "payments"}),
        ("nightly-b", {"run": run, "team": "core"}),
        ("weekly-c", {"run": run, "team": "payments"}),
    ]
    ids = []
    for name, tags in bodies:
        created = stack.call(
            "POST",
            "/jobs",
            job(webhook, unique("ok"), {"rate_seconds": 3600}, name=name, tags=tags),
        )
        assert created.status == 201, created.body
        assert created.body["tags"] == tags
        ids.append(created.body["id"])

    def listed(**query: str | list[str]) -> list[str]:
        found: list[str] = []
        cursor = None
        while True:
            params = {**query, "limit": "2", **({"cursor": cursor} if cursor else {})}
            reply = stack.call("GET", "/jobs?" + urlencode(params, doseq=True))
            assert reply.status == 200, reply.body
            found += [item["id"] for item in reply.body["items"]]
            cursor = reply.body["next_cursor"]
            if cursor is None:
                return found

    assert listed(tag=[f"run:{run}", "team:payments"]) == [ids[2], ids[0]]
    assert listed(tag=[f"run:{run}"], name_prefix="nightly-") == [ids[1], ids[0]]
    for job_id in ids:
        stack.call("DELETE", f"/jobs/{job_id}")


def test_a_rescheduled_job_runs_at_its_new_instant_only(stack: Stack, webhook: Webhook) -> None:
    path = unique("ok")
    first = datetime.now(UTC) + timedelta(seconds=5)
    created = stack.call("POST", "/jobs", job(webhook, path, {"at": rfc3339(first)}))
    assert (created.status, created.headers["ETag"]) == (201, '"1"')
    job_id = created.body["id"]

    later = datetime.now(UTC) + timedelta(seconds=12)
    moved = stack.call(
        "PATCH",
        f"/jobs/{job_id}",
        {"schedule": {"at": rfc3339(later)}},
        headers={"If-Match": '"1"'},
    )
    assert (moved.status, moved.headers["ETag"], moved.body["version"]) == (200, '"2"', 2)
    stale = stack.call("PATCH", f"/jobs/{job_id}", {"name": "x"}, headers={"If-Match": '"1"'})
    assert (stale.status, stale.body["error"]["code"]) == (412, "precondition_failed")

    time.sleep(7)  # past the old instant (by 2 s at least), 5 s before the new one
    assert webhook.to(path) == []
    wait_for(lambda: webhook.to(path), 20)
    time.sleep(2)  # a duplicate would have arrived by now
    (delivery,) = webhook.to(path)
    assert delivery.headers["duetime-scheduled-for"] == rfc3339(later)
    wait_for(lambda: stack.call("GET", f"/jobs/{job_id}").body["status"] == "succeeded", 10)
    done = stack.call("PATCH", f"/jobs/{job_id}", {"name": "too late"})
    assert (done.status, done.body["error"]["code"]) == (409, "conflict")
