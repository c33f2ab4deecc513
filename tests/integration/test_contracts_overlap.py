"""The overlap gate and the unclaimed run records (`skipped`, `buffered`): the same contract on
the in-memory twins and on DynamoDB (moto), as in test_contracts.py."""

from __future__ import annotations

from dataclasses import replace

from duetime.adapters.codec import job_from_values, job_to_values
from duetime.domain.overlap import Gate, Overlap
from duetime.domain.runs import ClaimOutcome, Run, RunStatus
from duetime.ports import JobStore, RunStore
from tests.integration import test_contracts as contracts
from tests.integration.test_contracts import JOB_ID, SCHEDULED_MS, TENANT, make_claim, make_job

# The contract suite's fixtures: each test runs on the twin and on DynamoDB.
job_store = contracts.job_store
run_store = contracts.run_store


def unclaimed(status: RunStatus) -> Run:
    return Run(TENANT, JOB_ID, SCHEDULED_MS, status, 0, expires_at=SCHEDULED_MS // 1000 + 60)


def test_given_no_gate_then_it_reads_empty_and_the_first_write_wins(job_store: JobStore) -> None:
    assert job_store.gate(TENANT, "job-1") == Gate()

    assert job_store.put_gate(TENANT, "job-1", Gate(10, 5, None, 0), 99)
    assert not job_store.put_gate(TENANT, "job-1", Gate(20, 6, None, 0), 99)  # a racing first

    assert job_store.gate(TENANT, "job-1") == Gate(10, 5, None, 1)
    assert job_store.gate("other-tenant", "job-1") == Gate()


def test_given_a_gate_then_writes_compare_its_version(job_store: JobStore) -> None:
    job_store.put_gate(TENANT, "job-1", Gate(10, 5, None, 0), 99)
    stored = job_store.gate(TENANT, "job-1")

    assert job_store.put_gate(TENANT, "job-1", replace(stored, buffered_ms=11), 99)
    assert not job_store.put_gate(TENANT, "job-1", replace(stored, buffered_ms=12), 99)

    assert job_store.gate(TENANT, "job-1") == Gate(10, 5, 11, 2)
    assert job_store.put_gate(TENANT, "job-1", Gate(None, 7, None, 2), 99)
    assert job_store.gate(TENANT, "job-1") == Gate(None, 7, None, 3)


def test_given_a_gate_then_it_keeps_the_jobs_generation(job_store: JobStore) -> None:
    # (Its buffered occurrence is dropped once the job has a newer one: a pause, a re-arm.)
    job_store.put_gate(TENANT, "job-1", Gate(10, 5, 11, 0, generation=0), 99)
    assert job_store.gate(TENANT, "job-1") == Gate(10, 5, 11, 1, generation=0)
    job_store.put_gate(TENANT, "job-1", Gate(None, 7, None, 1, generation=3), 99)
    assert job_store.gate(TENANT, "job-1").generation == 3
    # and its holder's, which buffering one of a newer generation behind it keeps
    job_store.put_gate(TENANT, "job-1", Gate(10, 8, 11, 2, generation=4, holder_generation=3), 99)
    assert job_store.gate(TENANT, "job-1") == Gate(10, 8, 11, 3, 4, holder_generation=3)
    assert job_store.gate(TENANT, "job-1").held_at == 3


def test_given_a_pinned_holder_then_the_gate_keeps_it_pinned(job_store: JobStore) -> None:
    # (A run claimed under `allow`, pinned by a PATCH to `skip`: a PATCH on to `buffer_one`
    # unpins it; services.overlap.)
    job_store.put_gate(TENANT, "job-1", Gate(10, 5, None, 0, pinned=True), 99)
    assert job_store.gate(TENANT, "job-1") == Gate(10, 5, None, 1, pinned=True)
    job_store.put_gate(TENANT, "job-1", Gate(None, 7, None, 1), 99)
    assert job_store.gate(TENANT, "job-1").pinned is False


def test_given_a_gate_then_listings_and_scans_never_return_it(job_store: JobStore) -> None:
    job = make_job(recurring=True)
    job_store.create(job)
    job_store.put_gate(TENANT, job.id, Gate(10, 5, None, 0), 99)

    assert [j.id for j in job_store.list(TENANT, 10, None).items] == [job.id]
    assert [j.id for j in job_store.scan_active(0, 1)] == [job.id]


def test_given_no_run_when_recording_skipped_then_it_is_stored_once(run_store: RunStore) -> None:
    assert run_store.record(unclaimed(RunStatus.SKIPPED)) is None
    again = run_store.record(unclaimed(RunStatus.SKIPPED))

    assert again is not None
    assert again.status == RunStatus.SKIPPED
    assert run_store.get(JOB_ID, SCHEDULED_MS) == unclaimed(RunStatus.SKIPPED)
    # A skipped run is finished: a late delivery of it does not run it
    outcome, _ = run_store.claim(make_claim())
    assert outcome == ClaimOutcome.DONE


def test_given_a_buffered_run_then_it_can_be_claimed_or_skipped(run_store: RunStore) -> None:
    assert run_store.record(unclaimed(RunStatus.BUFFERED)) is None

    outcome, run = run_store.claim(make_claim())

    assert outcome == ClaimOutcome.CLAIMED
    assert run is not None
    assert run.status == RunStatus.RUNNING
    assert run_store.get(JOB_ID, SCHEDULED_MS) == run
    # A claimed run is never overwritten by a record
    stored = run_store.record(unclaimed(RunStatus.SKIPPED))
    assert stored is not None
    assert stored.status == RunStatus.RUNNING
    # A buffered run may become skipped
    other = replace(unclaimed(RunStatus.BUFFERED), scheduled_ms=SCHEDULED_MS + 1_000)
    run_store.record(other)
    assert run_store.record(replace(other, status=RunStatus.SKIPPED)) is None
    skipped = run_store.get(JOB_ID, SCHEDULED_MS + 1_000)
    assert skipped is not None
    assert skipped.status == RunStatus.SKIPPED


def test_the_overlap_policy_round_trips_through_the_job_item() -> None:
    job = make_job(recurring=True)
    for policy in Overlap:
        stored = replace(job, spec=replace(job.spec, overlap=policy))
        assert job_from_values(job_to_values(stored)) == stored
