"""`duetime local --lanes 3` over real HTTP: every queue spread over three lanes, runs of both
runtimes delivered once each (the lambda pollers and the Fargate loop serve every lane), and
GET /admin/stats shows each queue once, its lanes added up."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.conftest import Webhook, local_stack
from tests.e2e.test_api_e2e import job, unique
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

RUNS = 24


def test_a_stack_with_lanes_runs_each_run_once(tmp_path: Path, webhook: Webhook) -> None:
    with local_stack(tmp_path, "--lanes", "3") as stack:
        # Given runs due now on both runtimes and every priority
        paths = []
        for i in range(RUNS):
            path = unique("lane")
            extra = {"runtime": ("lambda", "fargate")[i % 2],
                     "priority": ("high", "normal", "low")[i % 3]}  # fmt: skip
            reply = stack.call("POST", "/jobs", job(webhook, path, {"delay_seconds": 0}, **extra))
            assert reply.status == 201, reply.body
            paths.append(path)

        # Then each is delivered, once
        wait_for(lambda: all(webhook.to(p) for p in paths), 40)
        delivered = Counter(d.path for d in webhook.deliveries if d.path in paths)
        assert delivered == Counter(paths)

        # And the operator sees six queues, whatever their lanes
        made = subprocess.run(
            [sys.executable, "-m", "duetime.cli", "token", "--tenant", "ops", "--scope",
             "duetime/operator", "--state-dir", str(stack.state_dir)],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        operator = {"authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}
        stats = stack.call("GET", "/admin/stats", tenant=None, headers=operator)
        assert stats.status == 200, stats.body
        assert len(stats.body["queues"]) == 6
        assert all(q["depth"] == 0 for q in stats.body["queues"])
