"""The engine's schedules: the coordinator every minute starting one sweep per shard, the
daily reconciler; and the worker's event source mappings."""

from __future__ import annotations

from typing import Any

from duetime.domain.jobs import Priority, Runtime
from duetime.settings import Env
from infra.constructs.engine import WORKER_MEMORY_MIB
from tests.infra.conftest import Synth, listed, queue_name

ENGINE_FUNCTIONS = ("api", "coordinator", "sweeper", "reconciler", "worker")


def _rules_targeting(synth: Synth, function: str) -> list[dict[str, Any]]:
    return [
        r["Properties"]
        for r in synth.of_type("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [function, "Arn"]} for t in r["Properties"]["Targets"])
    ]


def _invoke_config(synth: Synth, function: str) -> list[dict[str, Any]]:
    return [
        c["Properties"]
        for c in synth.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": function}
    ]


def test_the_coordinator_runs_every_minute(synth: Synth) -> None:
    coordinator, _ = synth.function("coordinator")
    rules = _rules_targeting(synth, coordinator)

    assert [r["ScheduleExpression"] for r in rules] == ["rate(1 minute)"]
    assert rules[0]["State"] == "ENABLED"
    assert synth.logical_id("Scheduler/Engine/SweepSchedule") in synth.of_type("AWS::Events::Rule")


def test_the_sweeper_has_no_schedule(synth: Synth) -> None:
    """Only the coordinator starts sweeps, one asynchronous invocation per shard."""
    sweeper, _ = synth.function("sweeper")
    assert _rules_targeting(synth, sweeper) == []


def test_the_coordinator_names_the_sweeper_and_may_invoke_it_only(synth: Synth) -> None:
    _, properties = synth.function("coordinator")
    sweeper, _ = synth.function("sweeper")

    assert properties["Environment"]["Variables"][Env.SWEEPER_FUNCTION] == {"Ref": sweeper}
    lambda_statements = [
        s
        for s in synth.statements(synth.role_of("coordinator"))
        if any(a.startswith("lambda:") for a in listed(s["Action"]))
    ]
    assert [(s["Effect"], listed(s["Action"])) for s in lambda_statements] == [
        ("Allow", ["lambda:InvokeFunction"])
    ]
    assert listed(lambda_statements[0]["Resource"]) == [{"Fn::GetAtt": [sweeper, "Arn"]}]
    assert synth.actions_on(synth.role_of("coordinator"), sweeper) == {"lambda:InvokeFunction"}


def test_only_the_coordinator_knows_the_sweeper_function(synth: Synth) -> None:
    """On the sweeper itself the variable would be a circular reference; the other
    functions would start sweeps in-process instead of ignoring it."""
    for name in ENGINE_FUNCTIONS:
        _, properties = synth.function(name)
        has_it = Env.SWEEPER_FUNCTION in properties["Environment"]["Variables"]
        assert has_it == (name == "coordinator"), name


def test_nothing_else_may_invoke_the_sweeper(synth: Synth) -> None:
    sweeper, _ = synth.function("sweeper")
    for role in synth.of_type("AWS::IAM::Role"):
        if role != synth.role_of("coordinator"):
            assert synth.actions_on(role, sweeper) == set(), role
    permissions = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] in ({"Fn::GetAtt": [sweeper, "Arn"]}, {"Ref": sweeper})
    ]
    assert permissions == []  # no resource policy: no service invokes it


def test_a_missed_tick_or_shard_sweep_is_not_replayed(synth: Synth) -> None:
    for name in ("coordinator", "sweeper"):
        function, _ = synth.function(name)
        assert _invoke_config(synth, function) == [
            {
                "FunctionName": {"Ref": function},
                "MaximumEventAgeInSeconds": 120,
                "MaximumRetryAttempts": 0,
                "Qualifier": "$LATEST",
            }
        ], name


def test_sweeper_size_and_no_reservation_by_default(synth: Synth) -> None:
    _, sweeper = synth.function("sweeper")

    assert sweeper["MemorySize"] == 1024
    assert sweeper["Timeout"] == 90
    assert "ReservedConcurrentExecutions" not in sweeper  # a reservation of 1 would throttle


def test_the_worker_has_the_measured_memory_size(synth: Synth) -> None:
    _, worker = synth.function("worker")

    assert worker["MemorySize"] == WORKER_MEMORY_MIB == 768  # docs/performance.md


def test_the_reconciler_runs_daily(synth: Synth) -> None:
    reconciler, properties = synth.function("reconciler")
    rules = _rules_targeting(synth, reconciler)

    assert [r["ScheduleExpression"] for r in rules] == ["rate(1 day)"]
    assert rules[0]["State"] == "ENABLED"
    assert properties["Timeout"] == 900
    assert properties["MemorySize"] == 1024
    (config,) = _invoke_config(synth, reconciler)
    assert config["MaximumRetryAttempts"] == 0  # tomorrow's run retries, not a second Scan now


def test_the_coordinator_times_out_within_a_minute(synth: Synth) -> None:
    _, coordinator = synth.function("coordinator")
    assert coordinator["Timeout"] == 60


def test_worker_mappings_report_partial_batches_with_priority_concurrency(synth: Synth) -> None:
    worker, _ = synth.function("worker")
    mappings = {
        m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": worker}
    }
    by_priority = {
        p: mappings[synth.logical_id(f"Scheduler/Queues/{queue_name(Runtime.LAMBDA, p)}")]
        for p in Priority
    }

    assert len(mappings) == len(Priority)  # the lambda queues, never the fargate ones
    for mapping in by_priority.values():
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert "ProvisionedPollerConfig" not in mapping  # standard mode by default
    concurrency = {p: m["ScalingConfig"]["MaximumConcurrency"] for p, m in by_priority.items()}
    assert concurrency[Priority.HIGH] > concurrency[Priority.NORMAL] > concurrency[Priority.LOW]
