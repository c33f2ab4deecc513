"""AWS targets scoped by tenant (`DUETIME_TENANT_TARGET_NAMES`, the `tenantTargetNames`
context): with a pattern such as `{tenant}-*`, a tenant's jobs may name only the queues, topics,
functions and event buses whose name is its own. Found by an outside audit (2026-11-30): the
allow-list was one per deployment, so tenant A could send runs, with any payload, into tenant
B's queue. At submission (create, PATCH, batch) such a target is a 400 naming the field; a job
stored before the pattern was set is refused before every attempt: failed, not retried,
nothing sent."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.reach import TenantTargets
from duetime.domain.runs import RunStatus
from duetime.domain.targets import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    Target,
)
from duetime.settings import Env, Settings
from tests.conftest import Aws
from tests.integration.conftest import Engine
from tests.integration.test_api import Api
from tests.security.test_own_resources import stored_with

SCOPED = TenantTargets("{tenant}-*")
SQS = "https://sqs.us-east-1.amazonaws.com/123456789012/"
SNS = "arn:aws:sns:us-east-1:123456789012:"
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:"
BUS = "arn:aws:events:us-east-1:123456789012:event-bus/"


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (SqsTarget(SQS + "team-b-orders"), "queue_url"),
        (SqsTarget(SQS + "team-a"), "queue_url"),  # the pattern's `-` is part of it
        (SqsTarget(SQS + "Team-a-orders"), "queue_url"),  # case counts
        (SqsTarget(SQS + "xteam-a-orders"), "queue_url"),  # matched whole, not searched
        (SqsTarget(SQS + "team-b-orders?x=team-a-1"), "queue_url"),
        (SnsTarget(SNS + "team-b-alerts"), "topic_arn"),
        (LambdaTarget(FUNCTION + "team-b-billing"), "function_arn"),
        (LambdaTarget(FUNCTION + "team-b-billing:team-a-live"), "function_arn"),
        (EventBridgeTarget("s", "d"), "event_bus"),  # the shared default bus
        (EventBridgeTarget("s", "d", BUS + "team-b-bus"), "event_bus"),
    ],
)
def test_a_resource_not_named_for_the_tenant_is_refused(target: Target, field: str) -> None:
    refused = SCOPED.refusal(target, "team-a")
    assert refused is not None
    assert refused[0] == field
    assert "must match 'team-a-*'" in refused[1]


@pytest.mark.parametrize(
    "target",
    [
        SqsTarget(SQS + "team-a-orders"),
        SqsTarget(SQS + "team-a-orders.fifo"),
        SqsTarget(SQS + "team-a-"),
        SnsTarget(SNS + "team-a-alerts"),
        LambdaTarget(FUNCTION + "team-a-billing:live"),
        EventBridgeTarget("s", "d", "team-a-bus"),
        EventBridgeTarget("s", "d", BUS + "team-a-bus"),
        HttpTarget("https://team-b.example.com/hook"),  # only AWS resources are scoped
    ],
)
def test_a_resource_named_for_the_tenant_passes(target: Target) -> None:
    assert SCOPED.refusal(target, "team-a") is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # AWS reads the queue from `/<account>/<name>`: a longer path on an AWS host would be
        # judged by a name AWS does not act on (found by review).
        (
            {"type": "sqs", "queue_url": SQS + "tenant-b-orders/tenant-a-x"},
            "target.queue_url",
        ),
        (
            {"type": "sqs", "queue_url": SQS.replace("123456789012", "acct") + "q"},
            "target.queue_url",
        ),
    ],
)
def test_an_aws_queue_url_is_exactly_an_account_and_a_name(
    body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_job_spec({"schedule": {"delay_seconds": 5}, "target": body})
    assert refused.value.field == field


def test_an_event_bus_arn_is_judged_by_the_name_aws_reads() -> None:
    # AWS takes the bus name after the first `event-bus/` (found by review: the check took the
    # last, so `…event-bus/tenant-b-bus/event-bus/tenant-a-x` passed as tenant-a's).
    target = EventBridgeTarget("s", "d", BUS + "tenant-b-bus/event-bus/tenant-a-x")
    assert SCOPED.refusal(target, "tenant-a") is not None


def test_without_a_pattern_every_tenant_may_name_every_resource() -> None:
    assert TenantTargets().refusal(SqsTarget(SQS + "team-b-orders"), "team-a") is None


def test_the_tenant_is_matched_as_text_and_the_star_anywhere_in_the_pattern() -> None:
    # A tenant id is never read as a pattern: `.` is a dot, `*` a star.
    assert TenantTargets("q_{tenant}").refusal(SqsTarget(SQS + "q_a.b"), "a.b") is None
    assert TenantTargets("q_{tenant}").refusal(SqsTarget(SQS + "q_aXb"), "a.b") is not None
    assert TenantTargets("*_{tenant}_*").refusal(SnsTarget(SNS + "x_t1_y"), "t1") is None
    assert TenantTargets("*_{tenant}_*").refusal(SnsTarget(SNS + "x_t2_y"), "t1") is not None


@pytest.mark.parametrize("pattern", ["team-*", "{tenant}-{tenant}", "{tenant} *", "{tenant}%"])
def test_a_pattern_without_the_tenant_once_or_with_other_characters_is_a_setting_error(
    aws: Aws, pattern: str
) -> None:
    env = aws.settings.to_env() | {Env.TENANT_TARGET_NAMES: pattern}
    with pytest.raises(RuntimeError, match=Env.TENANT_TARGET_NAMES):
        Settings.from_env(env)


def test_the_pattern_goes_through_the_environment(aws: Aws) -> None:
    settings = dataclasses.replace(aws.settings, tenant_target_names="{tenant}-*")
    assert Settings.from_env(settings.to_env()).tenant_targets() == SCOPED


# --- through the API and the worker, on moto -------------------------------------------------


@pytest.fixture
def aws(aws: Aws) -> Aws:
    """The deployment with tenant-scoped AWS targets."""
    return dataclasses.replace(
        aws, settings=dataclasses.replace(aws.settings, tenant_target_names="{tenant}-*")
    )


def _sqs(url: str) -> dict[str, Any]:
    return {"schedule": {"delay_seconds": 60}, "target": {"type": "sqs", "queue_url": url}}


def test_submissions_naming_another_tenant_s_queue_are_a_400_and_store_nothing(api: Api) -> None:
    sqs = api.engine.aws.sqs
    theirs = sqs.create_queue(QueueName="tenant-b-orders")["QueueUrl"]
    ours = sqs.create_queue(QueueName="tenant-a-orders")["QueueUrl"]

    refused = api.call("POST", "/jobs", _sqs(theirs))
    assert (refused.status, refused.error["field"]) == (400, "target.queue_url"), refused.json
    assert "tenant-a-*" in refused.error["message"]
    batch = api.call("POST", "/jobs/batch", {"jobs": [_sqs(theirs)]})
    assert batch.status == 200, batch.json
    (item,) = batch.json["items"]
    assert (item["status"], item["error"]["field"]) == (400, "target.queue_url")
    assert api.job_items() == []

    job = api.call("POST", "/jobs", _sqs(ours))
    assert job.status == 201, job.json
    moved = api.call("PATCH", f"/jobs/{job.json['id']}", {"target": _sqs(theirs)["target"]})
    assert (moved.status, moved.error["field"]) == (400, "target.queue_url")
    shown = api.call("GET", f"/jobs/{job.json['id']}").json
    assert shown["target"]["queue_url"] == ours
    assert api.call("POST", "/jobs", _sqs(ours), tenant="tenant-b").status == 400


def test_a_job_stored_before_the_pattern_is_refused_at_its_run_and_sends_nothing(
    engine: Engine,
) -> None:
    theirs = engine.aws.sqs.create_queue(QueueName="tenant-b-orders")["QueueUrl"]
    job = stored_with(engine, SqsTarget(theirs))  # as before the pattern was set

    engine.drain()

    run = engine.parts.runs.get(job.id, job.created_ms)
    assert run is not None
    assert run.status == RunStatus.FAILED
    assert len(run.attempts) == 1  # not retryable: no second attempt
    assert "refused: target.queue_url is not one of this tenant's queues" in (run.error or "")
    assert engine.aws.sqs.receive_message(QueueUrl=theirs).get("Messages") is None
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 1
