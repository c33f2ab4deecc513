"""Recording an outcome the worker knows (duetime.services.outcome): a refused write is tried
again while the run's lease lasts, then the error goes up (another delivery may take over)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from botocore.exceptions import EndpointConnectionError

from duetime.domain.runs import Attempt, Lease, Run, RunOutcome, RunStatus, finished_run
from duetime.ports import ConditionFailed, StoreError
from duetime.services.outcome import RESERVE_MS, record_outcome
from tests.unit.test_run_records import running

LEASE_UNTIL_MS = 60_000


@dataclass
class RefusingRuns:
    """A run store whose `finish` raises StoreError `refusals` times, then records."""

    refusals: int
    tries: list[int] = field(default_factory=list)

    def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
        self.tries.append(outcome.finished_ms)
        if len(self.tries) <= self.refusals:
            raise StoreError("ProvisionedThroughputExceededException")
        return finished_run(run, outcome)


@dataclass
class Clock:
    now_ms: int = 10_000
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> int:
        return self.now_ms

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_ms += int(seconds * 1000)


def a_run() -> Run:
    run = running((Attempt(1, 9_000, 0, None, None),))
    return replace(run, lease=Lease("message-1", 1, LEASE_UNTIL_MS))


def test_a_refused_outcome_is_recorded_once_the_store_takes_it() -> None:
    runs, clock = RefusingRuns(refusals=4), Clock()
    outcome = RunOutcome(RunStatus.SUCCEEDED, 10_000)

    done = record_outcome(runs, a_run(), outcome, clock=clock, sleep=clock.sleep)

    assert done is not None
    assert done.status == RunStatus.SUCCEEDED
    assert runs.tries == [10_000] * 5  # the outcome as it was, its end included
    assert clock.slept == [0.2, 0.4, 0.8, 1.6]


def test_past_the_lease_the_error_goes_up() -> None:
    runs, clock = RefusingRuns(refusals=1_000), Clock()

    with pytest.raises(StoreError):
        record_outcome(
            runs,
            a_run(),
            RunOutcome(RunStatus.FAILED, 10_000, "boom"),
            clock=clock,
            sleep=clock.sleep,
        )

    assert clock.now_ms <= LEASE_UNTIL_MS - RESERVE_MS  # never tried past the lease's end
    assert clock.now_ms > LEASE_UNTIL_MS - RESERVE_MS - 4_000 - 1  # but up to shortly before
    assert max(clock.slept) == 4.0


def test_no_answer_from_dynamodb_is_a_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A timeout or a dropped connection is retried like a throttle (it raised past the
    # adapter, a botocore error the worker did not take for the store's).
    import boto3

    from duetime.adapters.dynamodb.runs import DynamoRunStore

    client = boto3.client("dynamodb", region_name="us-east-1")

    def unreachable(**_: object) -> None:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    monkeypatch.setattr(client, "put_item", unreachable)
    store = DynamoRunStore(client, "runs")

    with pytest.raises(StoreError, match="Could not connect"):
        store.finish(a_run(), RunOutcome(RunStatus.SUCCEEDED, 10_000))


@pytest.mark.parametrize(
    "error",
    [StoreError("AccessDeniedException", transient=False), ConditionFailed("moved on")],
)
def test_an_error_time_cannot_mend_goes_up_at_once(error: StoreError) -> None:
    # (Found by review: an access denied was tried until the lease ended, 15 minutes for a
    # long job, a warning and its traceback each time.)
    clock = Clock()

    class Refusing:
        def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
            raise error

    with pytest.raises(StoreError) as raised:
        record_outcome(
            Refusing(),
            a_run(),
            RunOutcome(RunStatus.SUCCEEDED, 10_000),
            clock=clock,
            sleep=clock.sleep,
        )

    assert raised.value is error
    assert clock.slept == []


def test_the_dynamodb_store_tells_a_throttle_from_an_access_denied() -> None:
    import boto3
    from botocore.stub import Stubber

    from duetime.adapters.dynamodb.runs import DynamoRunStore

    client = boto3.client("dynamodb", region_name="us-east-1")
    store = DynamoRunStore(client, "runs")
    seen: list[bool] = []
    for code in ("ProvisionedThroughputExceededException", "AccessDeniedException"):
        with Stubber(client) as stub:
            stub.add_client_error("put_item", service_error_code=code, http_status_code=400)
            with pytest.raises(StoreError) as raised:
                store.finish(a_run(), RunOutcome(RunStatus.SUCCEEDED, 10_000))
            seen.append(raised.value.transient)
    assert seen == [True, False]
