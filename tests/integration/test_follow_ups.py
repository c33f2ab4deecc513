"""A failed attempt's follow-ups under faults: its retry received while its outcome is still
being written, and its retry message (or DLQ copy) refused for a moment. Found by an outside
audit of the run path (2026-11-30): either made the retry wait out the failed attempt's
whole lease (~3 minutes), and the second lost the target's error for "the worker stopped"."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.ports import Delivery
from duetime.targets import DEFAULT_HANDLERS, Invocation, TargetError
from tests.integration.conftest import Engine

CALLS: list[tuple[int, int]] = []  # (attempt, wall ms)
ENGINE: list[Engine] = []


def slow_then_fail(invocation: Invocation) -> None:
    CALLS.append((invocation.attempt, wall_ms()))
    if invocation.attempt == 1:
        ENGINE[0].advance(6)  # six seconds of work
        raise TargetError("HTTP 503")


DEFAULT_HANDLERS.register("test.slow_then_fail", slow_then_fail)


@pytest.fixture
def failing_once(engine: Engine) -> str:
    ENGINE[:] = [engine]
    CALLS.clear()
    return engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "timeout_seconds": 30,
            "retry": {"max_attempts": 3, "backoff_seconds": 2},
            "target": {"type": "handler", "name": "test.slow_then_fail"},
        }
    )


def attempts_until_the_second(engine: Engine) -> list[float]:
    for _ in range(50):
        engine.advance(5)
        engine.drain()
        if len(CALLS) > 1:
            break
    return [(b[1] - a[1]) / 1000 for a, b in itertools.pairwise(CALLS)]


def test_a_retry_received_while_its_attempt_is_recorded_comes_back_soon(
    engine: Engine, failing_once: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    client = engine.parts.runs._client  # type: ignore[attr-defined]
    put_item = client.put_item
    other: list[str] = []

    def slow_write(**params: Any) -> Any:
        if params.get("Item", {}).get("status", {}).get("S") == "retrying" and not other:
            # The write is slow (the SDK's retries of a throttled write): meanwhile another
            # worker receives the retry, sent just before it.
            engine.advance(1.5)
            messages = engine.aws.sqs.receive_message(
                QueueUrl=url, MessageSystemAttributeNames=["All"], VisibilityTimeout=30
            ).get("Messages", [])
            for m in messages:
                count = int(m["Attributes"]["ApproximateReceiveCount"])
                delivery = Delivery(m["MessageId"], m["ReceiptHandle"], m["Body"], count, url)
                other.append(engine.parts.executor.handle(delivery).detail)
        return put_item(**params)

    monkeypatch.setattr(client, "put_item", slow_write)
    engine.drain()
    monkeypatch.setattr(client, "put_item", put_item)

    assert other == ["the attempt before is being recorded"]
    gaps = attempts_until_the_second(engine)
    assert [attempt for attempt, _ in CALLS] == [1, 2]
    assert gaps[0] < 15  # not the failed attempt's lease (timeout + 150 s)


def always_fails(invocation: Invocation) -> None:
    CALLS.append((invocation.attempt, wall_ms()))
    raise TargetError("HTTP 503: upstream down")


DEFAULT_HANDLERS.register("test.always_fails", always_fails)


@pytest.mark.parametrize(
    ("sending", "attempts", "refusal"),
    [
        ("send_message_batch", 2, "throttled"),
        ("send_message", 1, "throttled"),
        ("send_message", 1, "no answer"),
    ],
)
def test_a_follow_up_refused_for_a_moment_keeps_the_error_and_its_time(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, sending: str, attempts: int, refusal: str
) -> None:
    # (Refused by SQS's client, under the adapter: the DLQ copy's send let botocore's error
    # through, so its retry held only where a test refused at the port; a fault audit.)
    CALLS.clear()
    job = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "timeout_seconds": 30,
            "retry": {"max_attempts": attempts, "backoff_seconds": 2},
            "target": {"type": "handler", "name": "test.always_fails"},
        }
    )
    client = engine.parts.queue._client
    send = getattr(client, sending)
    refused: list[int] = []

    def once(*args: Any, **kwargs: Any) -> Any:
        if not refused:
            refused.append(1)
            if refusal == "no answer":
                raise EndpointConnectionError(endpoint_url="https://sqs.us-east-1.amazonaws.com")
            error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
            raise ClientError(error, sending)  # type: ignore[arg-type]
        return send(*args, **kwargs)

    monkeypatch.setattr(client, sending, once)
    engine.drain()
    for _ in range(6):
        engine.advance(5)
        engine.drain()

    assert refused == [1]
    assert len(CALLS) == attempts  # the retry after its backoff, not after the lease
    (run,) = engine.parts.runs.list(job, 10, None).items
    assert run.status.value == "failed"
    assert run.error is not None
    assert run.error.startswith("HTTP 503: upstream down")  # not "the worker stopped …"
