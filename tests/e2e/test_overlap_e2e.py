"""The overlap policy on the local stack, through real HTTP: a 1-second rate and a slow
`duetime.sleep` handler (3 s), under `skip` and `buffer_one`, and `allow` for contrast."""

from __future__ import annotations

import itertools
import time
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def slow_job(stack: Stack, overlap: str) -> str:
    created = stack.call(
        "POST",
        "/jobs",
        {
            "schedule": {"rate_seconds": 1},
            "target": {"type": "handler", "name": "duetime.sleep"},
            "payload": {"seconds": 3},
            "overlap": overlap,
        },
    )
    assert created.status == 201, created.body
    assert created.body["overlap"] == overlap
    job_id: str = created.body["id"]
    return job_id


def settled_runs(stack: Stack, job_id: str, seconds: float) -> list[dict[str, Any]]:
    """Let the job run, cancel it, and wait until none of its runs is running or buffered."""
    time.sleep(seconds)
    assert stack.call("DELETE", f"/jobs/{job_id}").status == 200

    def runs() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = stack.call("GET", f"/jobs/{job_id}/runs?limit=100").body[
            "items"
        ]
        return items

    wait_for(lambda: all(r["status"] not in ("running", "retrying") for r in runs()), 30)
    return runs()


def instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def overlaps(runs: list[dict[str, Any]]) -> int:
    spans = sorted(
        (instant(r["started_at"]), instant(r["finished_at"]))
        for r in runs
        if r["status"] == "succeeded"
    )
    return sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])


def test_skip_never_overlaps_and_records_skipped_runs(stack: Stack) -> None:
    runs = settled_runs(stack, slow_job(stack, "skip"), 12)

    statuses = [r["status"] for r in runs]
    assert statuses.count("succeeded") >= 2
    assert statuses.count("skipped") >= 4
    assert overlaps(runs) == 0
    assert all(r["attempts"] == 0 for r in runs if r["status"] == "skipped")


def test_buffer_one_never_overlaps_and_runs_each_buffered_occurrence(stack: Stack) -> None:
    job_id = slow_job(stack, "buffer_one")
    time.sleep(5)
    # While it runs, at most one occurrence waits
    waiting = [
        r
        for r in stack.call("GET", f"/jobs/{job_id}/runs").body["items"]
        if r["status"] == "buffered"
    ]
    assert len(waiting) <= 1
    runs = settled_runs(stack, job_id, 10)

    assert overlaps(runs) == 0
    assert [r["status"] for r in runs].count("succeeded") >= 3
    # Each run after the first started right as the one before it finished: they were buffered
    # (handed over within a poll or two; a 1-second rate would start one within a second
    # anyway, but never before the one before it finished: `overlaps` above)
    spans = sorted(
        (instant(r["started_at"]), instant(r["finished_at"]))
        for r in runs
        if r["status"] == "succeeded"
    )
    assert all(b[0] - a[1] < 3.0 for a, b in itertools.pairwise(spans))


def test_allow_overlaps_as_before(stack: Stack) -> None:
    runs = settled_runs(stack, slow_job(stack, "allow"), 6)

    assert {r["status"] for r in runs} == {"succeeded"}
    assert overlaps(runs) >= 1
