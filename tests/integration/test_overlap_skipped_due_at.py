"""A `skipped` run of a jittered job shows its jittered `due_at` (api.md, the run object), as a
run that ran does: the gate recorded it without the occurrence's due instant, `scheduled_for`
itself (an outside lifecycle audit, round eight). The archive copies the same value."""

from __future__ import annotations

import pytest

from duetime.api.views import run_json
from duetime.domain.jobs import jitter_offset_ms
from duetime.domain.runs import RunStatus
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins


@pytest.mark.parametrize("how", ["skipped by the gate", "buffered, then dropped by a pause"])
def test_a_skipped_run_of_a_jittered_job_shows_its_jittered_due_at(how: str) -> None:
    twins = Twins()
    job = twins.create(
        schedule={"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 300_000)},
        payload={"seconds": 25},  # each run outlasts two periods
        jitter_seconds=5,
        overlap="skip" if how == "skipped by the gate" else "buffer_one",
    )
    if how != "skipped by the gate":
        twins.at(29, lambda: twins.service.pause("t", job))  # +20 waits behind +10 then
    twins.run_for(90)
    skipped = [r for r in twins.runs.all() if r.status == RunStatus.SKIPPED]
    assert skipped, "no skipped run"
    shown = {
        (r.scheduled_ms - T0) // 1000: (
            run_json(r)["due_at"],
            rfc3339_ms(r.scheduled_ms + jitter_offset_ms(job, r.scheduled_ms, 5)),
        )
        for r in skipped
    }
    wrong = {s: pair for s, pair in shown.items() if pair[0] != pair[1]}
    assert not wrong, f"due_at (shown, documented) of skipped runs: {wrong}"


def test_control_a_run_that_ran_shows_its_jittered_due_at() -> None:
    twins = Twins()
    job = twins.create(
        schedule={"rate_seconds": 10, "end_at": rfc3339_ms(T0 + 300_000)},
        payload={"seconds": 25},
        jitter_seconds=5,
        overlap="skip",
    )
    twins.run_for(90)
    ran = [r for r in twins.runs.all() if r.status == RunStatus.SUCCEEDED]
    assert ran
    for r in ran:
        assert run_json(r)["due_at"] == rfc3339_ms(
            r.scheduled_ms + jitter_offset_ms(job, r.scheduled_ms, 5)
        )


# A review: a buffered run-now dropped by a pause was given the jittered instant (and no ask).
def test_a_dropped_buffered_run_now_keeps_its_own_due_at() -> None:
    twins = Twins()
    job = twins.create(
        schedule={"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 600_000)},
        payload={"seconds": 40},  # +60 runs to +100
        jitter_seconds=5,
        overlap="buffer_one",
    )
    asked: list[int] = []
    shown: dict[str, str] = {}
    twins.at(70, lambda: asked.append(twins.service.run_now("t", job)))  # waits behind +60
    twins.at(75, lambda: shown.update(buffered=run_json(twins.runs.get(job, asked[0]))["due_at"]))
    twins.at(80, lambda: twins.service.pause("t", job))  # drops it when +60 releases
    twins.run_for(200)

    instant = asked[0]
    assert jitter_offset_ms(job, instant, 5) > 0  # (else the test shows nothing)
    assert shown["buffered"] == rfc3339_ms(instant)  # buffered: its own instant, as documented
    run = twins.runs.get(job, instant)
    assert run is not None
    assert run.status == RunStatus.SKIPPED
    assert run_json(run)["due_at"] == rfc3339_ms(instant), (
        "the dropped run-now shows a jittered due_at"
    )
