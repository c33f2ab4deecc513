"""A job moved by `PATCH` onto a one-off `at` an instant it already has an ended run at.

A run id names one instant of a job, so that one-off would never run: the claim takes it for
a copy of the ended run. Found by an outside lifecycle audit (round four): a `skip` job's
skipped occurrence made a one-off that instant stayed `scheduled` for good, its
`next_run_at` in the past. Since 2026-11-30 the update is refused, naming `schedule.at`."""

from __future__ import annotations

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import JobStatus
from duetime.domain.runs import RunStatus
from duetime.domain.timeutil import rfc3339_ms
from tests.integration.test_overlap import T0
from tests.integration.test_overlap_changes import Twins, every_ten_seconds


def patched_at(twins: Twins, job: str, when_s: int, onto_s: int) -> list[Exception]:
    """PATCH the job into a one-off `at` +onto_s when the clock reaches +when_s."""
    refused: list[Exception] = []

    def patch() -> None:
        try:
            twins.service.update("t", job, {"schedule": {"at": rfc3339_ms(T0 + onto_s * 1000)}})
        except ValidationError as error:
            refused.append(error)

    twins.at(when_s, patch)
    return refused


def test_a_one_off_onto_a_skipped_instant_is_refused_and_the_job_goes_on() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds(overlap="skip"))
    refused = patched_at(twins, job, 30, 20)
    twins.run_for(30)
    assert twins.statuses_s(job)[20] == RunStatus.SKIPPED

    [error] = refused
    assert isinstance(error, ValidationError)
    assert error.field == "schedule.at"
    assert "skipped" in error.message
    assert "another instant" in error.message
    view = twins.service.get("t", job)
    assert view.status == JobStatus.SCHEDULED
    assert view.job.spec.recurring
    twins.run_for(30)
    assert 60 in twins.statuses_s(job)  # the schedule goes on


def test_a_one_off_onto_a_succeeded_instant_is_refused() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds(payload={"seconds": 0}, overlap="allow"))
    refused = patched_at(twins, job, 25, 10)
    twins.run_for(25)
    assert twins.statuses_s(job)[10] == RunStatus.SUCCEEDED

    [error] = refused
    assert isinstance(error, ValidationError)
    assert error.field == "schedule.at"
    assert "succeeded" in error.message


def test_a_one_off_onto_a_free_past_instant_runs_now() -> None:
    twins = Twins()
    job = twins.create(**every_ten_seconds(payload={"seconds": 0}, overlap="allow"))
    refused = patched_at(twins, job, 25, 15)
    twins.run_for(40)
    assert refused == []
    assert twins.statuses_s(job).get(15) == RunStatus.SUCCEEDED
    assert 30 not in twins.statuses_s(job)  # a one-off now
    assert twins.service.get("t", job).status == JobStatus.SUCCEEDED


def test_a_one_off_onto_the_instant_of_a_buffered_occurrence_is_refused() -> None:
    # Accepted, the same update ended the waiting occurrence `skipped`, and the one-off (its
    # run id) was taken for a copy of it: it never ran (an outside lifecycle audit, round six).
    twins = Twins()
    job = twins.create(**every_ten_seconds())  # buffer_one: +10 runs to +25, +20 waits
    statuses: list[RunStatus] = []
    twins.at(21, lambda: statuses.append(twins.statuses_s(job)[20]))
    refused = patched_at(twins, job, 21, 20)
    twins.run_for(21)
    assert statuses == [RunStatus.BUFFERED]
    [error] = refused
    assert isinstance(error, ValidationError)
    assert error.field == "schedule.at"
    assert "buffered" in error.message
