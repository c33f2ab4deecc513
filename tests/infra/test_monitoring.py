"""The dashboard and the alarms, and their SNS topic."""

from __future__ import annotations

import json
from typing import Any

from duetime.observability import Metric
from tests.infra.conftest import Synth


def _alarms(synth: Synth) -> list[dict[str, Any]]:
    alarms = synth.under("Scheduler/Monitoring", "AWS::CloudWatch::Alarm")
    return [a["Properties"] for a in alarms.values()]


def _dimension_refs(alarm: dict[str, Any]) -> set[str]:
    return {
        d["Value"].get("Fn::GetAtt", [d["Value"].get("Ref")])[0]
        for d in alarm.get("Dimensions", [])
        if isinstance(d["Value"], dict)
    }


def test_every_dead_letter_queue_has_a_not_empty_alarm(synth: Synth) -> None:
    dead_ends = {dlq for _, dlq in synth.queue_ids()}
    dead_ends.add(synth.logical_id("Scheduler/History/ArchiveFailures"))
    watched = {
        ref
        for a in _alarms(synth)
        if a["MetricName"] == "ApproximateNumberOfMessagesVisible"
        and a["Threshold"] == 1
        and a["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        for ref in _dimension_refs(a)
    }
    assert watched == dead_ends


def test_every_queue_has_an_oldest_message_alarm(synth: Synth) -> None:
    queues = {queue for queue, _ in synth.queue_ids()}
    watched = {
        ref
        for a in _alarms(synth)
        if a["MetricName"] == "ApproximateAgeOfOldestMessage"
        for ref in _dimension_refs(a)
    }
    assert watched == queues


def test_sweeper_and_lateness_alarms(synth: Synth) -> None:
    sweeper, _ = synth.function("sweeper")
    alarms = _alarms(synth)
    on_sweeper = {
        a["MetricName"]
        for a in alarms
        if a.get("Namespace") == "AWS/Lambda" and sweeper in _dimension_refs(a)
    }
    lateness = [a for a in alarms if a.get("MetricName") == Metric.START_LATENESS]

    assert {"Errors", "Invocations"} <= on_sweeper
    assert len(lateness) == 1
    assert lateness[0]["ExtendedStatistic"] == "p99"
    assert lateness[0]["Namespace"] == "duetime"
    assert lateness[0]["Dimensions"] == [{"Name": "service", "Value": "duetime"}]


def test_alarms_notify_the_topic(synth: Synth) -> None:
    (topic,) = synth.of_type("AWS::SNS::Topic")
    for alarm in _alarms(synth):
        assert alarm["AlarmActions"] == [{"Ref": topic}]
        assert alarm["OKActions"] == [{"Ref": topic}]
    (subscription,) = synth.of_type("AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"


def test_dashboard_shows_runs_lateness_queues_and_sweeper(synth: Synth) -> None:
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])

    for name in (
        Metric.RUNS_STARTED,
        Metric.RUNS_FAILED,
        Metric.START_LATENESS,
        Metric.SWEEP_DURATION,
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
    ):
        assert name in body, name
    assert "p99" in body
    assert "p50" in body
