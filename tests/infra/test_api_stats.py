"""GET /admin/stats on AWS: the api function reads each run queue's and DLQ's counts and one
GetMetricData call, and knows the operator claim and scope (issue 15)."""

from __future__ import annotations

from duetime.settings import Env
from infra.constructs.api import API_STATS_METRICS_ACTIONS
from tests.infra.conftest import Synth, listed


def test_api_reads_the_operator_claim_and_scope(synth: Synth) -> None:
    _, function = synth.function("api")
    variables = function["Environment"]["Variables"]

    assert variables[Env.OPERATOR_CLAIM] == "scope"
    assert variables[Env.OPERATOR_SCOPE] == "duetime/operator"


def test_api_sends_to_every_run_queue_and_reads_its_and_its_dlq_s_counts(synth: Synth) -> None:
    role = synth.role_of("api")
    for queue, dlq in synth.queue_ids():
        assert synth.actions_on(role, queue) == {"sqs:SendMessage", "sqs:GetQueueAttributes"}
        assert synth.actions_on(role, dlq) == {"sqs:GetQueueAttributes"}


def test_api_may_read_metrics_and_nothing_else_on_every_resource(synth: Synth) -> None:
    role = synth.role_of("api")
    on_everything = {
        action
        for statement in synth.statements(role)
        if statement["Resource"] == "*"
        for action in listed(statement["Action"])
    }
    assert set(API_STATS_METRICS_ACTIONS) <= on_everything
    assert on_everything - {"xray:PutTraceSegments", "xray:PutTelemetryRecords"} == set(
        API_STATS_METRICS_ACTIONS
    )
