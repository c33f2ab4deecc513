"""Jitter on the local stack, through real HTTP: a one-off job's run is due at its instant plus
the job's offset, and starts then, not at the nominal instant."""

from __future__ import annotations

from datetime import datetime

import pytest

from duetime.domain.jobs import jitter_offset_ms
from tests.e2e.conftest import Stack
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def _ms(text: str) -> int:
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_a_jittered_run_is_due_and_starts_at_its_instant_plus_the_jobs_offset(
    stack: Stack,
) -> None:
    created = stack.call(
        "POST",
        "/jobs",
        {
            "schedule": {"delay_seconds": 2},
            "target": {"type": "handler", "name": "duetime.noop"},
            "jitter_seconds": 4,
        },
    )
    assert created.status == 201, created.body
    assert created.body["jitter_seconds"] == 4
    job_id = created.body["id"]

    def finished() -> list[dict[str, object]]:
        items = stack.call("GET", f"/jobs/{job_id}/runs").body["items"]
        return [r for r in items if r["status"] == "succeeded"]

    wait_for(lambda: len(finished()) == 1, 20)
    run = finished()[0]
    scheduled = _ms(str(run["scheduled_for"]))
    due = _ms(str(run["due_at"]))
    assert run["run_id"] == f"{job_id}-{scheduled}"  # the run keeps its nominal identity
    assert due == scheduled + jitter_offset_ms(job_id, scheduled, 4)
    assert _ms(str(run["started_at"])) >= due
    assert run["lateness_ms"] == _ms(str(run["started_at"])) - due
