"""The pure accounting of tests.reliability.accounting: expected occurrences and the per-job
report."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.domain.schedule import parse_schedule
from duetime.domain.timeutil import to_ms
from tests.reliability.accounting import Execution, account, expected_occurrences

CREATED = datetime(2026, 11, 21, 10, 0, 5, tzinfo=UTC)
T0 = to_ms(CREATED)


def test_given_a_bounded_rate_then_every_occurrence_up_to_the_end_is_expected() -> None:
    schedule = parse_schedule({"rate_seconds": 30, "end_at": "2026-11-21T10:02:05Z"})
    assert expected_occurrences(schedule, created_at=CREATED) == [
        T0 + 30_000 * k for k in range(1, 5)
    ]


def test_given_a_one_off_then_one_run_is_expected() -> None:
    schedule = parse_schedule({"delay_seconds": 10})
    assert expected_occurrences(schedule, created_at=CREATED) == [T0 + 10_000]


def test_given_an_unbounded_schedule_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="no end"):
        expected_occurrences(parse_schedule({"rate_seconds": 1}), created_at=CREATED)


def test_given_executions_then_each_job_reports_started_lost_duplicated_unexpected() -> None:
    expected = {"a": [1, 2, 3], "b": [10]}
    executions = [
        Execution("a", 1),
        Execution("a", 1),  # the same attempt twice: a duplicate
        Execution("a", 2, attempt=1),
        # Recorded executions completed: a second one is a duplicate even as another attempt
        # (an attempt whose outcome was lost is abandoned and retried).
        Execution("a", 2, attempt=2),
        Execution("b", 11),  # not an occurrence of b
        Execution("c", 5),  # not a job of the experiment
    ]
    accounting = account(expected, executions, {"a": "rate", "b": "at"})
    a, b, c = accounting.jobs
    assert (a.expected, a.started, a.lost, a.duplicated, a.unexpected) == (3, 2, 1, 2, 0)
    assert a.lost_runs == (3,)
    assert (b.expected, b.started, b.lost, b.duplicated, b.unexpected) == (1, 0, 1, 0, 1)
    assert (c.kind, c.expected, c.unexpected) == ("unknown", 0, 1)
    totals = accounting.totals
    assert (totals.jobs, totals.expected, totals.started) == (3, 4, 2)
    assert (totals.lost, totals.duplicated, totals.unexpected) == (2, 2, 2)
    assert accounting.lost_runs() == [("a", 3), ("b", 10)]


def test_given_an_accounting_then_the_table_lists_jobs_and_totals() -> None:
    accounting = account({"job-1": [1, 2], "job-2": [3]}, [Execution("job-1", 1)])
    lines = accounting.table().splitlines()
    assert lines[0].split() == [
        "JOB", "KIND", "EXPECTED", "STARTED", "LOST", "DUPLICATED", "UNEXPECTED"
    ]  # fmt: skip
    assert lines[1].split() == ["job-1", "-", "2", "1", "1", "0", "0"]
    assert lines[-1].split() == ["TOTAL", "2", "jobs", "3", "1", "2", "0", "0"]
    anomalies = accounting.table(only_anomalies=True).splitlines()
    assert [line.split()[0] for line in anomalies] == ["JOB", "job-1", "job-2", "TOTAL"]
