"""Job dependencies on the local stack, through real HTTP: a chain A → B → C of webhook jobs,
where B and C are `after` jobs; each delivery carries the run that triggered it, and a cycle
through PATCH is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Stack, Webhook
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def hook(webhook: Webhook, path: str, schedule: dict[str, Any]) -> dict[str, Any]:
    return {"schedule": schedule, "target": {"type": "http", "url": webhook.url + path}}


def test_a_chain_of_after_jobs_runs_with_its_upstream_run_ids(
    stack: Stack, webhook: Webhook
) -> None:
    a = stack.call("POST", "/jobs", hook(webhook, "/deps/a", {"delay_seconds": 3}))
    assert a.status == 201, a.body
    b = stack.call("POST", "/jobs", hook(webhook, "/deps/b", {"after": {"job_id": a.body["id"]}}))
    assert b.status == 201, b.body
    after_b = {"after": {"job_id": b.body["id"], "on": "finished"}}
    c = stack.call("POST", "/jobs", hook(webhook, "/deps/c", after_b))
    assert c.status == 201, c.body

    wait_for(lambda: webhook.to("/deps/c"), 30)

    (da,) = webhook.to("/deps/a")
    (db,) = webhook.to("/deps/b")
    (dc,) = webhook.to("/deps/c")
    assert "duetime-upstream-run-id" not in da.headers
    assert db.headers["duetime-upstream-run-id"] == da.headers["duetime-run-id"]
    assert dc.headers["duetime-upstream-run-id"] == db.headers["duetime-run-id"]
    # Every run of the chain is at A's run's instant
    scheduled = da.headers["duetime-scheduled-for"]
    assert db.headers["duetime-scheduled-for"] == dc.headers["duetime-scheduled-for"] == scheduled
    assert db.headers["duetime-run-id"] == f"{b.body['id']}-{da.headers['duetime-run-id'][27:]}"

    # Closing the loop is refused (B after C, while C is after B)
    after_c = {"after": {"job_id": c.body["id"]}}
    cycle = stack.call("PATCH", f"/jobs/{b.body['id']}", {"schedule": after_c})
    assert cycle.status == 400, cycle.body
    assert cycle.body["error"]["field"] == "schedule.after.job_id"
    missing = stack.call("POST", "/jobs", hook(webhook, "/x", {"after": {"job_id": "01NOPE"}}))
    assert missing.status == 404, missing.body
