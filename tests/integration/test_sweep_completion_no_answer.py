"""A jobs or timers table that gives no answer (botocore's read or connect timeouts, a
BotoCoreError, after the SDK's attempts) is a passing store failure, as a throttle is: on moto.

Found by an outside audit (round 29): `DynamoJobStore.replace` caught ClientError only, so a
chain's completion without an answer (the sweep's last round of a job with an `end_at`) went
through raw, and the hand-over parked the chain's timer as failing on its own, an attempt
counted each sweep, quarantined after two hours; `get`, the timer store's `park` and
`raise_shard_count`, and most other store methods had the same gap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from duetime.domain.jobs import JobStatus
from duetime.domain.timers import StuckTimer, Timer
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms, to_ms
from duetime.ports import StoreError
from tests.integration.conftest import START, Engine

DUE = (to_ms(START) // MINUTE_MS + 5) * MINUTE_MS
ENDPOINT = "https://dynamodb.us-east-1.amazonaws.com"
NO_ANSWER = [
    ReadTimeoutError(endpoint_url=ENDPOINT),
    ConnectTimeoutError(endpoint_url=ENDPOINT),
    EndpointConnectionError(endpoint_url=ENDPOINT),
]


def test_given_a_completion_without_an_answer_then_its_timer_is_parked_passing(
    engine: Engine,
) -> None:
    # Given a job of three runs a minute apart (its last round completes it), and a jobs table
    # whose transactions get no answer
    job = engine.submit(
        {
            "schedule": {
                "rate_seconds": 60,
                "start_at": rfc3339_ms(DUE),
                "end_at": rfc3339_ms(DUE + 150_000),
            }
        }
    )
    jobs_table = engine.aws.settings.jobs_table
    silent = {"on": True, "hits": 0}
    asked: dict[str, Any] = {}

    def keep(params: dict[str, Any], **_: Any) -> None:
        asked["params"] = params

    def no_answer(**_: Any) -> None:
        items = asked.get("params", {}).get("TransactItems", [])
        tables = {next(iter(item.values())).get("TableName") for item in items}
        if silent["on"] and jobs_table in tables:
            silent["hits"] += 1
            raise ReadTimeoutError(endpoint_url=ENDPOINT)

    events = engine.parts.jobs._client.meta.events  # type: ignore[attr-defined]
    events.register("before-parameter-build.dynamodb.TransactWriteItems", keep)
    events.register("before-call.dynamodb.TransactWriteItems", no_answer)

    # When its last round is swept while the table is silent
    engine.run_minutes(8)

    # Then its runs went out, and its timer waits parked *passing*: no attempt counted
    stuck = [s for s in engine.parts.sweeper.stuck() if s.timer.job_id == job]
    assert silent["hits"] >= 2
    assert len(engine.recorder.runs_of(job)) == 3
    assert [(s.attempts, s.quarantined) for s in stuck] == [(0, False)]
    # And once the table answers, the next sweep completes the job
    silent["on"] = False
    engine.run_minutes(1)
    completed = engine.parts.jobs.get("tenant-a", job)
    assert completed is not None
    assert completed.status == JobStatus.COMPLETED
    assert engine.parts.sweeper.stuck() == []
    assert len(engine.recorder.runs_of(job)) == 3


def _job_calls(engine: Engine) -> dict[str, Callable[[], Any]]:
    jobs, timers = engine.parts.jobs, engine.parts.timers
    job_id = engine.submit({"schedule": {"cron": "* * * * *"}})
    job = jobs.get("tenant-a", job_id)
    assert job is not None
    stuck = StuckTimer(Timer("tenant-a", job_id, DUE), 0, 1, "why", DUE, DUE, DUE + MINUTE_MS)
    return {
        "jobs.get": lambda: jobs.get("tenant-a", job_id),
        "jobs.replace": lambda: jobs.replace(replace(job, version=job.version + 1), expected=job),
        "jobs.gate": lambda: jobs.gate("tenant-a", job_id),
        "jobs.claim_key": lambda: jobs.claim_key("tenant-a", "k", job_id, "f", 1, 0),
        "jobs.reserve_recurring": lambda: jobs.reserve_recurring("tenant-a", 10),
        "timers.park": lambda: timers.park(stuck),
        "timers.raise_shard_count": lambda: timers.raise_shard_count(9),
        "timers.read_due": lambda: timers.read_due(DUE // MINUTE_MS, 0, None, DUE, 10),
    }


@pytest.mark.parametrize("error", NO_ANSWER, ids=lambda e: type(e).__name__)
def test_given_no_answer_from_the_tables_then_every_store_call_fails_passing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    # Given store calls, and a DynamoDB client whose every call gets no answer
    calls = _job_calls(engine)
    client = engine.parts.jobs._client  # type: ignore[attr-defined]

    def unanswered(*_: Any, **__: Any) -> Any:
        raise error

    for name in ("get_item", "put_item", "update_item", "transact_write_items", "query"):
        monkeypatch.setattr(client, name, unanswered)
    for name, call in calls.items():
        # When each is made, then it fails with a passing StoreError (the hand-over parks a
        # chain that fails so without counting an attempt), not with botocore's error
        with pytest.raises(StoreError) as raised:
            call()
        assert raised.value.transient, name
