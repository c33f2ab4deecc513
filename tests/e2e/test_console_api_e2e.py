"""Issue 15 through real HTTP on the local stack: POST /schedules/preview (and `duetime
schedule preview` against it) agrees with the next_run_at of a job created with the same
schedule; GET /admin/stats answers a token made with `duetime token --scope duetime/operator`
with the stack's queues, shards and runs, and refuses a plain one."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.conftest import Stack, Webhook
from tests.e2e.test_api_e2e import job, unique
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

CRON = {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duetime.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_preview_matches_the_next_run_of_a_job_and_the_cli_prints_it(
    stack: Stack, webhook: Webhook
) -> None:
    # Given the next 3 instants of weekdays at 09:00 in Berlin
    shown = stack.call("POST", "/schedules/preview", {"schedule": CRON, "count": 3})
    assert shown.status == 200, shown.body
    occurrences = shown.body["occurrences"]
    assert len(occurrences) == 3

    # Then a job created with that schedule is due at the first
    created = stack.call("POST", "/jobs", job(webhook, unique("ok"), CRON))
    assert created.status == 201, created.body
    assert created.body["next_run_at"] == occurrences[0]
    assert stack.call("DELETE", f"/jobs/{created.body['id']}").status == 200

    # And the CLI prints the same instants, in UTC and in Berlin, one a line
    token = stack.token("tenant-a")
    common = ("--api-url", stack.url, "--token", token)
    out = cli("schedule", "preview", CRON["cron"], "--timezone", CRON["timezone"],
              "--count", "3", *common)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == occurrences
    assert all(line.endswith("(Europe/Berlin)") and " 09:00:00 " in line for line in lines)

    # And a bad cron is one line naming the field, exit status 1
    bad = cli("schedule", "preview", "0 9 * * 8", *common)
    assert bad.returncode == 1
    assert "(field: schedule.cron)" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_admin_stats_needs_the_operator_scope(stack: Stack, webhook: Webhook) -> None:
    # Given an operator token made by `duetime token --scope`
    made = cli("token", "--tenant", "ops", "--scope", "duetime/operator",
               "--state-dir", str(stack.state_dir))  # fmt: skip
    assert made.returncode == 0, made.stderr
    operator = {"authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}

    # Then a plain token is refused
    refused = stack.call("GET", "/admin/stats")
    assert refused.status == 403
    assert refused.body["error"]["code"] == "forbidden"

    # When a job runs now and another waits a minute on the fast path
    path = unique("ok")
    assert stack.call("POST", "/jobs", job(webhook, path, {"delay_seconds": 0})).status == 201
    assert (
        stack.call("POST", "/jobs", job(webhook, unique("ok"), {"delay_seconds": 60})).status == 201
    )
    wait_for(lambda: len(webhook.to(path)) == 1, 20)

    def figures() -> Any:
        reply = stack.call("GET", "/admin/stats", tenant=None, headers=operator)
        assert reply.status == 200, reply.body
        return reply.body

    # Then the operator sees the run, the waiting message and every shard
    wait_for(lambda: figures()["runs_last_hour"]["started"] >= 1, 20)
    body = figures()
    queues = {q["name"]: q for q in body["queues"]}
    assert len(queues) == 6
    assert queues["lambda-normal"]["delayed"] >= 1
    # the local emulator measures the oldest ready message's age: here none waits for long
    assert all(0 <= q["oldest_age_seconds"] < 30 for q in queues.values())
    assert body["shards"]
    runs = body["runs_last_hour"]
    assert runs["lateness_ms"]["p50"] is not None
