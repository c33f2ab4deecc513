"""The sweeper's schedule and the worker's event source mappings."""

from __future__ import annotations

from duetime.domain.jobs import Priority, Runtime
from tests.infra.conftest import Synth, queue_name


def test_sweeper_runs_every_minute(synth: Synth) -> None:
    sweeper, _ = synth.function("sweeper")
    rules = [
        r["Properties"]
        for r in synth.of_type("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [sweeper, "Arn"]} for t in r["Properties"]["Targets"])
    ]

    assert [r["ScheduleExpression"] for r in rules] == ["rate(1 minute)"]
    assert rules[0]["State"] == "ENABLED"


def test_a_missed_tick_is_not_replayed(synth: Synth) -> None:
    sweeper, _ = synth.function("sweeper")
    configs = [
        c["Properties"]
        for c in synth.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": sweeper}
    ]

    assert configs == [
        {
            "FunctionName": {"Ref": sweeper},
            "MaximumEventAgeInSeconds": 120,
            "MaximumRetryAttempts": 0,
            "Qualifier": "$LATEST",
        }
    ]


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
    concurrency = {p: m["ScalingConfig"]["MaximumConcurrency"] for p, m in by_priority.items()}
    assert concurrency[Priority.HIGH] > concurrency[Priority.NORMAL] > concurrency[Priority.LOW]
