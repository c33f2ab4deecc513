"""The worker Lambda's batch contract: only records that must come back are reported."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.runs import RunStatus
from duetime.entrypoints import worker as worker_handler
from duetime.local.lambda_runtime import FakeContext, sqs_event
from duetime.ports import QueueError, StoreError
from duetime.targets import DEFAULT_HANDLERS, Invocation, TargetError
from tests.integration.conftest import Engine


def receive_all(engine: Engine, url: str) -> list[Any]:
    messages: list[Any] = []
    while batch := engine.aws.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    ).get("Messages", []):
        messages += batch
    return messages


def test_given_a_batch_with_a_malformed_and_a_busy_record_then_only_those_are_reported(
    engine: Engine,
) -> None:
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    good = engine.submit({"schedule": {"delay_seconds": 0}})
    other = engine.submit({"schedule": {"delay_seconds": 0}})
    engine.aws.sqs.send_message(QueueUrl=url, MessageBody="{not json")
    messages = receive_all(engine, url)
    assert len(messages) == 3
    arn = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]

    response = worker_handler.handler(sqs_event(messages, arn, "us-east-1"), FakeContext())

    malformed = next(m["MessageId"] for m in messages if m["Body"] == "{not json")
    assert response == {"batchItemFailures": [{"itemIdentifier": malformed}]}
    assert sorted(c.job_id for c in engine.recorder.calls) == sorted([good, other])
    # The malformed message is visible again at once, on its way to the DLQ by redrive
    again = engine.aws.sqs.receive_message(QueueUrl=url).get("Messages", [])
    assert [m["MessageId"] for m in again] == [malformed]


def test_given_every_record_fails_then_the_handler_still_returns_a_partial_response(
    engine: Engine,
) -> None:
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    engine.aws.sqs.send_message(QueueUrl=url, MessageBody="[]")
    engine.aws.sqs.send_message(QueueUrl=url, MessageBody='{"tenant": "tenant-a"}')
    messages = receive_all(engine, url)
    arn = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]

    response = worker_handler.handler(sqs_event(messages, arn, "us-east-1"), FakeContext())

    reported = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert reported == {m["MessageId"] for m in messages}


def test_given_a_delivery_for_a_deleted_job_then_it_is_dropped_not_retried(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    engine.aws.sqs.send_message(
        QueueUrl=url, MessageBody=engine.parts.auth.seal(RunMessage("tenant-a", "gone", 0, 1, 0))
    )
    messages = receive_all(engine, url)
    arn = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    with caplog.at_level("INFO", logger="duetime"):
        response = worker_handler.handler(sqs_event(messages, arn, "us-east-1"), FakeContext())
    assert response == {"batchItemFailures": []}
    assert engine.recorder.calls == []
    # said, with why (docs/cost.md: a dropped run is logged; until 2026-11-30 it was not)
    (logged,) = [r for r in caplog.records if r.getMessage() == "run dropped"]
    assert getattr(logged, "reason", None) == "dropped: the job is missing"


def test_given_a_batch_then_its_records_run_concurrently(engine: Engine) -> None:
    # Each run waits at a barrier for the other two: run one after another, the first would
    # wait alone until the barrier broke, and its run would fail.
    together = threading.Barrier(3, timeout=10)
    met: list[str] = []

    def meet(invocation: Invocation) -> None:
        together.wait()
        met.append(invocation.job_id)

    DEFAULT_HANDLERS.register("test.meet", meet)
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    target = {"type": "handler", "name": "test.meet"}
    jobs = [engine.submit({"schedule": {"delay_seconds": 0}, "target": target}) for _ in range(3)]
    messages = receive_all(engine, url)
    arn = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]

    response = worker_handler.handler(sqs_event(messages, arn, "us-east-1"), FakeContext())

    assert response == {"batchItemFailures": []}
    assert sorted(met) == sorted(jobs)
    assert {r.status for job in jobs for r in engine.parts.runs.list(job, 10, None).items} == {
        RunStatus.SUCCEEDED
    }


def handled_after_one_failure(
    engine: Engine, monkeypatch: Any, owner: object, method: str, error: Exception
) -> None:
    """Deliver the lambda/normal queue's messages (one) with `owner.method` failing once: the
    record is reported failed, visible again 2 s later (the queue's own timeout is far
    longer), and handled on its next receive."""
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    messages = receive_all(engine, url)
    arn = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    outage = [True]
    real = getattr(owner, method)

    def flaky(*args: Any) -> Any:
        if outage:
            raise error
        return real(*args)

    monkeypatch.setattr(owner, method, flaky)
    response = worker_handler.handler(sqs_event(messages, arn, "us-east-1"), FakeContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    outage.clear()

    assert receive_all(engine, url) == []
    engine.advance(3)
    again = receive_all(engine, url)
    assert [m["MessageId"] for m in again] == [messages[0]["MessageId"]]
    assert worker_handler.handler(sqs_event(again, arn, "us-east-1"), FakeContext()) == {
        "batchItemFailures": []
    }


def test_given_a_record_whose_handling_fails_then_it_comes_back_in_seconds_and_is_logged(
    engine: Engine, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Found by review: an exception (a store error reading the job) left the message to the
    # queue's visibility timeout, 90 minutes as deployed, before the run was tried again. And
    # by an outside audit: nothing logged it (a message could reach the DLQ unexplained).
    job = engine.submit({"schedule": {"delay_seconds": 0}})
    reads = engine.parts.executor._reads
    handled_after_one_failure(
        engine, monkeypatch, reads, "get", StoreError("the jobs table is unavailable")
    )
    assert [c.job_id for c in engine.recorder.calls] == [job]
    (logged,) = [r for r in caplog.records if r.getMessage() == "run processing failed"]
    assert logged.levelname == "ERROR"
    assert "the jobs table is unavailable" in str(logged.exc_info[1] if logged.exc_info else "")


def test_given_dependents_not_triggered_then_the_upstream_message_comes_back_in_seconds(
    engine: Engine, monkeypatch: Any
) -> None:
    # Found by review: the upstream's run succeeded, sending its dependents' runs failed, and
    # its message came back only after the queue's visibility timeout (90 minutes as
    # deployed): the `after` job ran that late.
    upstream = engine.submit({"schedule": {"delay_seconds": 0}})
    dependent = engine.submit({"schedule": {"after": {"job_id": upstream}}})
    dependencies = engine.parts.executor._dependencies
    handled_after_one_failure(
        engine, monkeypatch, dependencies, "trigger", QueueError("SQS is unavailable")
    )
    engine.drain()
    assert sorted(c.job_id for c in engine.recorder.calls) == sorted([upstream, dependent])


def test_given_an_outcome_write_refused_for_a_while_then_the_known_outcome_is_kept(
    engine: Engine, monkeypatch: Any
) -> None:
    # Found by an outside fault audit: the target succeeded, the outcome write was throttled
    # past the SDK's retries, and the worker dropped what it knew. The next delivery took the
    # attempt for abandoned: on the last attempt the run ended failed, went to the DLQ, and
    # its `on: failed` dependents ran instead of its `on: succeeded` ones.
    upstream = engine.submit({"schedule": {"delay_seconds": 0}, "retry": {"max_attempts": 1}})
    on_success = engine.submit({"schedule": {"after": {"job_id": upstream}}})
    engine.submit({"schedule": {"after": {"job_id": upstream, "on": "failed"}}})
    runs = engine.parts.executor._runs
    real, refused = runs.finish, []

    def throttled(run: Any, outcome: Any) -> Any:
        if run.job_id == upstream and len(refused) < 2:
            refused.append(outcome.status)
            raise StoreError("ProvisionedThroughputExceededException: throttled")
        return real(run, outcome)

    monkeypatch.setattr(runs, "finish", throttled)
    engine.drain()
    engine.advance(600)  # past the lease: what a later delivery would make of the run
    engine.drain()

    assert refused == [RunStatus.SUCCEEDED, RunStatus.SUCCEEDED]
    assert sorted(c.job_id for c in engine.recorder.calls) == sorted([upstream, on_success])
    (record,) = engine.parts.runs.list(upstream, 10, None).items
    assert (record.status, record.attempt) == (RunStatus.SUCCEEDED, 1)
    dlq = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).dlq_url
    assert receive_all(engine, dlq) == []


def test_given_a_worker_that_cannot_be_built_then_its_invocation_fails_as_a_whole(
    engine: Engine,
) -> None:
    # A worker whose environment lacks a setting failed each record of each batch silently
    # (no log line, no Lambda error: its alarm never fired, and the messages came back after
    # the 90-minute visibility timeout; until 2026-11-30, found writing the runbook).
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    engine.submit({"schedule": {"delay_seconds": 0}})
    messages = receive_all(engine, url)
    arn = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]

    def unbuildable() -> Any:
        raise RuntimeError("environment variable(s) not set: DUETIME_QUEUES")

    handler = worker_handler.make_handler(unbuildable)
    with pytest.raises(RuntimeError, match="DUETIME_QUEUES"):
        handler(sqs_event(messages, arn, "us-east-1"), FakeContext())
    assert engine.recorder.calls == []


BUSY: list[int] = []


def busy(invocation: Invocation) -> None:
    BUSY.append(invocation.attempt)
    if invocation.attempt == 1:
        raise TargetError("HTTP 429 Too Many Requests", retry_after_seconds=10)


DEFAULT_HANDLERS.register("test.busy", busy)


def test_given_a_target_asking_to_retry_after_10_s_then_the_retry_waits_that_long(
    engine: Engine,
) -> None:
    # With no backoff, the retries came at once, whatever the receiver asked (until 2026-11-30;
    # a new user's walk, round two).
    BUSY.clear()
    engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "handler", "name": "test.busy"},
            "retry": {"max_attempts": 2, "backoff_seconds": 0, "max_backoff_seconds": 0},
        }
    )
    engine.drain()
    assert BUSY == [1]
    engine.advance(8)
    engine.drain()
    assert BUSY == [1]  # not yet
    engine.advance(3)
    engine.drain()
    assert BUSY == [1, 2]
