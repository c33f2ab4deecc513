"""`duetime dlq redrive` of a gated job's dead run that never reached its claim (no run record:
the queue's redrive policy moved it after 10 receives, as in a long runs-table outage) while
another occurrence runs: it goes on beside that one, as a retry does (cli.md). Until
2026-12-01 the gate recorded it `skipped` and it never ran, though reported redriven and gone
from the DLQ; several redriven together onto a free gate: one ran (an outside lifecycle audit,
round eight). A redriven message is marked (`RunMessage.redriven`) and `_beside` lets it by."""

from __future__ import annotations

import pytest

from duetime.adapters.memory.queues import MemoryDeadLetters
from duetime.domain.messages import RunMessage
from duetime.domain.runs import RunStatus
from duetime.domain.timeutil import rfc3339_ms
from duetime.services.dead_letters import QUEUE_KEYS, DeadRuns, RedriveReport
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins

DEAD = 120  # the occurrence whose message dies
QUEUE = "lambda/normal"


def _dying(overlap: str) -> tuple[Twins, str, MemoryDeadLetters]:
    """A job whose 50 s runs come every minute; +120's message is moved to the DLQ at +100,
    before any worker claimed it (the redrive policy after 10 receives in a runs-table
    outage): no run record."""
    twins = Twins()
    letters = MemoryDeadLetters(twins.clock)
    job = twins.create(
        schedule={"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 3600_000)},
        payload={"seconds": 50},
        timeout_seconds=100,
        overlap=overlap,
        retry={"max_attempts": 1},
    )

    def park() -> None:
        stored = twins.queue._queues[QUEUE]
        for s in list(stored):
            if RunMessage.from_json(s.body).scheduled_ms == T0 + DEAD * 1000:
                stored.remove(s)
                letters.add(QUEUE, s.body, None)
                return
        raise AssertionError("+120's message is not queued")

    twins.at(100, park)
    return twins, job, letters


def _run(overlap: str, waiting: bool = False) -> tuple[Twins, str, RedriveReport]:
    twins, job, letters = _dying(overlap)
    if waiting:  # a run-now at +305 waits behind +300 (buffer_one's one place taken)
        twins.at(305, lambda: twins.service.run_now("t", job))
    reports: list[RedriveReport] = []
    dead_runs = DeadRuns(twins.jobs, twins.runs, twins.queue, letters, twins.queue.auth)
    # Redriven at +310, while +300 runs (to +350).
    twins.at(
        310,
        lambda: reports.append(
            dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=twins.clock.now)
        ),
    )
    twins.run_for(600)
    return twins, job, reports[0]


@pytest.mark.parametrize(
    ("overlap", "waiting"),
    [("skip", False), ("buffer_one", True)],
    ids=["skip", "buffer_one with one waiting"],
)
def test_a_redriven_run_that_never_reached_its_claim_runs_beside_the_active_one(
    overlap: str, waiting: bool
) -> None:
    twins, job, report = _run(overlap, waiting=waiting)
    assert [attempt for _, attempt, _ in report.redriven] == [1]  # reported redriven
    record = twins.runs.get(job, T0 + DEAD * 1000)
    assert twins.start_of(DEAD) is not None, (
        f"redriven, deleted from the DLQ, and never run: {record.status.value if record else None}"
    )
    assert record.status == RunStatus.SUCCEEDED


def test_dead_runs_of_a_gated_job_that_never_reached_their_claim_all_run_when_redriven() -> None:
    # Three occurrences of a skip job (5 s runs every minute) die unclaimed (their job's item
    # could not be read, say, until it was repaired), redriven together onto a free gate: all
    # run (until 2026-12-01 the first took it, the other two were recorded `skipped`).
    twins = Twins()
    letters = MemoryDeadLetters(twins.clock)
    job = twins.create(
        schedule={"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 3600_000)},
        payload={"seconds": 5},
        timeout_seconds=100,
        overlap="skip",
    )
    queue = "lambda/normal"
    dead = (60, 120, 180)

    def park() -> None:
        stored = twins.queue._queues[queue]
        for s in list(stored):
            if RunMessage.from_json(s.body).scheduled_ms in {T0 + d * 1000 for d in dead}:
                stored.remove(s)
                letters.add(queue, s.body, None)

    for at in (50, 110, 170):
        twins.at(at, park)
    reports: list[RedriveReport] = []
    dead_runs = DeadRuns(twins.jobs, twins.runs, twins.queue, letters, twins.queue.auth)
    twins.at(
        220,  # +240 is not due yet: the gate is free
        lambda: reports.append(
            dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=twins.clock.now)
        ),
    )
    twins.run_for(400)
    assert len(reports[0].redriven) == 3
    statuses = {d: twins.runs.get(job, T0 + d * 1000).status.value for d in dead}
    # cli.md: each "runs beside that one, as a retry the gate lets through"
    assert all(s == "succeeded" for s in statuses.values()), f"redriven together: {statuses}"


# A review (2026-12-01): under buffer_one a redriven run with no record was written into the
# gate as the one waiting while it ran beside the holder: the next occurrence was skipped.


def _run_buffer_one(redrive: bool) -> tuple[Twins, str, list[int], list[object]]:
    twins, job, letters = _dying("buffer_one")
    gates: list[object] = []
    if redrive:
        dead_runs = DeadRuns(twins.jobs, twins.runs, twins.queue, letters, twins.queue.auth)
        # at +310, while +300 runs (to +350) and nothing waits
        twins.at(
            310,
            lambda: dead_runs.redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=twins.clock.now),
        )
        twins.at(312, lambda: gates.append(twins.jobs.gate("t", job)))
    asked: list[int] = []
    twins.at(320, lambda: asked.append(twins.service.run_now("t", job)))  # +300 still runs
    twins.run_for(600)
    return twins, job, asked, gates


def test_a_redriven_run_going_beside_the_holder_takes_no_buffered_place() -> None:
    twins, job, asked, gates = _run_buffer_one(redrive=True)
    assert twins.start_of(DEAD) is not None  # the redriven run ran (37d125f)
    gate = gates[0]
    assert gate.buffered_ms != T0 + DEAD * 1000, (  # type: ignore[attr-defined]
        "the gate names the redriven run, already running, as the one waiting"
    )
    run_now = twins.runs.get(job, asked[0])
    assert run_now is not None
    assert run_now.status == RunStatus.SUCCEEDED, (
        f"the run-now due while +300 ran, with nothing waiting, ended {run_now.status.value}"
    )


def test_control_without_the_redrive_the_run_now_waits_and_runs() -> None:
    twins, job, asked, _ = _run_buffer_one(redrive=False)
    run_now = twins.runs.get(job, asked[0])
    assert run_now is not None
    assert run_now.status == RunStatus.SUCCEEDED
