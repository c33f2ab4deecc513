"""The dashboard and the alarms, and their SNS topic."""

from __future__ import annotations

import json
import re
from typing import Any

from duetime.observability import Metric
from tests.infra.conftest import REPO_ROOT, Synth


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
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
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
        if a.get("MetricName") == "ApproximateAgeOfOldestMessage"
        for ref in _dimension_refs(a)
    }
    assert watched == queues


def _on_function(synth: Synth, name: str) -> dict[str, dict[str, Any]]:
    """The alarms on a function's Lambda metrics, by metric name."""
    function, _ = synth.function(name)
    return {
        a["MetricName"]: a
        for a in _alarms(synth)
        if a.get("Namespace") == "AWS/Lambda" and function in _dimension_refs(a)
    }


def _on_app_metric(synth: Synth, name: str) -> dict[str, Any]:
    (alarm,) = [a for a in _alarms(synth) if a.get("MetricName") == name]
    assert alarm["Namespace"] == "duetime"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "duetime"}]
    return alarm


def test_coordinator_errors_and_stopped_alarms(synth: Synth) -> None:
    alarms = _on_function(synth, "coordinator")

    assert set(alarms) == {"Errors", "Invocations"}
    errors, stopped = alarms["Errors"], alarms["Invocations"]
    assert (errors["Period"], errors["EvaluationPeriods"], errors["DatapointsToAlarm"]) == (
        60,
        3,
        2,
    )
    # No invocation in two 5-minute periods: the rule or the function has stopped.
    assert stopped["ComparisonOperator"] == "LessThanThreshold"
    assert stopped["Period"] * stopped["EvaluationPeriods"] == 600
    assert stopped["TreatMissingData"] == "breaching"


def test_sweeper_errors_alarm_is_3_of_5_minutes(synth: Synth) -> None:
    alarms = _on_function(synth, "sweeper")

    assert set(alarms) == {"Errors"}  # its invocations follow the coordinator's
    errors = alarms["Errors"]
    assert (errors["Period"], errors["EvaluationPeriods"], errors["DatapointsToAlarm"]) == (
        60,
        5,
        3,
    )
    assert errors["Threshold"] == 1


def test_reconciler_errors_alarm(synth: Synth) -> None:
    alarms = _on_function(synth, "reconciler")
    assert set(alarms) == {"Errors"}
    assert alarms["Errors"]["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_a_quarantined_timer_raises_an_alarm_that_stays_on_while_it_is_left(synth: Synth) -> None:
    # On the level each sweep reports, not on the count of quarantines as they happen (that
    # alarm went back to OK within ten minutes, the timer still quarantined).
    alarm = _on_app_metric(synth, Metric.TIMERS_IN_QUARANTINE)

    assert alarm["Statistic"] == "Maximum"
    assert alarm["Period"] == 300
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "duetime timers stuck" in alarm["AlarmDescription"]


def test_a_timer_parked_passing_for_long_raises_an_alarm(synth: Synth) -> None:
    # Never quarantined, failing no sweep, holding back no cursor: no alarm saw it (until
    # 2026-11-30; an outside SRE audit).
    alarm = _on_app_metric(synth, Metric.TIMERS_PARKED_AGE)
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Maximum", 300, 15)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "ignore"


def test_a_lagging_shard_raises_an_alarm(synth: Synth) -> None:
    alarm = _on_app_metric(synth, Metric.SWEEP_LAG_MINUTES)

    assert alarm["Statistic"] == "Maximum"
    assert alarm["Period"] == 60
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 3)
    assert alarm["Threshold"] == 3
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_lateness_alarm(synth: Synth) -> None:
    lateness = [a for a in _alarms(synth) if a.get("MetricName") == Metric.START_LATENESS]

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
    # The topic's policy (it has one: TLS only) must let the alarms publish, as SNS's default
    # policy, which it replaces, did (found by review).
    (policy,) = synth.of_type("AWS::SNS::TopicPolicy").values()
    allows = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow" and s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert [s["Action"] for s in allows] == ["sns:Publish"]
    assert allows[0]["Resource"] == {"Ref": topic}
    assert list(allows[0]["Condition"]["StringEquals"]) == ["aws:SourceAccount"]


def test_dashboard_shows_runs_lateness_queues_and_sweeps(synth: Synth) -> None:
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])

    for name in (
        Metric.RUNS_STARTED,
        Metric.RUNS_FAILED,
        Metric.START_LATENESS,
        Metric.SWEEP_DURATION,
        Metric.SWEEP_LAG_MINUTES,
        Metric.SWEEP_LAUNCH_FAILURES,
        Metric.TIMERS_PARKED,
        Metric.TIMERS_QUARANTINED,
        Metric.TIMERS_IN_QUARANTINE,
        Metric.JOBS_REARMED,
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
    ):
        assert name in body, name
    assert "p99" in body
    assert "p50" in body
    for name in ("coordinator", "sweeper", "reconciler"):
        function, _ = synth.function(name)
        assert json.dumps({"Ref": function}) in body, name


def test_the_api_s_server_errors_have_an_alarm_on_their_count_or_their_share(
    synth: Synth,
) -> None:
    # (An outside audit found none: a failing API showed only on the dashboard; then another
    # that a quiet API, under 10 requests a minute, could fail every one and never alarm.)
    (api_id,) = synth.of_type("AWS::ApiGatewayV2::Api")
    (alarm,) = [a for a in _alarms(synth) if a["AlarmName"] == "duetime-ApiServerErrors"]
    queries = {q["Id"]: q for q in alarm["Metrics"]}
    expression = queries["expr_1"]["Expression"] if "expr_1" in queries else None
    expression = expression or next(q["Expression"] for q in queries.values() if "Expression" in q)
    assert "errors >= 10" in expression
    assert "errors >= 0.2 * answers" in expression
    for name, metric in (("errors", "5xx"), ("answers", "Count")):
        stat = queries[name]["MetricStat"]
        assert stat["Metric"]["Namespace"] == "AWS/ApiGateway"
        assert stat["Metric"]["MetricName"] == metric
        assert stat["Metric"]["Dimensions"] == [{"Name": "ApiId", "Value": {"Ref": api_id}}]
        assert stat["Period"] == 60
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (
        1,
        5,
        3,
    )


def test_deploy_md_prices_the_alarms_the_stack_makes(synth: Synth) -> None:
    # The page said 22 while the stack made 23 (found by an outside audit).
    page = (REPO_ROOT / "docs" / "deploy.md").read_text()
    priced = re.search(r"CloudWatch alarms \((\d+), plus the 2 of the Fargate", page)
    assert priced is not None
    assert int(priced.group(1)) == len(_alarms(synth))


def _math_alarm(synth: Synth, name: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The alarm whose description starts so, and its metric queries by id."""
    (alarm,) = [a for a in _alarms(synth) if a["AlarmDescription"].startswith(f"duetime: {name}")]
    return alarm, {q["Id"]: q for q in alarm["Metrics"]}


def _summed(queries: dict[str, dict[str, Any]]) -> set[str]:
    """The metric ids an expression sums, each filled with 0 where it has no data (DynamoDB and
    Lambda send no throttle metric for a minute without one: a sum missing a term is empty)."""
    (expression,) = [q["Expression"] for q in queries.values() if "Expression" in q]
    terms = expression.split(" + ")
    assert all(re.fullmatch(r"FILL\(\w+, 0\)", term) for term in terms), expression
    return {term.removeprefix("FILL(").removesuffix(", 0)") for term in terms}


def test_lasting_dynamodb_throttling_raises_an_alarm_over_every_table(synth: Synth) -> None:
    # (An outside audit found no alarm of its own for throttling: runs started late, and
    # only the lateness alarm said so, not why.)
    alarm, queries = _math_alarm(synth, "DynamoDB throttled")
    stats = {k: q["MetricStat"] for k, q in queries.items() if "MetricStat" in q}

    assert _summed(queries) == set(stats)
    watched = {
        (s["Metric"]["MetricName"], s["Metric"]["Dimensions"][0]["Value"]["Ref"])
        for s in stats.values()
    }
    tables = {synth.logical_id(f"Scheduler/Data/{t}") for t in ("Jobs", "Timers", "Runs")}
    assert watched == {
        (m, t) for m in ("ReadThrottleEvents", "WriteThrottleEvents") for t in tables
    }
    assert {(s["Stat"], s["Period"]) for s in stats.values()} == {("Sum", 60)}
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (
        100,
        5,
        3,
    )


def test_a_throttled_function_of_the_run_path_raises_an_alarm(synth: Synth) -> None:
    alarm, queries = _math_alarm(synth, "a function of the run path")
    stats = {k: q["MetricStat"] for k, q in queries.items() if "MetricStat" in q}

    assert _summed(queries) == set(stats)
    assert {s["Metric"]["MetricName"] for s in stats.values()} == {"Throttles"}
    watched = {s["Metric"]["Dimensions"][0]["Value"]["Ref"] for s in stats.values()}
    assert watched == {synth.function(n)[0] for n in ("api", "coordinator", "sweeper", "worker")}
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (1, 5, 3)


def test_the_dashboard_shows_each_table_s_throttling(synth: Synth) -> None:
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])

    for table in ("Jobs", "Timers", "Runs"):
        table_ref = json.dumps({"Ref": synth.logical_id(f"Scheduler/Data/{table}")})
        assert table_ref in body, table
    assert "ReadThrottleEvents" in body
    assert "WriteThrottleEvents" in body


def test_each_alarm_is_named_after_its_stack_and_points_at_its_runbook_section(
    synth: Synth,
) -> None:
    # A page said `Duetime-SchedulerMonitoringSweepLagF44267C9-…` and one sentence, and 18 of
    # the 25 alarms had no runbook entry (until 2026-11-30; found by an outside SRE audit).
    runbook = (REPO_ROOT / "docs" / "runbook.md").read_text()
    sections = set(re.findall(r"^## `(\w+)`$", runbook, re.MULTILINE))
    named = set()
    for alarm in _alarms(synth):
        name = alarm["AlarmName"]
        assert re.fullmatch(r"duetime-\w+", name), name
        named.add(name)
        found = re.search(r"Runbook: docs/runbook\.md, section (\w+)\.$", alarm["AlarmDescription"])
        assert found is not None, alarm["AlarmDescription"]
        assert found.group(1) in sections, found.group(1)
        assert name.removeprefix("duetime-").startswith(found.group(1))
    assert len(named) == len(_alarms(synth))


def test_a_worker_invocation_failing_as_a_whole_or_failing_deliveries_raise_an_alarm(
    synth: Synth,
) -> None:
    # A worker that crashed at start (its environment) paged only through the oldest message's
    # age, ~25 minutes later, and deliveries failing record by record not at all (until
    # 2026-11-30; an outside SRE audit).
    alarm, queries = _math_alarm(synth, "in 2 of the last 3 minutes, a worker function")
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["Threshold"]) == (
        3,
        2,
        1,
    )
    (expression,) = [q["Expression"] for q in queries.values() if "Expression" in q]
    assert expression == "IF(FILL(errors, 0) >= 1 OR FILL(failed, 0) >= 10, 1, 0)"
    errors, failed = queries["errors"]["MetricStat"], queries["failed"]["MetricStat"]
    worker, _ = synth.function("worker")
    assert errors["Metric"]["MetricName"] == "Errors"
    assert errors["Metric"]["Dimensions"][0]["Value"] == {"Ref": worker}
    assert failed["Metric"]["MetricName"] == Metric.DELIVERIES_FAILED
    assert (errors["Period"], failed["Period"], failed["Stat"]) == (60, 60, "Sum")


def test_a_refused_run_message_and_a_re_armed_job_raise_alarms(synth: Synth) -> None:
    # Both were on the dashboard only (a forged message; a chain the reconciler found lost).
    refused = _on_app_metric(synth, Metric.MESSAGES_REFUSED)
    assert (refused["Statistic"], refused["Period"], refused["Threshold"]) == ("Sum", 300, 1)
    rearmed = _on_app_metric(synth, Metric.JOBS_REARMED)
    assert (rearmed["Statistic"], rearmed["Period"], rearmed["Threshold"]) == ("Sum", 86400, 1)


def test_a_daily_function_s_errors_alarm_stays_on_until_its_next_run(synth: Synth) -> None:
    # Over an hour, the reconciler's and the compactor's alarms went back to OK an hour after
    # a failure that nothing would retry before the next day.
    reconciler = _on_function(synth, "reconciler")["Errors"]
    (compactor,) = [a for a in _alarms(synth) if a["AlarmName"] == "duetime-CompactorErrors"]
    for alarm in (reconciler, compactor):
        assert (alarm["Period"], alarm["EvaluationPeriods"]) == (86400, 1)


def test_level_alarms_keep_their_state_while_their_metric_is_missing(synth: Synth) -> None:
    # A sweep that failed before reporting its quarantined timers sent OK, then ALARM again.
    for metric in (Metric.TIMERS_IN_QUARANTINE, Metric.SWEEP_LAG_MINUTES):
        assert _on_app_metric(synth, metric)["TreatMissingData"] == "ignore"


def test_the_archive_failure_queue_s_alarm_says_what_its_messages_are(synth: Synth) -> None:
    (alarm,) = [a for a in _alarms(synth) if a["AlarmName"] == "duetime-DeadLettersArchiveFailures"]
    assert "runs out of attempts" not in alarm["AlarmDescription"]
    assert "history" in alarm["AlarmDescription"]


def test_fargate_workers_that_do_not_run_while_runs_wait_raise_an_alarm(synth: Synth) -> None:
    # The Fargate service had no alarm of its own: no task running while its queues held runs
    # paged only through the oldest message's age (an outside SRE audit, round two). Scaling
    # from zero takes up to ~15 minutes after a quiet period (deploy.md): 20 minutes here.
    alarm, queries = _math_alarm(synth, "no Fargate worker task has run")
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["Threshold"]) == (
        20,
        20,
        1,
    )
    (expression,) = [q["Expression"] for q in queries.values() if "Expression" in q]
    assert expression.startswith("IF(")
    assert "FILL(running, 0) < 1" in expression
    running = queries["running"]["MetricStat"]["Metric"]
    assert (running["Namespace"], running["MetricName"]) == (
        "ECS/ContainerInsights",
        "RunningTaskCount",
    )
    visible = [
        q["MetricStat"]["Metric"]["MetricName"]
        for k, q in queries.items()
        if "MetricStat" in q and k != "running"
    ]
    assert visible
    assert set(visible) == {"ApproximateNumberOfMessagesVisible"}
