"""A tenant's count of active recurring jobs goes down in the same write that ends a job
(completed, cancelled): no failure between two writes leaves a slot of the quota taken by a
job that is no longer active (on the twins, and on moto, where the write is one transaction)."""

from __future__ import annotations

import contextlib

import pytest

from duetime.clock import wall_ms
from duetime.domain.errors import QuotaExceeded
from duetime.domain.jobs import JobStatus, parse_job_spec
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms
from duetime.ports import StoreError
from duetime.settings import Quotas
from tests.integration.conftest import Engine
from tests.integration.test_partitioned_sweep import T0, Twins

NOOP = {"type": "handler", "name": "duetime.noop"}
ONE = Quotas(max_active_recurring_jobs=1)


class Crash(BaseException):
    """The process died."""


def failing_release(twins: Twins, fault: type[BaseException]) -> None:
    """A release of its own, were one made, fails once (a crash, or a throttle)."""
    release = twins.jobs.release_recurring
    armed = [True]

    def dying(tenant: str) -> None:
        if armed.pop() if armed else False:
            raise fault("ProvisionedThroughputExceededException")
        release(tenant)

    twins.jobs.release_recurring = dying  # type: ignore[method-assign]


@pytest.mark.parametrize("fault", [Crash, StoreError])
def test_given_a_fault_after_a_job_s_completion_then_its_slot_is_free(
    fault: type[BaseException],
) -> None:
    # The completion was written, then the release failed (or the sweeper died between the
    # two): the retried hand-over found the job completed and released nothing; the slot
    # stayed taken until a daily recount that skips a tenant whose count moved meanwhile.
    twins = Twins(shards=1)
    ending = {"rate_seconds": 60, "end_at": rfc3339_ms(T0 + 5 * MINUTE_MS)}
    job = twins.service.create(
        "t", parse_job_spec({"schedule": ending, "target": NOOP}), quotas=ONE
    )
    failing_release(twins, fault)
    for _ in range(12):
        twins.clock.now += MINUTE_MS
        with contextlib.suppress(Crash):
            twins.sweeper.sweep()

    assert twins.jobs.get("t", job.id).status == JobStatus.COMPLETED  # type: ignore[union-attr]
    assert twins.jobs.recurring_count("t") == 0
    another = parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP})
    twins.service.create("t", another, quotas=ONE)  # the slot is free


@pytest.mark.parametrize("fault", [Crash, StoreError])
def test_given_a_fault_after_a_cancel_then_its_slot_is_free(fault: type[BaseException]) -> None:
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP})
    job = twins.service.create("t", spec, quotas=ONE)
    failing_release(twins, fault)

    twins.service.cancel("t", job.id)

    assert twins.jobs.recurring_count("t") == 0
    twins.service.create("t", spec, quotas=ONE)
    with pytest.raises(QuotaExceeded):
        twins.service.create("t", spec, quotas=ONE)


def counted(engine: Engine, schedule: dict[str, object]) -> str:
    """A job created under a quota, so counted (Engine.submit counts none)."""
    spec = parse_job_spec({"schedule": schedule, "target": NOOP})
    return engine.parts.service.create("tenant-a", spec, quotas=Quotas()).id


def counter(engine: Engine, tenant: str = "tenant-a") -> int | None:
    item = engine.aws.dynamodb.get_item(
        TableName=engine.aws.settings.jobs_table,
        Key={"tenant": {"S": tenant}, "id": {"S": "!count#recurring"}},
        ConsistentRead=True,
    ).get("Item")
    return None if item is None else int(item["active"]["N"])


def test_given_jobs_ended_on_moto_then_the_count_goes_down_with_them(engine: Engine) -> None:
    jobs = [counted(engine, {"rate_seconds": 60}) for _ in range(3)]
    assert counter(engine) == 3

    engine.parts.service.cancel("tenant-a", jobs[0])
    engine.parts.service.pause("tenant-a", jobs[1])
    engine.parts.service.cancel("tenant-a", jobs[1])

    assert counter(engine) == 1
    assert engine.parts.jobs.get("tenant-a", jobs[1]).status == JobStatus.CANCELLED  # type: ignore[union-attr]


def test_given_a_count_already_at_zero_on_moto_then_a_cancel_still_goes_through(
    engine: Engine,
) -> None:
    # The transaction's counter refuses to go below zero: the job's change is made alone.
    job = counted(engine, {"rate_seconds": 60})
    engine.parts.jobs.set_recurring_count("tenant-a", 0)

    engine.parts.service.cancel("tenant-a", job)

    assert engine.parts.jobs.get("tenant-a", job).status == JobStatus.CANCELLED  # type: ignore[union-attr]
    assert counter(engine) == 0


def test_given_a_completion_on_moto_then_its_count_goes_with_it_once(engine: Engine) -> None:
    # Completed by the write of its last timer or by the sweep, its count goes with that
    # write, once: the other job keeps its own.
    start = wall_ms()
    ending = counted(engine, {"rate_seconds": 60, "end_at": rfc3339_ms(start + 3 * MINUTE_MS)})
    counted(engine, {"rate_seconds": 60})

    engine.run_minutes(6)

    assert engine.parts.jobs.get("tenant-a", ending).status == JobStatus.COMPLETED  # type: ignore[union-attr]
    assert counter(engine) == 1


@pytest.mark.parametrize("fault", [Crash, StoreError])
def test_given_a_fault_after_a_patch_to_a_one_off_then_its_slot_is_free(
    fault: type[BaseException],
) -> None:
    # The PATCH wrote the job, then released its count in a write of its own (a review).
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP})
    job = twins.service.create("t", spec, quotas=ONE)
    failing_release(twins, fault)

    twins.service.update("t", job.id, {"schedule": {"delay_seconds": 60}})

    assert twins.jobs.recurring_count("t") == 0
    twins.service.create("t", spec, quotas=ONE)
