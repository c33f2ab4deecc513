"""The record of a run after a claim and after its outcome: every field carried over, the
attempts kept and how their errors are shortened."""

from __future__ import annotations

from dataclasses import replace

from duetime.domain.runs import (
    EARLIER_ERROR_CHARS,
    MAX_ATTEMPTS_KEPT,
    MAX_ERROR_CHARS,
    Attempt,
    Lease,
    Run,
    RunClaim,
    RunOutcome,
    RunStatus,
    claimed_run,
    finished_run,
    not_retried,
    stopped_by_its_job,
    withdrawn,
)

LEASE = Lease("message-7", 2, 9_000)


def claim_of(attempt: int, now: int = 5_000) -> RunClaim:
    return RunClaim(
        tenant="tenant-a",
        job_id="job-1",
        scheduled_ms=1_000,
        attempt=attempt,
        lease=LEASE,
        now_ms=now,
        lateness_ms=40,
        expires_at=777,
        job_name="nightly",
        target_type="http",
        priority="high",
        runtime="fargate",
    )


def running(attempts: tuple[Attempt, ...], version: int = 3) -> Run:
    return Run(
        tenant="tenant-a",
        job_id="job-1",
        scheduled_ms=1_000,
        status=RunStatus.RUNNING,
        attempt=attempts[-1].number,
        attempts=attempts,
        lease=LEASE,
        expires_at=777,
        job_name="nightly",
        target_type="http",
        priority="high",
        runtime="fargate",
        version=version,
    )


def failed_attempt(number: int, error: str | None) -> Attempt:
    return Attempt(number, number * 100, 10, number * 100 + 50, error)


def test_given_a_running_run_when_finished_then_every_field_is_kept_but_status_lease_version() -> (
    None
):
    # Given attempt 2 of a run is running
    earlier = failed_attempt(1, "connection refused")
    run = replace(running((earlier, Attempt(2, 300, 25)), version=3), due_ms=1_250)

    # When it succeeds
    done = finished_run(run, RunOutcome(RunStatus.SUCCEEDED, finished_ms=450))

    # Then the run is the same run, finished, without a lease, one version on
    assert done == Run(
        tenant="tenant-a",
        job_id="job-1",
        scheduled_ms=1_000,
        status=RunStatus.SUCCEEDED,
        attempt=2,
        attempts=(earlier, Attempt(2, 300, 25, 450, None)),
        lease=None,
        expires_at=777,
        job_name="nightly",
        target_type="http",
        priority="high",
        runtime="fargate",
        version=4,
        due_ms=1_250,
    )


def test_given_an_error_longer_than_the_limit_when_finished_then_it_is_cut_to_the_limit() -> None:
    run = running((Attempt(1, 100, 0),))
    error = "e" * (MAX_ERROR_CHARS + 50)

    done = finished_run(run, RunOutcome(RunStatus.RETRYING, finished_ms=200, error=error))

    assert done.status == RunStatus.RETRYING
    assert done.error == "e" * MAX_ERROR_CHARS
    assert done.finished_ms == 200


def test_given_an_empty_error_when_finished_then_the_attempt_has_no_error() -> None:
    done = finished_run(
        running((Attempt(1, 100, 0),)), RunOutcome(RunStatus.FAILED, finished_ms=200, error="")
    )
    assert done.error is None


def test_given_a_retry_when_claimed_then_earlier_errors_are_shortened_and_it_is_added() -> None:
    # Given attempts 1 and 2 failed, with a long error and with no error text
    long_error = "x" * MAX_ERROR_CHARS
    existing = replace(
        running((failed_attempt(1, long_error), failed_attempt(2, None)), version=5),
        status=RunStatus.RETRYING,
    )

    # When attempt 3 is claimed
    claimed = claimed_run(existing, claim_of(3))

    # Then the earlier attempts are kept with their errors shortened, and attempt 3 is running
    assert claimed.attempts == (
        failed_attempt(1, "x" * EARLIER_ERROR_CHARS),
        failed_attempt(2, None),
        Attempt(3, 5_000, 40),
    )
    assert claimed.status == RunStatus.RUNNING
    assert claimed.attempt == 3
    assert claimed.version == 6


def test_given_many_failed_attempts_when_claimed_then_the_first_and_the_latest_are_kept() -> None:
    # Given more failed attempts than a record keeps, each started 1 s after the one before
    previous = tuple(
        replace(failed_attempt(n, f"error {n}"), started_ms=n * 1_000, lateness_ms=n)
        for n in range(1, MAX_ATTEMPTS_KEPT + 3)
    )
    existing = running(previous)

    # When the next attempt is claimed
    number = MAX_ATTEMPTS_KEPT + 3
    claimed = claimed_run(existing, claim_of(number))

    # Then the record holds MAX_ATTEMPTS_KEPT attempts: the first (the run's start and
    # lateness, as the API and the archive show them) and the latest, the new one last
    assert len(claimed.attempts) == MAX_ATTEMPTS_KEPT
    assert [a.number for a in claimed.attempts] == [
        1,
        *range(number - MAX_ATTEMPTS_KEPT + 2, number + 1),
    ]
    assert (claimed.started_ms, claimed.lateness_ms) == (1_000, 1)
    # and the next claim keeps it too
    again = claimed_run(
        finished_run(claimed, RunOutcome(RunStatus.RETRYING, 9_000, "e")), claim_of(number + 1)
    )
    assert [a.number for a in again.attempts] == [1, *range(number - 2, number + 2)]
    assert again.started_ms == 1_000


def test_given_no_record_when_claimed_then_the_record_carries_the_claims_fields() -> None:
    claimed = claimed_run(None, claim_of(1))
    assert claimed == Run(
        tenant="tenant-a",
        job_id="job-1",
        scheduled_ms=1_000,
        status=RunStatus.RUNNING,
        attempt=1,
        attempts=(Attempt(1, 5_000, 40),),
        lease=LEASE,
        expires_at=777,
        job_name="nightly",
        target_type="http",
        priority="high",
        runtime="fargate",
        version=1,
    )


def test_given_a_retry_claimed_when_withdrawn_then_the_run_ends_failed_at_its_last_attempt() -> (
    None
):
    # Given a run retrying after many failed attempts (more than a record keeps), claimed again
    retrying = replace(
        running(tuple(failed_attempt(n, f"error {n}") for n in range(1, MAX_ATTEMPTS_KEPT + 2))),
        status=RunStatus.RETRYING,
        lease=None,
    )
    claimed = claimed_run(retrying, claim_of(MAX_ATTEMPTS_KEPT + 2, now=9_000))

    # When its job's change withdraws that claim
    ended = withdrawn(claimed, "the job is paused")

    # Then the run ends failed at the last attempt that ran: its finish, its error, no lease
    assert ended is not None
    last = MAX_ATTEMPTS_KEPT + 1
    assert (ended.status, ended.attempt, ended.lease) == (RunStatus.FAILED, last, None)
    assert ended.attempts[-1].number == last
    assert ended.finished_ms == failed_attempt(last, None).finished_ms
    assert ended.error == f"error {last}; not retried: the job is paused"
    assert ended.started_ms == failed_attempt(1, None).started_ms
    assert ended.version == claimed.version + 1


def test_given_a_first_attempt_claimed_when_withdrawn_then_no_record_is_left() -> None:
    assert withdrawn(claimed_run(None, claim_of(1)), "the job is cancelled") is None


def test_given_a_retry_with_a_long_error_when_claimed_and_withdrawn_then_the_error_is_whole() -> (
    None
):
    # Given attempt 1 failed with an error as long as a record keeps
    long_error = "y" * MAX_ERROR_CHARS
    retrying = replace(
        running((failed_attempt(1, long_error),)), status=RunStatus.RETRYING, lease=None
    )

    # When attempt 2 is claimed, then withdrawn before it starts (its job was paused)
    claimed = claimed_run(retrying, claim_of(2))
    ended = withdrawn(claimed, "the job is paused")

    # Then the run ends with attempt 1's error, as a run dropped before its claim does: as
    # much of it as leaves room for the reason in a record's error
    assert claimed.attempts[0].error == long_error
    reason = "; not retried: the job is paused"
    assert ended is not None
    assert ended.error == long_error[: MAX_ERROR_CHARS - len(reason)] + reason


def test_given_a_retry_finished_then_the_earlier_errors_are_shortened_again() -> None:
    # Given attempt 2 claimed after attempt 1 failed with a long error
    claimed = claimed_run(
        replace(running((failed_attempt(1, "z" * MAX_ERROR_CHARS),)), status=RunStatus.RETRYING),
        claim_of(2),
    )

    # When attempt 2 finishes
    done = finished_run(claimed, RunOutcome(RunStatus.RETRYING, 6_000, "w" * MAX_ERROR_CHARS))

    # Then only the latest error is whole: the record stays near one write unit
    assert [a.error for a in done.attempts] == ["z" * EARLIER_ERROR_CHARS, "w" * MAX_ERROR_CHARS]


def test_given_a_claim_with_an_early_wait_then_its_attempt_keeps_it() -> None:
    claimed = claimed_run(None, replace(claim_of(1), early_wait_ms=123))
    assert claimed.attempts[-1].early_wait_ms == 123


def test_given_a_reason_longer_than_a_records_error_then_the_reason_is_kept_not_the_error() -> None:
    reason = "r" * MAX_ERROR_CHARS
    assert not_retried("the target refused it", reason) == f"; not retried: {reason}"


def test_given_an_attempt_that_never_finished_when_withdrawn_then_it_ends_at_the_claim() -> None:
    # Given attempts 1 and 2 (2 never finished: its worker died), and attempt 3 claimed
    earlier = (failed_attempt(1, "refused"), Attempt(2, 2_000, 10))
    retrying = replace(running(earlier), status=RunStatus.RETRYING, lease=None)
    claimed = claimed_run(retrying, claim_of(3, now=7_000))

    # When the claim is withdrawn
    ended = withdrawn(claimed, "the job is paused")

    # Then the run ends failed at attempt 2, at the withdrawn claim's start
    assert ended is not None
    assert (ended.attempt, ended.finished_ms) == (2, 7_000)


def test_given_asks_of_a_record_and_a_claim_then_the_earlier_is_kept() -> None:
    # Two upstreams' runs share a dependent's run id: a record not asked for (None) must not
    # free a claim asked for by a run-now or a backfill (an audit of the fan-out fix).
    asked = replace(claim_of(1), asked_ms=4_000)
    assert claimed_run(None, asked).asked_ms == 4_000
    unasked = replace(claimed_run(None, claim_of(1)), status=RunStatus.RETRYING)
    assert claimed_run(unasked, replace(asked, attempt=2)).asked_ms == 4_000
    earlier = replace(unasked, asked_ms=3_000)
    assert claimed_run(earlier, replace(asked, attempt=2)).asked_ms == 3_000
    assert claimed_run(earlier, claim_of(2)).asked_ms == 3_000


def test_only_an_error_ending_with_its_jobs_reason_is_a_run_stopped_by_its_job() -> None:
    # A target's own error holding `; not retried: ` (its text, a quoted log line) took its
    # failed run for one its job stopped, which triggers no `after` job (an outside console
    # audit, round two).
    def failed(error: str) -> Run:
        return Run("t", "j", 1, RunStatus.FAILED, 1, attempts=(Attempt(1, 0, 0, 5, error),))

    assert stopped_by_its_job(failed(not_retried("HTTP 500", "the job is paused")))
    assert stopped_by_its_job(failed(not_retried(None, "the job was paused or changed since")))
    assert not stopped_by_its_job(failed("HTTP 500; not retried: by policy, see the logs"))
    assert not stopped_by_its_job(failed("proxy says: not retried: upstream busy"))
    assert not stopped_by_its_job(
        replace(failed(not_retried("x", "the job is paused")), status=RunStatus.SUCCEEDED)
    )
