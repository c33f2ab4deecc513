"""The job reads of runs that wake together are merged into one store call
(duetime.services.job_reads)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import pytest
from botocore.exceptions import ClientError

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.domain.jobs import Job
from duetime.ports import StoreError
from duetime.services.job_reads import Found, JobReads
from tests.integration.test_contracts import TENANT, make_job


class GatedStore(MemoryJobStore):
    """The twin, counting its reads; the first read waits until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[list[tuple[str, str]]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.failing_read = 0  # the read (1, 2, ...) that fails; 0: none
        self.failure: Exception = StoreError("throttled")  # how it fails
        self.unreadable: set[str] = set()  # job ids whose items do not decode

    def get_with_dependents(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[Job, tuple[str, ...]]]:
        self.reads.append(list(keys))
        if len(self.reads) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if len(self.reads) == self.failing_read:
            raise self.failure
        if self.unreadable & {job_id for _, job_id in keys}:
            raise ValueError("Expecting value: line 1 column 1 (char 0)")  # a spec not JSON
        return super().get_with_dependents(keys)


def jobs(store: MemoryJobStore, n: int) -> list[Job]:
    made = [make_job(entropy=i) for i in range(n)]
    for job in made:
        store.create(job)
    return made


def queued(reads: JobReads, n: int) -> None:
    """Wait until `n` runs have joined the next read."""
    deadline = time.monotonic() + 10
    while len(reads._next.keys) < n:
        assert time.monotonic() < deadline
        time.sleep(0.001)


@contextlib.contextmanager
def first_alone_then_merged(
    store: GatedStore, reads: JobReads, made: list[Job]
) -> Iterator[tuple[Future[Found | None], list[Future[Found | None]]]]:
    """The first job's read, made alone and held in flight, then the others' asked meanwhile:
    merged into the next read once it is let go."""
    with ThreadPoolExecutor(len(made)) as pool:
        first = pool.submit(reads.get, TENANT, made[0].id)
        assert store.entered.wait(10)  # the first read is in flight
        rest = [pool.submit(reads.get, TENANT, job.id) for job in made[1:]]
        queued(reads, len(rest))  # behind the read in flight
        store.release.set()
        yield first, rest


def test_a_lone_read_is_made_at_once_with_the_jobs_dependents() -> None:
    store = GatedStore()
    store.release.set()
    job = jobs(store, 1)[0]
    store.add_dependent(TENANT, job.id, "dep")
    reads = JobReads(store)

    marked = replace(job, has_dependents=True, version=job.version + 1)
    assert reads.get(TENANT, job.id) == (marked, ("dep",))
    assert reads.get(TENANT, "01KF00000000000000000NOPE0") is None
    assert store.reads == [[(TENANT, job.id)], [(TENANT, "01KF00000000000000000NOPE0")]]


def test_runs_asking_while_a_read_is_in_flight_share_the_next_read() -> None:
    store = GatedStore()
    made = jobs(store, 11)
    reads = JobReads(store)
    with first_alone_then_merged(store, reads, made) as (first, rest):
        found = [first.result(10), *(f.result(10) for f in rest)]

    assert [f[0] if f else None for f in found] == made
    assert len(store.reads) == 2  # the lone first read, then one read for the ten
    assert sorted(store.reads[1]) == sorted((TENANT, job.id) for job in made[1:])


def test_a_failed_read_fails_every_run_that_shared_it() -> None:
    store = GatedStore()
    made = jobs(store, 3)
    reads = JobReads(store)
    store.failing_read = 2
    with first_alone_then_merged(store, reads, made) as (first, others):
        assert first.result(10) == (made[0], ())
        for future in others:
            with pytest.raises(StoreError, match="throttled"):
                future.result(10)
    assert len(store.reads) == 2
    # The next runs read again: nothing is remembered of a failed read.
    assert reads.get(TENANT, made[2].id) == (made[2], ())


@pytest.mark.parametrize("passing", [True, False])
def test_the_runs_that_shared_a_failed_read_fail_as_passing_as_it_did(passing: bool) -> None:
    # Their messages come back as the leader's does: in minutes through an outage, soon for a
    # refusal (until 2026-12-01 every joiner's error was passing: services.results.back_soon).
    store = GatedStore()
    made = jobs(store, 3)
    reads = JobReads(store)
    store.failing_read = 2
    store.failure = StoreError("AccessDeniedException", transient=passing)
    with first_alone_then_merged(store, reads, made) as (first, others):
        assert first.result(10) == (made[0], ())
        errors = []
        for future in others:
            with pytest.raises(StoreError) as failed:
                future.result(10)
            errors.append(failed.value.transient)
    assert errors == [passing, passing]


def test_a_job_item_that_does_not_decode_fails_its_own_runs_only() -> None:
    # Found by an outside audit: one corrupted job item failed the merged read of a whole
    # worker batch, every time it came back, until the healthy runs were in the DLQ unrun.
    store = GatedStore()
    made = jobs(store, 4)
    store.unreadable = {made[2].id}
    reads = JobReads(store)
    with first_alone_then_merged(store, reads, made) as (first, others):
        assert first.result(10) == (made[0], ())
        assert others[0].result(10) == (made[1], ())
        with pytest.raises(ValueError, match="Expecting value"):
            others[1].result(10)
        assert others[2].result(10) == (made[3], ())
    # the merged read, then each of its runs alone
    assert sorted(map(len, store.reads[1:])) == [1, 1, 1, 3]


def test_a_read_failed_by_the_store_is_not_made_again_by_each_run() -> None:
    # (Found by review: a throttle, an SDK error rather than a StoreError, was taken for an
    # item that does not decode, and each run read again: 11 reads for 10 runs.)
    store = GatedStore()
    made = jobs(store, 3)
    reads = JobReads(store)
    store.failing_read = 2
    store.failure = ClientError({"Error": {"Code": "ThrottlingException"}}, "BatchGetItem")
    with first_alone_then_merged(store, reads, made) as (first, others):
        assert first.result(10) == (made[0], ())
        for future in others:
            with pytest.raises((StoreError, ClientError), match="ThrottlingException"):
                future.result(10)
    assert len(store.reads) == 2  # the lone first read, then the merged one: not again


def test_a_job_changed_between_two_reads_is_read_as_it_is_now() -> None:
    store = GatedStore()
    store.release.set()
    job = jobs(store, 1)[0]
    reads = JobReads(store)
    assert reads.get(TENANT, job.id) == (job, ())
    paused = replace(job, version=job.version + 1)
    store.replace(paused, expected=job)

    assert reads.get(TENANT, job.id) == (paused, ())
