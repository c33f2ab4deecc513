"""Targets may not reach duetime's own queues, topics, functions or buses.

At submission such a job is a 400 naming the field; a job stored before (or whose target
became one of duetime's since) is refused again at execution: it fails without being
retried, into the DLQ with the reason, and nothing reaches the resource.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from duetime.domain.jobs import Job, JobStatus, Priority, Runtime, parse_job_spec
from duetime.domain.reach import OwnResources
from duetime.domain.runs import RunStatus
from duetime.domain.targets import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    Target,
)
from duetime.targets import AwsClients
from tests.integration.conftest import Engine
from tests.integration.test_api import Api

# Locally: named queues and the `duetime` prefix; on AWS: the stack name.
OWN = OwnResources(frozenset({"duetime-lambda-normal", "duetime-lambda-normal-dlq"}), "duetime")
STACK = OwnResources(frozenset(), "DuetimeStack")
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/duetime-lambda-normal"


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (SqsTarget(QUEUE), "queue_url"),
        (SqsTarget(QUEUE + "/"), "queue_url"),
        (SqsTarget(QUEUE.replace("normal", "%6eormal")), "queue_url"),  # percent-encoded
        (SqsTarget(QUEUE.upper().replace("HTTPS", "https")), "queue_url"),
        (SqsTarget("http://localhost:4566/000000000000/duetime-lambda-normal-dlq"), "queue_url"),
        (SqsTarget("https://sqs.eu-west-1.amazonaws.com/1/duetimestack-queue-abc"), "queue_url"),
        (SnsTarget("arn:aws:sns:us-east-1:123456789012:duetime-alarms"), "topic_arn"),
        (LambdaTarget("arn:aws:lambda:us-east-1:1:function:DuetimeStack-Worker-X"), "function_arn"),
        (SnsTarget("arn:aws:sns:us-east-1:1:DuetimeStack-AlarmTopic-Q"), "topic_arn"),
        (LambdaTarget("arn:aws:lambda:us-east-1:1:function:duetime-worker:live"), "function_arn"),
        (EventBridgeTarget("s", "d", "duetime-bus"), "event_bus"),
        (
            EventBridgeTarget("s", "d", "arn:aws:events:us-east-1:1:event-bus/duetime-x"),
            "event_bus",
        ),
    ],
)
def test_targets_reaching_duetimes_own_resources_are_refused(target: Target, field: str) -> None:
    refused = OWN.refusal(target) or STACK.refusal(target)
    assert refused is not None
    assert refused[0] == field
    kind = {"queue_url": "queues", "topic_arn": "topics", "function_arn": "functions"}
    assert f"is one of duetime's own {kind.get(field, 'event buses')}: " in refused[1]


@pytest.mark.parametrize(
    "target",
    [
        SqsTarget("https://sqs.us-east-1.amazonaws.com/123456789012/orders"),
        SqsTarget("https://sqs.us-east-1.amazonaws.com/123456789012/duetimeorders"),
        SqsTarget("https://sqs.us-east-1.amazonaws.com/123456789012/DuetimeStackless-q"),
        SnsTarget("arn:aws:sns:us-east-1:123456789012:reports"),
        LambdaTarget("arn:aws:lambda:us-east-1:1:function:billing"),
        EventBridgeTarget("s", "d"),
        HttpTarget("https://duetime-lambda-normal.example.com/"),
    ],
)
def test_other_targets_pass(target: Target) -> None:
    assert OWN.refusal(target) is None
    assert STACK.refusal(target) is None


def test_given_duetimes_own_run_queue_as_an_sqs_target_then_submission_is_a_400(
    api: Api,
) -> None:
    own_queue = api.engine.aws.settings.queue(Runtime.LAMBDA, Priority.HIGH).url
    for url in (own_queue, own_queue.replace("high", "high-dlq")):
        reply = api.call(
            "POST",
            "/jobs",
            {"schedule": {"delay_seconds": 5}, "target": {"type": "sqs", "queue_url": url}},
        )
        assert reply.status == 400, reply.json
        assert reply.error["field"] == "target.queue_url"
        assert "duetime's own" in reply.error["message"]
    assert api.job_items() == []


def stored_with(engine: Engine, target: Target) -> Job:
    """A job due now (3 attempts) of tenant-a's that targets `target`, stored as by an older
    version that did not check: a handler job, re-targeted in place."""
    job_id = engine.submit({"schedule": {"delay_seconds": 0}, "retry": {"max_attempts": 3}})
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    spec: Any = dataclasses.replace(job.spec, target=target)
    engine.parts.jobs.replace(dataclasses.replace(job, spec=spec), expected=job)
    return job


def test_given_a_stored_job_targeting_a_run_queue_then_execution_refuses_it_without_retries(
    engine: Engine,
) -> None:
    victim_queue = engine.aws.settings.queue(Runtime.LAMBDA, Priority.HIGH).url
    job = stored_with(engine, SqsTarget(victim_queue))

    engine.drain()

    run = engine.parts.runs.get(job.id, job.created_ms)
    assert run is not None
    assert run.status == RunStatus.FAILED
    assert len(run.attempts) == 1  # not retryable: no second attempt
    assert "refused: target.queue_url" in (run.error or "")
    assert engine.queue_messages(Runtime.LAMBDA, Priority.HIGH) == 0  # nothing reached it
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 1


def test_a_job_spec_with_an_ordinary_queue_is_accepted_by_the_service(engine: Engine) -> None:
    url = engine.aws.sqs.create_queue(QueueName="orders")["QueueUrl"]
    spec = parse_job_spec(
        {"schedule": {"delay_seconds": 60}, "target": {"type": "sqs", "queue_url": url}}
    )
    assert engine.parts.service.create("tenant-a", spec).status == JobStatus.SCHEDULED


def test_given_a_target_role_then_target_clients_act_as_it_and_kms_does_not(
    engine: Engine,
) -> None:
    role = "arn:aws:iam::123456789012:role/duetime-targets"
    clients = AwsClients(engine.aws.session, target_role_arn=role)
    own = engine.aws.session.get_credentials()
    assert own is not None

    for client in (clients.sqs, clients.sns, clients.events, clients.lambda_):
        credentials = client._request_signer._credentials  # what the client signs with
        assert credentials.access_key != own.access_key
    assert clients.kms._request_signer._credentials.access_key == own.access_key  # type: ignore[attr-defined]
    # The assumed role's credentials work: a call is signed and answered.
    url = engine.aws.sqs.create_queue(QueueName="reports")["QueueUrl"]
    clients.sqs.send_message(QueueUrl=url, MessageBody="{}")
    assert engine.aws.sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "{}"
