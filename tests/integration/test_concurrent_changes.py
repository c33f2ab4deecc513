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


def test_given_a_pause_while_a_keyed_run_now_claims_its_key_then_every_copy_answers_alike() -> None:
    # Found by an outside audit: R1 claims its key; the owner pauses the job; R2, a copy of
    # R1, answers 202 with R1's run (the job was paused after the run was asked for); R1 then
    # read the job paused and answered 409, freeing the key: one key, a 202 and a 409, and the
    # 202 named a run never sent. Now R1 answers as R2 does: its run was asked for before the
    # pause, which stops it (nothing is sent).
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 3600})
    claim = twins.jobs.claim_key
    answers: dict[str, object] = {}

    def ask(name: str) -> None:
        try:
            answers[name] = twins.service.run_now("t", job_id, "rk")
        except Exception as exc:  # the answer: what the API turns into a 409
            answers[name] = type(exc).__name__

    def claim_then_pause(tenant: str, key: str, *args: Any) -> Any:
        recorded = claim(tenant, key, *args)
        if key == "rk" and "r2" not in answers:
            answers["r2"] = "asking"
            twins.clock.now += 10
            twins.service.pause("t", job_id)
            twins.clock.now += 10
            ask("r2")
        return recorded

    before = twins.sent()
    twins.jobs.claim_key = claim_then_pause  # type: ignore[method-assign]
    ask("r1")
    twins.jobs.claim_key = claim  # type: ignore[method-assign]
    ask("r3")  # the client's retry

    assert isinstance(answers["r1"], int)
    assert answers["r1"] == answers["r2"] == answers["r3"]
    assert twins.sent() == before  # paused: the run does not start


def test_given_a_completion_while_a_keyed_run_now_claims_its_key_then_its_run_is_sent() -> None:
    # Found by an outside fault audit: the job's schedule ended (the sweep marked it
    # completed) while a keyed run-now bound its key; the request answered 202 and sent
    # nothing, as for a pause, where a completed job's runs run: its run never existed. The
    # same request without a key sent it. A keyed copy after the completion did the same.
    twins = Twins(shards=1)
    job_id = twins.submit({"rate_seconds": 3600})
    claim = twins.jobs.claim_key
    answers: dict[str, object] = {}

    def claim_then_complete(tenant: str, key: str, *args: Any) -> Any:
        recorded = claim(tenant, key, *args)
        if key == "rk" and "completed" not in answers:
            twins.clock.now += 10
            stored = twins.jobs.get("t", job_id)
            assert stored is not None
            twins.service._dispatcher.complete(stored, twins.clock.now)
            answers["completed"] = True
            twins.clock.now += 10
        return recorded

    before = twins.sent()
    twins.jobs.claim_key = claim_then_complete  # type: ignore[method-assign]
    first = twins.service.run_now("t", job_id, "rk")
    twins.jobs.claim_key = claim  # type: ignore[method-assign]
    sent_by_first = twins.sent() - before
    copy = twins.service.run_now("t", job_id, "rk")  # the client's retry

    stored = twins.jobs.get("t", job_id)
    assert stored is not None
    assert stored.status == JobStatus.COMPLETED
    assert sent_by_first == {(job_id, first): 1}
    assert copy == first
    assert twins.sent() == {(job_id, first): 1}  # the copy sends it again (one run id)
