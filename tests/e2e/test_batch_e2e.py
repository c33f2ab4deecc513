"""Issue 14, item 5, through real HTTP on the local stack: POST /jobs/batch (every accepted job
is delivered once, a bad one rejects no other, a replayed key is the same job) and
`duetime jobs create --from-file`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack, Webhook
from tests.e2e.test_api_e2e import job, unique
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def test_a_batch_is_answered_per_job_and_each_accepted_job_runs_once(
    stack: Stack, webhook: Webhook
) -> None:
    paths = [unique("ok") for _ in range(12)]
    key = f"batch-{uuid.uuid4().hex[:8]}"
    bodies = [job(webhook, path, {"delay_seconds": 2}) for path in paths]
    bodies[0]["idempotency_key"] = key
    bodies.insert(5, job(webhook, unique("ok"), {"cron": "not a cron"}))

    reply = stack.call("POST", "/jobs/batch", {"jobs": bodies})

    assert reply.status == 200, reply.body
    items = reply.body["items"]
    assert [item["status"] for item in items] == [201] * 5 + [400] + [201] * 7
    assert items[5]["error"]["field"] == "schedule.cron"
    for path in paths:
        wait_for(lambda path=path: webhook.to(path), 30)
    time.sleep(2)  # a duplicate would have arrived by now
    assert [len(webhook.to(path)) for path in paths] == [1] * 12
    # The key replays as the same job, in a batch as with the Idempotency-Key header.
    again = stack.call("POST", "/jobs/batch", {"jobs": [bodies[0]]})
    assert again.body["items"][0]["job"]["id"] == items[0]["job"]["id"]
    del bodies[0]["idempotency_key"]
    header = stack.call("POST", "/jobs", bodies[0], headers={"Idempotency-Key": key})
    assert (header.status, header.body["id"]) == (201, items[0]["job"]["id"])


def test_the_cli_submits_a_jsonl_file_and_reports_each_line(
    stack: Stack, webhook: Webhook, tmp_path: Path
) -> None:
    good = [unique("ok") for _ in range(3)]
    lines = [json.dumps(job(webhook, path, {"delay_seconds": 2})) for path in good]
    lines.insert(1, json.dumps(job(webhook, unique("ok"), {"rate_seconds": 0})))
    jsonl = tmp_path / "jobs.jsonl"
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {
        **os.environ,
        "DUETIME_API_URL": stack.url,
        "DUETIME_TOKEN": stack.token("tenant-a"),
    }

    done = subprocess.run(
        [sys.executable, "-m", "duetime.cli", "jobs", "create", "--from-file", str(jsonl)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )

    assert done.returncode == 1, done.stderr  # line 2 was refused
    out = done.stdout.splitlines()
    assert [line.split()[:3] for line in out] == [
        ["line", "1:", "201"],
        ["line", "2:", "400"],
        ["line", "3:", "201"],
        ["line", "4:", "201"],
    ]
    for path in good:
        wait_for(lambda path=path: webhook.to(path), 30)
