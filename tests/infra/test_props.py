"""SchedulerProps and its helpers refuse settings that would deploy something broken."""

from __future__ import annotations

import pytest

from duetime.domain.jobs import Priority
from infra.app import PLACEHOLDER_ISSUER, Context, cdk_json_context, props_from_context
from infra.constructs.functions import TARGET_ACTIONS, _target_actions
from infra.scheduler import PriorityConcurrency, SchedulerProps

ISSUER = "https://auth.example.com/"


def test_priority_concurrency_must_be_ordered() -> None:
    assert PriorityConcurrency().of(Priority.HIGH) > PriorityConcurrency().of(Priority.LOW)
    with pytest.raises(ValueError, match="high > normal > low"):
        PriorityConcurrency(high=5, normal=10, low=2)
    with pytest.raises(ValueError, match="maximum concurrency"):
        PriorityConcurrency(high=10, normal=5, low=1)


@pytest.mark.parametrize(
    "changes",
    [
        {"jwt_issuer": "http://insecure.example.com/"},
        {"jwt_audience": ()},
        {"jwt_audience": "duetime"},
        {"worker_timeout_seconds": 901},
        {"timer_shards": 0},
        {"history_start_date": "2025-1-1"},
        {"fargate_min_tasks": 3, "fargate_max_tasks": 2},
    ],
)
def test_invalid_props_are_refused(changes: dict[str, object]) -> None:
    settings: dict[str, object] = {"jwt_issuer": ISSUER, "jwt_audience": ("duetime",)}
    with pytest.raises(ValueError):
        SchedulerProps(**{**settings, **changes})  # type: ignore[arg-type]


def test_visibility_is_six_worker_timeouts() -> None:
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=("a",), worker_timeout_seconds=300)
    assert props.visibility_timeout_seconds == 1800


@pytest.mark.parametrize(
    ("arn", "action"),
    [
        ("arn:aws:sqs:us-east-1:111122223333:q", "sqs:SendMessage"),
        ("arn:aws:sns:us-east-1:111122223333:t", "sns:Publish"),
        ("arn:aws:events:us-east-1:111122223333:event-bus/b", "events:PutEvents"),
        ("arn:aws:lambda:us-east-1:111122223333:function:f", "lambda:InvokeFunction"),
    ],
)
def test_target_arn_gets_the_action_of_its_kind(arn: str, action: str) -> None:
    assert _target_actions(arn) == [action]
    assert action in TARGET_ACTIONS.values()


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:s3:::bucket",
        "arn:aws:sqs:us-east-1:111122223333:*",
        "not-an-arn",
    ],
)
def test_other_target_arns_are_refused(arn: str) -> None:
    with pytest.raises(ValueError, match="target_resource_arns"):
        _target_actions(arn)


def test_cdk_json_context_makes_valid_props() -> None:
    context = cdk_json_context()
    props = props_from_context(Context(context.get))

    assert props.jwt_issuer == PLACEHOLDER_ISSUER  # to be replaced at deploy (docs/deploy.md)
    assert props.billing_mode == "on_demand"
    assert props.history_retention_days == 365
    assert context["@aws-cdk/aws-iam:minimizePolicies"] is True  # the recommended flags


def test_command_line_context_strings_are_parsed() -> None:
    """`cdk synth -c key=value` passes every value as a string."""
    context = {
        "duetime:jwtIssuer": "https://idp.example.net/",
        "duetime:jwtAudience": "api,cli",
        "duetime:billingMode": "provisioned",
        "duetime:maxCapacity": "400",
        "duetime:workerMaxConcurrency": "40,10,3",
        "duetime:sweeperReservedConcurrency": "none",
        "duetime:targetResourceArns": '["arn:aws:sqs:us-east-1:111122223333:q"]',
        "duetime:fargateSpot": "true",
        "duetime:retainData": "false",
    }

    props = props_from_context(Context(context.get))

    assert props.jwt_audience == ("api", "cli")
    assert props.billing_mode == "provisioned"
    assert props.max_capacity == 400
    assert props.worker_max_concurrency == PriorityConcurrency(high=40, normal=10, low=3)
    assert props.sweeper_reserved_concurrency is None
    assert props.target_resource_arns == ("arn:aws:sqs:us-east-1:111122223333:q",)
    assert props.fargate_spot is True
    assert props.retain_data is False


def test_unknown_billing_mode_is_refused() -> None:
    context = {"duetime:billingMode": "serverless"}
    with pytest.raises(ValueError, match="billingMode"):
        props_from_context(Context(context.get))
