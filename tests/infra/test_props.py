"""SchedulerProps and its helpers refuse settings that would deploy something broken."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.local.lambda_runtime import LAMBDA_MAX_POLLERS
from duetime.settings import Env, QueueUrls, Quotas, Settings, queue_key
from infra.app import (
    PLACEHOLDER_ISSUER,
    Context,
    cdk_json_context,
    props_from_context,
)
from infra.constructs.functions import TARGET_ACTIONS, _target_actions
from infra.limits import MAX_HOT_WINDOW_DAYS
from infra.profiles import LARGE, PROFILES, Pollers, WarmThroughput
from infra.props import MAX_EXTRA_LANES, MAX_QUEUE_LANES
from infra.scheduler import PriorityConcurrency, SchedulerProps, TenantQuotas

ISSUER = "https://auth.example.com/"
AUDIENCE = ("duetime",)


def test_priority_concurrency_must_be_ordered() -> None:
    assert PriorityConcurrency().of(Priority.HIGH) > PriorityConcurrency().of(Priority.LOW)
    unordered = PriorityConcurrency(high=5, normal=10, low=2)
    with pytest.raises(ValueError, match="high > normal > low"):
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, worker_max_concurrency=unordered)
    with pytest.raises(ValueError, match="maximum concurrency"):
        PriorityConcurrency(high=10, normal=5, low=1)


def test_the_local_stack_scales_a_lambda_queue_as_far_as_the_normal_mapping_does() -> None:
    # `duetime local` and the bench emulate the deployed mapping's maximum concurrency.
    assert PriorityConcurrency().of(Priority.NORMAL) == LAMBDA_MAX_POLLERS


def test_the_order_applies_to_the_standard_mode_mappings_only() -> None:
    """A provisioned mapping has no maximum concurrency: its value takes no part."""
    unordered = PriorityConcurrency(high=5, normal=10, low=2)
    props = SchedulerProps(
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        worker_max_concurrency=unordered,
        worker_pollers={"normal": Pollers(minimum=2, maximum=20)},
    )
    assert props.standard_priorities == (Priority.HIGH, Priority.LOW)
    with pytest.raises(ValueError, match="high > low"):
        SchedulerProps(
            jwt_issuer=ISSUER,
            jwt_audience=AUDIENCE,
            worker_max_concurrency=PriorityConcurrency(high=5, normal=3, low=10),
            worker_pollers={"normal": Pollers(minimum=2, maximum=20)},
        )


@pytest.mark.parametrize(
    "changes",
    [
        {"jwt_issuer": "http://insecure.example.com/"},
        {"jwt_audience": ()},
        {"jwt_audience": "duetime"},
        {"worker_timeout_seconds": 901},
        {"claim_lead_ms": -1},
        {"claim_lead_ms": 2001},
        {"timer_shards": 0},
        {"history_start_date": "2025-1-1"},
        {"fargate_min_tasks": 3, "fargate_max_tasks": 2},
        {"coordinator_timeout_seconds": 0},
        {"reconciler_timeout_seconds": 901},
        {"sweeper_memory_mib": 64},
        # each shard's sweep is its own invocation: a reservation must fit them all
        {"sweeper_reserved_concurrency": 1},
        {"timer_shards": 16, "sweeper_reserved_concurrency": 8},
        # a worker reservation below what its mappings invoke at once throttles them
        {"worker_reserved_concurrency": 74},  # 50 + 20 + 5 by default
        {"worker_reserved_concurrency": 100, "queue_lanes": {"lambda/high": 2}},  # 125
        {"worker_reserved_concurrency": 30, "worker_pollers": {"high": Pollers(25, 100)}},
        # SQS provisioned pollers: minimum 2..200, maximum 2..2000, minimum <= maximum
        {"worker_pollers": {"normal": Pollers(minimum=1, maximum=10)}},
        {"worker_pollers": {"normal": Pollers(minimum=201, maximum=400)}},
        {"worker_pollers": {"normal": Pollers(minimum=2, maximum=2001)}},
        {"worker_pollers": {"normal": Pollers(minimum=20, maximum=10)}},
        {"worker_pollers": {"urgent": Pollers(minimum=2, maximum=10)}},
        {"warm_throughput": {"history": WarmThroughput(reads=1, writes=1)}},
        {"warm_throughput": {"jobs": WarmThroughput(reads=0, writes=1)}},
    ],
)
def test_invalid_props_are_refused(changes: dict[str, object]) -> None:
    settings: dict[str, object] = {"jwt_issuer": ISSUER, "jwt_audience": ("duetime",)}
    with pytest.raises(ValueError):
        SchedulerProps(**{**settings, **changes})  # type: ignore[arg-type]


def test_a_worker_reservation_may_cover_every_mapping() -> None:
    # (found by review: nothing checked it, and a reservation of 10 throttled every mapping)
    for changes in (
        {"worker_reserved_concurrency": 75},
        {"worker_reserved_concurrency": 125, "queue_lanes": {"lambda/high": 2}},
        {"worker_reserved_concurrency": 50, "worker_pollers": {"high": Pollers(25, 100)}},
    ):
        props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **changes)  # type: ignore[arg-type]
        assert props.worker_reserved_concurrency == changes["worker_reserved_concurrency"]


def test_sweeper_reservation_may_cover_every_shard() -> None:
    props = SchedulerProps(
        jwt_issuer=ISSUER, jwt_audience=AUDIENCE, timer_shards=16, sweeper_reserved_concurrency=16
    )
    assert props.sweeper_reserved_concurrency == 16
    assert (
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE).sweeper_reserved_concurrency
        is None
    )


def test_the_default_profile_is_the_defaults() -> None:
    assert SchedulerProps.profile(
        "default", jwt_issuer=ISSUER, jwt_audience=AUDIENCE
    ) == SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE)


def test_the_large_profile_maps_onto_the_props() -> None:
    props = SchedulerProps.profile("large", jwt_issuer=ISSUER, jwt_audience=AUDIENCE)

    assert props.timer_shards == LARGE.timer_shards == 32
    assert props.sweeper_memory_mib == LARGE.sweeper_memory_mib
    assert props.sweeper_reserved_concurrency == LARGE.sweeper_reserved_concurrency
    assert props.worker_pollers == LARGE.worker_pollers
    assert props.standard_priorities == ()
    assert props.warm_throughput == LARGE.warm_throughput
    assert (props.api_throttle_rate, props.api_throttle_burst) == (
        LARGE.api_throttle_rate,
        LARGE.api_throttle_burst,
    )
    assert props.tenant_quotas == TenantQuotas(
        submissions_per_second=LARGE.tenant_submissions_per_second,
        submission_burst=LARGE.tenant_submission_burst,
        requests_per_second=LARGE.tenant_requests_per_second,
        request_burst=LARGE.tenant_request_burst,
    )


def test_profile_overrides_win() -> None:
    quotas = TenantQuotas(submissions_per_second=10)
    props = SchedulerProps.profile(
        "large",
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        timer_shards=48,
        sweeper_reserved_concurrency=None,
        tenant_quotas=quotas,
        fargate_max_tasks=40,
    )

    assert props.timer_shards == 48
    assert props.sweeper_reserved_concurrency is None
    assert props.tenant_quotas == quotas
    assert props.fargate_max_tasks == 40
    assert props.warm_throughput == LARGE.warm_throughput  # the rest stays the profile's


def test_overrides_are_validated_with_the_profile() -> None:
    with pytest.raises(ValueError, match="sweeper_reserved_concurrency"):
        SchedulerProps.profile("large", jwt_issuer=ISSUER, jwt_audience=AUDIENCE, timer_shards=100)


def test_unknown_profile_is_refused_with_the_names() -> None:
    with pytest.raises(ValueError, match="'nope'") as raised:
        SchedulerProps.profile("nope", jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    for name in PROFILES:
        assert name in str(raised.value)


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
        "duetime:sweeperReservedConcurrency": "16",
        "duetime:targetResourceArns": '["arn:aws:sqs:us-east-1:111122223333:q"]',
        "duetime:fargateSpot": "true",
        "duetime:retainData": "false",
        "duetime:claimLeadMs": "250",
    }

    props = props_from_context(Context(context.get))

    assert props.claim_lead_ms == 250

    assert props.jwt_audience == ("api", "cli")
    assert props.billing_mode == "provisioned"
    assert props.max_capacity == 400
    assert props.worker_max_concurrency == PriorityConcurrency(high=40, normal=10, low=3)
    assert props.sweeper_reserved_concurrency == 16
    assert props.target_resource_arns == ("arn:aws:sqs:us-east-1:111122223333:q",)
    assert props.fargate_spot is True
    assert props.retain_data is False


@pytest.mark.parametrize("pattern", ["orders-*", "{tenant}-{tenant}", "{tenant} q"])
def test_a_tenant_target_pattern_without_the_tenant_once_is_refused(pattern: str) -> None:
    context = {**cdk_json_context(), "duetime:tenantTargetNames": pattern}
    with pytest.raises(ValueError, match=re.escape("holds {tenant} once")):
        props_from_context(Context(context.get))


def test_unknown_billing_mode_is_refused() -> None:
    context = {"duetime:billingMode": "serverless"}
    with pytest.raises(ValueError, match="billingMode"):
        props_from_context(Context(context.get))


@pytest.mark.parametrize("key", ["duetime:profile", "profile"])
def test_a_profile_is_chosen_by_context(key: str) -> None:
    """`cdk synth -c duetime:profile=large` (or `-c profile=large`) with cdk.json's context."""
    context = {**cdk_json_context(), key: "large"}

    props = props_from_context(Context(context.get))

    assert "duetime:timerShards" not in context  # cdk.json leaves the profile's shards alone
    assert props == SchedulerProps.profile(
        "large", jwt_issuer=PLACEHOLDER_ISSUER, jwt_audience=AUDIENCE
    )


def test_context_settings_override_the_profile() -> None:
    context = {
        **cdk_json_context(),
        "duetime:profile": "large",
        "duetime:timerShards": "8",  # from the command line: a choice, even if the default
        "duetime:sweeperReservedConcurrency": "none",
        "duetime:jwtIssuer": "https://idp.example.net/",
    }

    props = props_from_context(Context(context.get))

    assert props.timer_shards == 8
    assert props.sweeper_reserved_concurrency is None
    assert props.jwt_issuer == "https://idp.example.net/"
    assert props.worker_pollers == LARGE.worker_pollers


def test_an_edited_cdk_json_value_overrides_the_profile() -> None:
    context = {**cdk_json_context(), "profile": "large", "duetime:timerShards": 40}
    assert props_from_context(Context(context.get)).timer_shards == 40


def test_unknown_or_conflicting_profile_context_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        props_from_context(Context({"duetime:profile": "huge"}.get))
    with pytest.raises(ValueError, match="different profiles"):
        props_from_context(Context({"duetime:profile": "large", "profile": "default"}.get))


def test_queue_lanes_default_to_one_per_queue() -> None:
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE)

    assert props.queue_lanes == {}
    assert {props.lanes_of(r, p) for r in Runtime for p in Priority} == {1}


def test_queue_lanes_name_a_queue_by_its_key() -> None:
    props = SchedulerProps(
        jwt_issuer=ISSUER, jwt_audience=AUDIENCE, queue_lanes={"lambda/normal": 6}
    )
    assert props.lanes_of(Runtime.LAMBDA, Priority.NORMAL) == 6
    assert props.lanes_of(Runtime.FARGATE, Priority.NORMAL) == 1
    with pytest.raises(ValueError, match="unknown queue 'lambda/urgent'"):
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, queue_lanes={"lambda/urgent": 2})


@pytest.mark.parametrize("lanes", [0, -1, MAX_QUEUE_LANES + 1, 2.5, True])
def test_queue_lanes_must_be_whole_numbers_in_range(lanes: Any) -> None:
    with pytest.raises(ValueError, match=r"queue_lanes\['fargate/low'\]"):
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, queue_lanes={"fargate/low": lanes})


def test_queue_lanes_beyond_the_first_are_capped_in_all() -> None:
    """Each extra lane's name goes into the functions' 4 KB environment."""
    within = {"lambda/normal": MAX_EXTRA_LANES + 1}
    assert SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, queue_lanes=within)
    over = {"lambda/normal": MAX_EXTRA_LANES, "lambda/high": 3}
    with pytest.raises(ValueError, match=f"at most {MAX_EXTRA_LANES}"):
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, queue_lanes=over)


@pytest.mark.parametrize(
    "value",
    ['{"lambda/normal": 3, "lambda/high": 2}', "lambda/normal=3,lambda/high=2",
     {"lambda/normal": 3, "lambda/high": 2}],
)  # fmt: skip
def test_queue_lanes_from_context(value: Any) -> None:
    context = {**cdk_json_context(), "duetime:queueLanes": value}
    props = props_from_context(Context(context.get))

    assert props.queue_lanes == {"lambda/normal": 3, "lambda/high": 2}


@pytest.mark.parametrize(
    ("changes", "setting"),
    [
        # the functions' Settings refuse a run TTL over 3,650 days at cold start
        ({"hot_window_days": MAX_HOT_WINDOW_DAYS + 1}, "hot_window_days"),
        ({"hot_window_days": 0}, "hot_window_days"),
        # a reservation of 0 throttles every call of the API
        ({"api_reserved_concurrency": 0}, "api_reserved_concurrency"),
        ({"api_reserved_concurrency": -3}, "api_reserved_concurrency"),
        # API Gateway refuses these at deploy
        ({"api_throttle_rate": 0}, "api_throttle_rate"),
        ({"api_throttle_rate": -1.0}, "api_throttle_rate"),
        ({"api_throttle_rate": float("nan")}, "api_throttle_rate"),
        ({"api_throttle_burst": 0}, "api_throttle_burst"),
        # no layer has version 0 or below: every function's creation fails
        ({"powertools_layer_version": 0}, "powertools_layer_version"),
        ({"powertools_layer_version": -1}, "powertools_layer_version"),
        ({"pandas_layer_version": 0}, "pandas_layer_version"),
        # `duetime worker --concurrency 0` refuses to start
        ({"fargate_task_concurrency": 0}, "fargate_task_concurrency"),
        # Athena's date projection: every query fails on a day that is not one
        ({"history_start_date": "2025-13-45"}, "history_start_date"),
        ({"history_start_date": "2025-02-29"}, "history_start_date"),
        ({"history_start_date": "20250101"}, "history_start_date"),
    ],
)
def test_what_the_deployed_code_or_aws_would_refuse_fails_the_synth(
    changes: dict[str, Any], setting: str
) -> None:
    """Found by an outside audit: each of these synthesized cleanly, then failed at deploy, at
    the functions' cold start, or in every Athena query."""
    with pytest.raises(ValueError, match=rf"^{re.escape(setting)}\b"):
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **changes)


@pytest.mark.parametrize(
    ("quota", "value"),
    [
        ("min_rate_seconds", 0),
        ("min_rate_seconds", 86_401),
        ("min_rate_seconds", 1.5),
        ("submissions_per_second", 0),
        ("submissions_per_second", 100_001),
        ("submission_burst", 0),
        ("submission_burst", 1_000_001),
        ("max_active_recurring_jobs", 0),
    ],
)
def test_quotas_the_api_function_would_refuse_fail_the_synth(quota: str, value: Any) -> None:
    """What ApiSettings.from_env refuses at the API function's cold start (found by an outside
    audit: a quota of 0 submissions a second synthesized, then the API failed on every call)."""
    quotas = replace(TenantQuotas(), **{quota: value})
    with pytest.raises(ValueError) as refused:
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, tenant_quotas=quotas)

    assert str(refused.value).startswith(
        f"tenant_quotas.{quota} ({value!r}): the API function would refuse it at cold start"
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"hot_window_days": MAX_HOT_WINDOW_DAYS},
        {"api_reserved_concurrency": 1},
        {"api_reserved_concurrency": None},
        {"api_throttle_rate": 0.5, "api_throttle_burst": 1},
        {"powertools_layer_version": 1, "pandas_layer_version": 1},
        {"fargate_task_concurrency": 1},
        {"history_start_date": "2024-02-29"},
        {"tenant_quotas": TenantQuotas(1, 0.001, 1, 1)},
        {"tenant_quotas": TenantQuotas(86_400, 100_000, 1_000_000, 10_000_000)},
    ],
)
def test_the_bounds_themselves_are_accepted(changes: dict[str, Any]) -> None:
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **changes)

    assert Quotas.from_env(props.tenant_quotas.to_env()) == props.tenant_quotas


def test_the_longest_hot_window_is_the_longest_run_ttl_the_functions_accept() -> None:
    """MAX_HOT_WINDOW_DAYS restates Settings.from_env's range of DUETIME_RUN_TTL_SECONDS."""
    queues = {
        queue_key(r, p): QueueUrls(
            f"https://sqs.example/q-{queue_key(r, p)}", "https://sqs.example/d"
        )
        for r in Runtime
        for p in Priority
    }
    settings = Settings("jobs", "timers", "runs", queues)

    def environment(days: int) -> dict[str, str]:
        return settings.to_env() | {Env.RUN_TTL_SECONDS: str(days * 86_400)}

    assert Settings.from_env(environment(MAX_HOT_WINDOW_DAYS)).run_ttl_seconds == (
        MAX_HOT_WINDOW_DAYS * 86_400
    )
    with pytest.raises(RuntimeError, match=Env.RUN_TTL_SECONDS):
        Settings.from_env(environment(MAX_HOT_WINDOW_DAYS + 1))
