"""A claim whose write, or the read of the job after a late claim, takes longer than its lease's
margin (a stalled DynamoDB: botocore's 60 s timeouts, five tries) is not started: its target
could outlive the lease, another delivery take the attempt for abandoned, and the next attempt
run beside it with no worker dead (an outside fault audit, 2026-11-30). It is handed back, its
claim withdrawn, and claimed again with a fresh lease."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import RunStatus
from duetime.ports import Delivery
from duetime.targets import DEFAULT_HANDLERS, Invocation
from tests.integration.conftest import Engine

ENGINE: list[Engine] = []
CALLS: list[int] = []


def twenty_seconds(invocation: Invocation) -> None:
    CALLS.append(invocation.attempt)
    ENGINE[0].advance(20)


DEFAULT_HANDLERS.register("test.twenty_seconds", twenty_seconds)


@pytest.mark.parametrize("slow", ["claim write", "read after a late claim"])
def test_a_claim_that_outlived_its_lease_margin_is_claimed_again_not_started(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, slow: str
) -> None:
    ENGINE[:] = [engine]
    CALLS.clear()
    job = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "timeout_seconds": 30,
            "retry": {"max_attempts": 3, "backoff_seconds": 2},
            "target": {"type": "handler", "name": "test.twenty_seconds"},
        }
    )
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    m = engine.aws.sqs.receive_message(QueueUrl=url, VisibilityTimeout=900)["Messages"][0]
    delivery = Delivery(m["MessageId"], m["ReceiptHandle"], m["Body"], 1, url)
    stalls = [True]
    if slow == "claim write":
        client = engine.parts.runs._client
        put_item = client.put_item

        def stalled(**params: Any) -> Any:
            if stalls and params["Item"]["status"]["S"] == "running":
                stalls.clear()
                engine.advance(200)  # tries timed out; one landed
            return put_item(**params)

        monkeypatch.setattr(client, "put_item", stalled)
    else:
        engine.advance(2)  # delivered late: the claim reads the job again
        rereads = engine.parts.executor._rereads
        get = rereads.get

        def stalled_read(*args: Any) -> Any:
            if stalls:
                stalls.clear()
                engine.advance(200)
            return get(*args)

        monkeypatch.setattr(rereads, "get", stalled_read)

    result = engine.parts.executor.handle(delivery)

    assert CALLS == []  # not started on a lease that could not cover its timeout
    assert result.detail == "the claim outlived its lease's margin: handed back"
    for _ in range(3):
        engine.advance(1)
        engine.drain()
    assert CALLS == [1]  # once, attempt 1: nothing taken for abandoned
    (run,) = engine.parts.runs.list(job, 10, None).items
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    attempt = run.attempts[-1]
    assert attempt.finished_ms is not None
    assert attempt.finished_ms - attempt.started_ms >= 20_000  # its 20 s, not capped to none
