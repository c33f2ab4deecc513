"""The `large` profile (infra/profiles.py), synthesized as `cdk synth -c profile=large` runs it:
32 timer shards, provisioned pollers on the lambda queues, pre-warmed tables, and still
clean for cdk-nag and cfn-lint."""

from __future__ import annotations

from typing import Any

import pytest
from cfnlint.api import lint  # type: ignore[import-untyped]

from duetime.domain.jobs import Priority, Runtime
from duetime.settings import Env
from infra.constructs.engine import COORDINATOR_RESERVED_CONCURRENCY
from infra.profiles import LARGE
from tests.infra.conftest import STACK, Synth, queue_name
from tests.infra.test_compliance import IGNORED_CFN_LINT_RULES

ENGINE_FUNCTIONS = ("api", "coordinator", "sweeper", "reconciler", "worker")
TABLES = ("jobs", "timers", "runs")


def _worker_mappings(synth: Synth) -> dict[Priority, dict[str, Any]]:
    worker, _ = synth.function("worker")
    mappings = {
        m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": worker}
    }
    return {
        p: mappings[synth.logical_id(f"Scheduler/Queues/{queue_name(Runtime.LAMBDA, p)}")]
        for p in Priority
    }


@pytest.mark.parametrize("name", ENGINE_FUNCTIONS)
def test_engine_functions_use_32_timer_shards(large_synth: Synth, name: str) -> None:
    _, function = large_synth.function(name)
    assert function["Environment"]["Variables"][Env.TIMER_SHARDS] == "32"


@pytest.mark.parametrize("name", ENGINE_FUNCTIONS)
def test_engine_functions_spread_a_tenant_over_8_job_partitions(
    large_synth: Synth, name: str
) -> None:
    _, function = large_synth.function(name)
    assert function["Environment"]["Variables"][Env.JOB_PARTITIONS] == "8"


def test_sweeper_is_sized_for_a_shard_sweep_each(large_synth: Synth) -> None:
    _, sweeper = large_synth.function("sweeper")

    assert sweeper["MemorySize"] == LARGE.sweeper_memory_mib == 1769
    assert sweeper["ReservedConcurrentExecutions"] == LARGE.sweeper_reserved_concurrency
    assert sweeper["ReservedConcurrentExecutions"] >= LARGE.timer_shards


def test_the_coordinator_is_reserved_beside_the_sweeps(large_synth: Synth, synth: Synth) -> None:
    """Found by an outside audit: with the sweeps reserved, the coordinator that starts them
    still drew on the account's unreserved pool, which a burst of workers can empty: every
    shard's sweep then stopped with it. A deployment that reserves the sweeps reserves it too
    (one tick's invocation and one overlapping it); one that does not, neither."""
    _, coordinator = large_synth.function("coordinator")
    assert coordinator["ReservedConcurrentExecutions"] == COORDINATOR_RESERVED_CONCURRENCY == 2
    assert "ReservedConcurrentExecutions" not in synth.function("coordinator")[1]


def test_the_api_is_reserved_beside_workers_that_may_take_the_unreserved_pool(
    large_synth: Synth, synth: Synth
) -> None:
    # The pollers' maxima can drive 11,000 workers against the profile's 10,000 quota: with
    # nothing reserved, a burst could throttle the API (an outside audit of the stack).
    _, api = large_synth.function("api")
    assert api["ReservedConcurrentExecutions"] == LARGE.api_reserved_concurrency == 1_000
    reserved = 1_000 + (LARGE.sweeper_reserved_concurrency or 0) + 2 + 100  # + unreserved
    assert reserved <= LARGE.lambda_concurrency_quota
    assert "ReservedConcurrentExecutions" not in synth.function("api")[1]


def test_normal_mapping_uses_provisioned_pollers(large_synth: Synth) -> None:
    normal = _worker_mappings(large_synth)[Priority.NORMAL]

    assert normal["ProvisionedPollerConfig"] == {"MinimumPollers": 50, "MaximumPollers": 800}
    assert "ScalingConfig" not in normal  # MaximumConcurrency and pollers exclude each other
    assert normal["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_every_lambda_mapping_gets_the_profiles_pollers(large_synth: Synth) -> None:
    assert LARGE.worker_pollers is not None
    for priority, mapping in _worker_mappings(large_synth).items():
        pollers = LARGE.worker_pollers[priority.value]
        assert mapping["ProvisionedPollerConfig"] == {
            "MinimumPollers": pollers.minimum,
            "MaximumPollers": pollers.maximum,
        }, priority
        assert "ScalingConfig" not in mapping, priority


@pytest.mark.parametrize("name", TABLES)
def test_tables_are_pre_warmed(large_synth: Synth, name: str) -> None:
    table = large_synth.resources[large_synth.logical_id(f"Scheduler/Data/{name.capitalize()}")]
    warm = LARGE.warm_throughput[name]

    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["Properties"]["WarmThroughput"] == {
        "ReadUnitsPerSecond": warm.reads,
        "WriteUnitsPerSecond": warm.writes,
    }


def test_default_tables_are_not_pre_warmed(synth: Synth) -> None:
    for name in TABLES:
        table = synth.resources[synth.logical_id(f"Scheduler/Data/{name.capitalize()}")]
        assert "WarmThroughput" not in table["Properties"], name


def test_api_throttling_follows_the_profile(large_synth: Synth) -> None:
    (stage,) = large_synth.of_type("AWS::ApiGatewayV2::Stage").values()
    throttle = stage["Properties"]["DefaultRouteSettings"]
    assert throttle["ThrottlingRateLimit"] == LARGE.api_throttle_rate
    assert throttle["ThrottlingBurstLimit"] == LARGE.api_throttle_burst
    _, api = large_synth.function("api")
    variables = api["Environment"]["Variables"]
    assert variables[Env.SUBMISSIONS_PER_SECOND] == f"{LARGE.tenant_submissions_per_second:g}"
    assert variables[Env.SUBMISSION_BURST] == str(LARGE.tenant_submission_burst)


def test_large_profile_has_no_unacknowledged_cdk_nag_findings(large_synth: Synth) -> None:
    report = large_synth.validation_report()
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]

    assert nag["violations"] == []


def test_large_profile_passes_cfn_lint(large_synth: Synth) -> None:
    template = (large_synth.outdir / f"{STACK}.template.json").read_text()

    findings = [
        f"{m.rule.id} {m.message}"
        for m in lint(template, regions=["us-east-1", "eu-west-1"])
        if m.rule.id not in IGNORED_CFN_LINT_RULES
    ]

    assert findings == []
