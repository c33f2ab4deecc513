"""Fault injection with Jepsen-style accounting (docs/reliability.md).

Each test submits a mix of one-off and bounded recurring jobs whose target records every
execution, injects one kind of fault, lets the system run on (ticks, drains, visibility
timeouts expiring through time travel) and then accounts for every job: runs expected,
started, lost, duplicated, unexpected. No run may be lost; duplicates are allowed only in the
documented window (the target ran, the outcome was not recorded) and are counted exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.runs import RunStatus
from tests.reliability.accounting import Accounting
from tests.reliability.harness import (
    Cluster,
    CrashPoint,
    TransientErrors,
    Workload,
    claimed,
    crash_after,
    open_cluster,
    submit_mix,
    sweeper_crash_points,
    worker_crash_points,
)

JOBS = 30
WINDOW_SECONDS = 180


def run_through(
    cluster: Cluster,
    workload: Workload,
    *,
    ticks: Callable[[int], Sequence[int]] = lambda _: (0,),
    faults: Sequence[CrashPoint | TransientErrors] = (),
) -> Accounting:
    """Run through the workload's window with the faults and the given ticks, heal, run on
    normally until every recovery path has had its time, and account."""
    cluster.run(WINDOW_SECONDS // 60 + 1, ticks=ticks)
    for fault in faults:
        fault.enabled = False
    cluster.recover(workload)
    return workload.account(cluster.recorder)


def assert_no_loss(accounting: Accounting, duplicated: int = 0) -> None:
    totals = accounting.totals
    report = accounting.table(only_anomalies=True)
    assert totals.expected > JOBS, report  # recurring jobs: more runs than jobs
    assert totals.lost == 0, f"lost runs {accounting.lost_runs()}\n{report}"
    assert totals.unexpected == 0, report
    assert totals.started == totals.expected, report
    assert totals.duplicated == duplicated, report


def test_given_no_faults_then_every_expected_run_starts_exactly_once() -> None:
    with open_cluster() as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)
        assert_no_loss(run_through(cluster, workload))


# --- crash points --------------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["after-read", "after-send", "between-shards"])
def test_given_the_sweeper_dies_at_a_crash_point_then_after_restart_no_run_is_lost(
    point: str,
) -> None:
    with open_cluster() as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)
        crash, install = sweeper_crash_points(every=2, limit=3)[point]
        cluster.add(install)
        accounting = run_through(cluster, workload, faults=[crash])
        assert crash.crashes >= 1
        assert 1 <= cluster.crashes[crash.name] <= crash.crashes
        assert cluster.restarts == sum(cluster.crashes.values())
        # A page sent but not recorded is sent again; the claim absorbs the copies.
        assert_no_loss(accounting)


@pytest.mark.parametrize("point", ["after-claim", "after-execute", "after-record"])
def test_given_the_worker_dies_at_a_crash_point_then_after_restart_no_run_is_lost(
    point: str,
) -> None:
    with open_cluster() as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)
        crash, install = worker_crash_points(every=3, limit=5)[point]
        cluster.add(install)
        accounting = run_through(cluster, workload, faults=[crash])
        assert crash.crashes >= 3
        assert cluster.restarts >= 1
        # Only a death between executing and recording repeats the target, once per death:
        # the crash itself at "after-execute", and at any point another thread of the dead
        # process that had executed its run and reached the recording.
        if point == "after-execute":
            assert crash.window_deaths >= crash.crashes
        if point == "after-claim":
            assert crash.window_deaths == 0
        assert_no_loss(accounting, duplicated=crash.window_deaths)


# --- delivery and tick faults --------------------------------------------------------------------


def test_given_duplicate_sends_and_lost_deletes_then_each_run_executes_once() -> None:
    with open_cluster(duplicate_sends=True, lose_deletes=0.3) as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)
        assert_no_loss(run_through(cluster, workload))


@pytest.mark.parametrize(
    ("name", "ticks"),
    [
        ("duplicated", lambda minute: (0, 0)),
        ("missed", lambda minute: () if 1 <= minute <= 4 else (0,)),
        # A stale tick of the previous minute delivered after the current one, and on odd
        # minutes an invocation whose clock runs 25 s ahead.
        ("out of order", lambda minute: (0, -60_000) if minute % 2 == 0 else (25_000, 0)),
    ],
)
def test_given_tick_faults_then_no_run_is_lost_or_duplicated(
    name: str, ticks: Callable[[int], Sequence[int]]
) -> None:
    with open_cluster() as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)
        assert_no_loss(run_through(cluster, workload, ticks=ticks))
        assert cluster.failed_ticks == 0


def test_given_concurrent_ticks_then_no_run_is_lost_or_duplicated() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with open_cluster() as cluster, ThreadPoolExecutor(3) as pool:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)

        def three_at_once(minute: int) -> Sequence[int]:
            list(pool.map(lambda _: cluster.tick(), range(3)))
            return ()

        assert_no_loss(run_through(cluster, workload, ticks=three_at_once))


# --- transient AWS errors ------------------------------------------------------------------------


@pytest.mark.slow
def test_given_throttling_and_server_errors_on_20_percent_of_calls_then_no_run_is_lost() -> None:
    errors = TransientErrors(rate=0.2, ambiguous_rate=0.05, seed=3)
    with open_cluster() as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS)
        cluster.add(errors.install)
        accounting = run_through(cluster, workload, faults=[errors])
        injected = sum(errors.injected.values())
        assert injected > 30, errors.injected
        assert any("ProvisionedThroughputExceeded" in k for k in errors.injected)
        assert any("InternalError" in k or "InternalServerError" in k for k in errors.injected)
        # The SDK's retries hide nearly all of them; a recording that failed even after those
        # leaves the message to come back: the only way to run a target twice.
        totals = accounting.totals
        assert totals.lost == 0, accounting.table(only_anomalies=True)
        assert totals.unexpected == 0
        assert totals.duplicated <= errors.window_failures


# --- poison messages -----------------------------------------------------------------------------


def test_given_poison_messages_then_they_end_in_the_dlq_and_the_rest_still_runs() -> None:
    with open_cluster() as cluster:
        workload = submit_mix(cluster, 12, window_seconds=120, seed=5, recurring_share=0.1)
        # A run whose target always fails: after its last attempt, to the DLQ with the reason.
        failing = cluster.submit(
            {
                "schedule": {"delay_seconds": 0},
                "target": {"type": "handler", "name": "duetime.fail"},
                "retry": {"max_attempts": 2, "backoff_seconds": 2},
            }
        )
        # A run that kills its worker every time: each killed attempt counts, so after its last
        # (3 by default) it goes to the DLQ with the reason, as any failing run.
        killer = cluster.submit({"schedule": {"delay_seconds": 0}, "priority": "high"})
        point = CrashPoint(
            "worker: crashes on this run every time",
            when=lambda result: claimed(result) and result[1].job_id == killer,
        )
        cluster.add(crash_after(lambda p: p.runs, "claim", point))
        # A message no worker can read: made visible again at once until it is moved.
        url = cluster.settings.queue(Runtime.LAMBDA, Priority.LOW).url
        cluster.sqs.send_message(QueueUrl=url, MessageBody='{"not": "a run"}')

        for _ in range(12):  # each crash leaves the killer's message invisible for 120 s
            cluster.run(1)
            cluster.advance(61)
            cluster.drain()
        cluster.recover(workload)

        assert point.crashes == 3
        dead = cluster.dead_messages()
        by_body = {m["Body"]: m for m in dead}
        assert len(dead) == 3, [m["Body"] for m in dead]
        reasons = {
            RunMessage.from_json(m["Body"]).job_id: m.get("MessageAttributes", {})
            .get("duetime-reason", {})
            .get("StringValue")
            for m in dead
            if m["Body"] != '{"not": "a run"}'
        }
        assert reasons[failing] == "attempt 2 of 2: duetime.fail: attempt 2"
        assert reasons[killer] == (
            "attempt 3 of 3: the worker stopped during the attempt (killed at its timeout, "
            "or crashed)"
        )
        assert '{"not": "a run"}' in by_body
        failed = next(RunMessage.from_json(b) for b in by_body if failing in b)
        run = cluster.parts.runs.get(failing, failed.scheduled_ms)
        assert run is not None
        assert run.status == RunStatus.FAILED
        # Everything else ran: the poison did not take healthy runs down with it.
        accounting = workload.account(cluster.recorder)
        assert accounting.totals.lost == 0, accounting.table(only_anomalies=True)
        assert accounting.totals.duplicated == 0
        assert wall_ms() > workload.last_due_ms


# --- found by the accounting ---------------------------------------------------------------------


# Found by the accounting: the sweep that plans a recurring job's final round marks the job
# `completed` before that round's messages are sent, and the worker used to drop every run of a
# job not `scheduled` (it meant cancelled and paused ones): the last occurrences were lost.
def test_given_recurring_jobs_with_an_end_then_every_occurrence_up_to_the_end_runs() -> None:
    with open_cluster() as cluster:
        workload = submit_mix(cluster, JOBS, window_seconds=WINDOW_SECONDS, bounded=True)
        cluster.run(WINDOW_SECONDS // 60 + 1)
        cluster.recover(workload)
        accounting = workload.account(cluster.recorder)
        assert accounting.totals.lost == 0, accounting.table(only_anomalies=True)
