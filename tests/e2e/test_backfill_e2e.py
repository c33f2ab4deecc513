"""Issue 14, item 6, through real HTTP on the local stack: POST /jobs/{id}/backfill runs the
occurrences a pause left out, once each, and a second backfill of the range sends none."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime

import pytest

from duetime.domain.timeutil import parse_rfc3339, to_ms
from tests.e2e.conftest import Stack, Webhook
from tests.e2e.test_api_e2e import job, rfc3339, unique
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def test_backfill_runs_what_a_pause_left_out_once(stack: Stack, webhook: Webhook) -> None:
    # Given a 1-second rate paused at once, for 4 seconds, then resumed
    path = unique("ok")
    created = stack.call("POST", "/jobs", job(webhook, path, {"rate_seconds": 1}))
    assert created.status == 201, created.body
    job_id, start = created.body["id"], created.body["created_at"]
    assert stack.call("POST", f"/jobs/{job_id}/pause").status == 200
    time.sleep(4)
    end = rfc3339(datetime.now(UTC))
    assert stack.call("POST", f"/jobs/{job_id}/resume").status == 200

    # When the paused span is backfilled
    reply = stack.call("POST", f"/jobs/{job_id}/backfill", {"from": start, "to": end})

    # Then every occurrence of [from, to) runs, each once, with its own scheduled instant
    assert reply.status == 202, reply.body
    first, until = to_ms(parse_rfc3339(start)) + 1000, to_ms(parse_rfc3339(end))
    expected = {rfc3339(datetime.fromtimestamp(ms / 1000, UTC)) for ms in range(first, until, 1000)}
    assert len(expected) >= 3
    assert reply.body["occurrences"] <= len(expected)

    def delivered() -> Counter[str]:
        return Counter(
            d.headers["duetime-scheduled-for"]
            for d in webhook.to(path)
            if d.headers["duetime-scheduled-for"] in expected
        )

    wait_for(lambda: set(delivered()) == expected, 20)
    again = stack.call("POST", f"/jobs/{job_id}/backfill", {"from": start, "to": end})
    assert (again.status, again.body) == (202, {"occurrences": 0})
    time.sleep(2)  # a duplicate would have arrived by now
    assert set(delivered().values()) == {1}
    runs = stack.call("GET", f"/jobs/{job_id}/runs?limit=100").body["items"]
    assert {f"{job_id}-{to_ms(parse_rfc3339(s))}" for s in expected} <= {r["run_id"] for r in runs}
    stack.call("DELETE", f"/jobs/{job_id}")


def test_backfill_refusals_over_http(stack: Stack, webhook: Webhook) -> None:
    created = stack.call("POST", "/jobs", job(webhook, unique("ok"), {"rate_seconds": 3600}))
    job_id = created.body["id"]
    now = datetime.now(UTC)
    future = rfc3339(now.replace(year=now.year + 1))

    too_late = stack.call(
        "POST", f"/jobs/{job_id}/backfill", {"from": created.body["created_at"], "to": future}
    )
    unknown = stack.call(
        "POST", "/jobs/01KAAAAAAAAAAAAAAAAAAAAAAA/backfill", {"from": future, "to": future}
    )

    assert (too_late.status, too_late.body["error"]["field"]) == (400, "to")
    assert unknown.status == 404
    stack.call("DELETE", f"/jobs/{job_id}")
