"""The dependents index (`after` schedules): the same contract on the in-memory twin and on
DynamoDB (moto), as in test_contracts.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from duetime.adapters.codec import job_from_values, job_to_values
from duetime.domain.schedule import After
from duetime.ports import ConditionFailed, JobStore
from tests.integration import test_contracts as contracts
from tests.integration.test_contracts import TENANT, make_job

job_store = contracts.job_store


def test_given_dependents_then_they_are_listed_per_upstream_and_tenant(
    job_store: JobStore,
) -> None:
    assert job_store.dependents(TENANT, "up") == ()

    job_store.add_dependent(TENANT, "up", "b")
    job_store.add_dependent(TENANT, "up", "a")
    job_store.add_dependent(TENANT, "up", "a")  # idempotent

    assert job_store.dependents(TENANT, "up") == ("a", "b")
    assert job_store.dependents("other-tenant", "up") == ()
    assert job_store.dependents(TENANT, "other") == ()


def test_given_a_cap_then_a_dependent_past_it_is_refused_and_nothing_is_added(
    job_store: JobStore,
) -> None:
    job_store.add_dependent(TENANT, "up", "a", at_most=2)
    job_store.add_dependent(TENANT, "up", "b", at_most=2)

    with pytest.raises(ConditionFailed):
        job_store.add_dependent(TENANT, "up", "c", at_most=2)

    job_store.add_dependent(TENANT, "up", "b", at_most=2)  # already there: still idempotent
    assert job_store.dependents(TENANT, "up") == ("a", "b")
    job_store.remove_dependent(TENANT, "up", "a")
    job_store.add_dependent(TENANT, "up", "c", at_most=2)  # room again
    assert job_store.dependents(TENANT, "up") == ("b", "c")


def test_given_a_removed_dependent_then_it_is_gone_and_removing_again_is_harmless(
    job_store: JobStore,
) -> None:
    job_store.add_dependent(TENANT, "up", "a")
    job_store.add_dependent(TENANT, "up", "b")

    job_store.remove_dependent(TENANT, "up", "a")
    job_store.remove_dependent(TENANT, "up", "a")
    job_store.remove_dependent(TENANT, "nothing", "a")

    assert job_store.dependents(TENANT, "up") == ("b",)
    job_store.remove_dependent(TENANT, "up", "b")
    assert job_store.dependents(TENANT, "up") == ()


def test_given_an_index_item_then_listings_and_scans_never_return_it(job_store: JobStore) -> None:
    job = make_job(recurring=True)
    job_store.create(job)
    job_store.add_dependent(TENANT, job.id, "a")

    assert [j.id for j in job_store.list(TENANT, 10, None).items] == [job.id]
    assert [j.id for j in job_store.scan_active(0, 1)] == [job.id]


def test_an_after_schedule_round_trips_through_the_job_item() -> None:
    job = make_job(recurring=True)
    stored = replace(job, spec=replace(job.spec, schedule=After("01UPSTREAM", "finished")))
    assert job_from_values(job_to_values(stored)) == stored


def test_given_jobs_then_they_are_read_with_their_dependents(job_store: JobStore) -> None:
    upstream, lone = make_job(entropy=1, recurring=True), make_job(entropy=2)
    foreign = make_job("other-tenant", entropy=3)
    for job in (upstream, lone, foreign):
        job_store.create(job)
    job_store.add_dependent(TENANT, upstream.id, "b")
    job_store.add_dependent(TENANT, upstream.id, "a")
    job_store.add_dependent(TENANT, "01KF00000000000000000NOPE0", "c")  # no such job

    found = job_store.get_with_dependents(
        [
            (TENANT, upstream.id),
            (TENANT, lone.id),
            (TENANT, lone.id),  # duplicates are tolerated
            (TENANT, "01KF00000000000000000NOPE0"),
            (TENANT, foreign.id),  # right id, wrong tenant
            ("other-tenant", foreign.id),
        ]
    )

    marked = replace(upstream, has_dependents=True, version=upstream.version + 1)
    assert found == {
        (TENANT, upstream.id): (marked, ("a", "b")),
        (TENANT, lone.id): (lone, ()),
        ("other-tenant", foreign.id): (foreign, ()),
    }
    assert job_store.get_with_dependents([]) == {}


def test_the_first_dependent_marks_its_upstream_with_a_new_version_once(
    job_store: JobStore,
) -> None:
    upstream = make_job(recurring=True)
    job_store.create(upstream)
    assert job_store.get(TENANT, upstream.id) == upstream  # not marked: has_dependents False

    job_store.add_dependent(TENANT, upstream.id, "a")
    job_store.add_dependent(TENANT, upstream.id, "b")
    job_store.remove_dependent(TENANT, upstream.id, "a")
    job_store.remove_dependent(TENANT, upstream.id, "b")

    # One new version in the job's life; the mark stays when the dependents are gone.
    marked = replace(upstream, has_dependents=True, version=upstream.version + 1)
    assert job_store.get(TENANT, upstream.id) == marked
    job_store.add_dependent(TENANT, "01KF00000000000000000NOPE0", "c")  # no job: no item made
    assert job_store.get(TENANT, "01KF00000000000000000NOPE0") is None


def test_a_write_that_read_the_upstream_before_its_mark_fails_and_cannot_drop_it(
    job_store: JobStore,
) -> None:
    upstream = make_job(recurring=True)
    job_store.create(upstream)
    read_before = job_store.get(TENANT, upstream.id)
    assert read_before is not None
    job_store.add_dependent(TENANT, upstream.id, "a")

    with pytest.raises(ConditionFailed):
        job_store.replace(
            replace(read_before, version=read_before.version + 1), expected=read_before
        )

    stored = job_store.get(TENANT, upstream.id)
    assert stored is not None
    assert stored.has_dependents is True
    job_store.replace(replace(stored, version=stored.version + 1), expected=stored)
    again = job_store.get(TENANT, upstream.id)
    assert again is not None
    assert again.has_dependents is True  # a later write keeps it
    found = job_store.get_with_dependents([(TENANT, upstream.id)])
    assert found[(TENANT, upstream.id)][1] == ("a",)


def test_only_marked_jobs_and_jobs_stored_before_the_mark_are_read_with_dependents(
    job_store: JobStore,
) -> None:
    # Index entries written before their upstream's item (no item to mark): one upstream is
    # stored unmarked, as a new job is; the other as a job stored before the mark existed.
    unmarked = make_job(entropy=1, recurring=True)
    older = replace(make_job(entropy=2, recurring=True), has_dependents=None)
    for job in (unmarked, older):
        job_store.add_dependent(TENANT, job.id, "a")
        job_store.create(job)

    found = job_store.get_with_dependents([(TENANT, unmarked.id), (TENANT, older.id)])

    assert found == {(TENANT, unmarked.id): (unmarked, ()), (TENANT, older.id): (older, ("a",))}
