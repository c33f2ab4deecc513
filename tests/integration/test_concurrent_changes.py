"""Changes of one job that race each other without If-Match (found by an outside audit): each
is a read-modify-write retried over the concurrent change, so none answers 409 "changed
concurrently" while a few others write the job, a cancel racing a cancel answers as a cancel
of a cancelled job does (200), and a cancel racing an update still cancels. With If-Match a
change made meanwhile is a 412, as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from duetime.domain.errors import PreconditionFailed
from duetime.domain.jobs import JobStatus
from tests.integration.test_partitioned_sweep import Twins


def interfering(twins: Twins, times: int, change: Callable[[int], None]) -> list[int]:
    """The job store's writes of a job, `times` times, are each beaten by `change(n)` (another
    request's write, made just before): the caller's conditional write then fails."""
    replace = twins.jobs.replace
    made: list[int] = []

    def beaten(job: Any, **kwargs: Any) -> None:
        if len(made) < times:
            made.append(len(made))
            twins.jobs.replace = replace  # type: ignore[method-assign]
            try:
                change(len(made))
            finally:
                twins.jobs.replace = beaten  # type: ignore[method-assign]
        replace(job, **kwargs)

    twins.jobs.replace = beaten  # type: ignore[method-assign]
    return made


@pytest.mark.parametrize("action", ["cancel", "pause"])
def test_given_an_update_racing_a_status_change_then_the_change_is_made(action: str) -> None:
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 60})
    made = interfering(
        twins, 4, lambda n: twins.service.update("t", job_id, {"name": f"renamed {n}"})
    )

    view = getattr(twins.service, action)("t", job_id)

    assert made == [0, 1, 2, 3]
    stored = twins.jobs.get("t", job_id)
    assert stored is not None
    wanted = JobStatus.CANCELLED if action == "cancel" else JobStatus.PAUSED
    assert (view.status, stored.status, stored.spec.name) == (wanted, wanted, "renamed 4")


def test_given_two_cancels_at_once_then_both_answer_the_cancelled_job() -> None:
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 60})
    interfering(twins, 1, lambda _: twins.service.cancel("t", job_id))

    view = twins.service.cancel("t", job_id)

    assert view.status == JobStatus.CANCELLED
    stored = twins.jobs.get("t", job_id)
    assert stored is not None
    assert (stored.status, stored.version) == (JobStatus.CANCELLED, 2)  # cancelled once


def test_given_several_updates_racing_one_then_each_applies() -> None:
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 60})
    interfering(twins, 6, lambda n: twins.service.update("t", job_id, {"tags": {f"k{n}": "v"}}))

    twins.service.update("t", job_id, {"description": "mine"})

    stored = twins.jobs.get("t", job_id)
    assert stored is not None
    assert (stored.spec.description, stored.spec.tags) == ("mine", {"k6": "v"})
    assert stored.version == 1 + 6 + 1


def test_given_if_match_when_the_job_changed_meanwhile_then_412_and_no_retry() -> None:
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 60})
    interfering(twins, 1, lambda _: twins.service.update("t", job_id, {"name": "theirs"}))

    with pytest.raises(PreconditionFailed):
        twins.service.cancel("t", job_id, if_match=frozenset({1}))

    stored = twins.jobs.get("t", job_id)
    assert stored is not None
    assert (stored.status, stored.spec.name) == (JobStatus.SCHEDULED, "theirs")
