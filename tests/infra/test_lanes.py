"""Lanes (`SchedulerProps.queue_lanes`): a runtime × priority spread over several queues, each
lambda lane with its own event source mapping, so one priority can run more than one mapping's
1,000 concurrent batches. Without the prop the template is what it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.resources import MAX_RECEIVE_COUNT
from duetime.settings import Env, QueueUrls, queue_key
from infra.props import MAX_EXTRA_LANES
from tests.infra.conftest import LANES, Synth, queue_name

KEYS = [(r, p) for r in Runtime for p in Priority]
TASK_ROLE = "Scheduler/Workers/Task/TaskRole"
# Lambda refuses a function whose environment variables exceed 4 KB together.
LAMBDA_ENVIRONMENT_BYTES = 4096
# The longest a token of the environment can resolve to: an SQS queue URL
# (https://sqs.<14-character region>.amazonaws.com/<account>/<80-character name>), a queue name
# CloudFormation generates (at most 80), anything else (ARNs, table names).
QUEUE_URL_BYTES, QUEUE_NAME_BYTES, OTHER_TOKEN_BYTES = 133, 80, 140


def lanes_of(synth: Synth, runtime: Runtime, priority: Priority) -> list[str]:
    """Logical ids of a queue's lanes, in order (the first keeps the id of a lone queue)."""
    base = f"Scheduler/Queues/{queue_name(runtime, priority)}"
    found = [synth.logical_id(base)]
    while True:
        try:
            found.append(synth.logical_id(f"{base}Lane{len(found) + 1}"))
        except KeyError:
            return found


def mappings_on(synth: Synth, queue_id: str) -> list[dict[str, Any]]:
    return [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]


def test_without_queue_lanes_each_queue_has_one_lane_and_no_lane_setting(synth: Synth) -> None:
    _, worker = synth.function("worker")
    queues = json.dumps(worker["Environment"]["Variables"][Env.QUEUES])

    assert all(len(lanes_of(synth, r, p)) == 1 for r, p in KEYS)
    assert "more_lanes" not in queues
    assert not [o for o in synth.json["Outputs"] if "Lane" in o]


@pytest.mark.parametrize(("runtime", "priority"), KEYS, ids=lambda v: v.value)
def test_each_lane_is_a_queue_like_the_first_redriving_to_the_same_dlq(
    lanes_synth: Synth, runtime: Runtime, priority: Priority
) -> None:
    lanes = lanes_of(lanes_synth, runtime, priority)
    dlq = lanes_synth.logical_id(f"Scheduler/Queues/{queue_name(runtime, priority)}Dlq")
    first = lanes_synth.resources[lanes[0]]["Properties"]

    assert len(lanes) == LANES.get(queue_key(runtime, priority), 1)
    for lane in lanes:
        properties = lanes_synth.resources[lane]["Properties"]
        assert properties == first
        assert properties["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]},
            "maxReceiveCount": MAX_RECEIVE_COUNT,
        }


@pytest.mark.parametrize("priority", list(Priority), ids=lambda p: p.value)
def test_each_lambda_lane_has_its_own_mapping_with_the_priority_settings(
    lanes_synth: Synth, synth: Synth, priority: Priority
) -> None:
    (usual,) = mappings_on(
        synth, synth.logical_id(f"Scheduler/Queues/{queue_name(Runtime.LAMBDA, priority)}")
    )
    lanes = lanes_of(lanes_synth, Runtime.LAMBDA, priority)

    for lane in lanes:
        (mapping,) = mappings_on(lanes_synth, lane)
        assert mapping["BatchSize"] == usual["BatchSize"]
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["ScalingConfig"] == usual["ScalingConfig"]  # its own maximum concurrency


def test_the_fargate_lanes_have_no_mapping(lanes_synth: Synth) -> None:
    for lane in lanes_of(lanes_synth, Runtime.FARGATE, Priority.HIGH):
        assert mappings_on(lanes_synth, lane) == []


@pytest.mark.parametrize(("runtime", "priority"), KEYS, ids=lambda v: v.value)
def test_every_lane_may_be_sent_to_and_served_by_its_runtime_workers(
    lanes_synth: Synth, runtime: Runtime, priority: Priority
) -> None:
    served_by = (
        lanes_synth.role_of("worker")
        if runtime == Runtime.LAMBDA
        else lanes_synth.logical_id(TASK_ROLE)
    )
    for lane in lanes_of(lanes_synth, runtime, priority):
        for sender in ("api", "sweeper", "reconciler"):
            assert "sqs:SendMessage" in lanes_synth.actions_on(lanes_synth.role_of(sender), lane)
        # Receive and delete (the lambda mapping does it for the function), resend a retry,
        # change a message's visibility.
        assert {
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:SendMessage",
            "sqs:ChangeMessageVisibility",
        } <= lanes_synth.actions_on(served_by, lane)


def test_the_engine_settings_name_every_lane_and_load(lanes_synth: Synth) -> None:
    _, worker = lanes_synth.function("worker")
    raw = worker["Environment"]["Variables"][Env.QUEUES]
    # Resolve the tokens as CloudFormation would: a queue's URL and name from its logical id.
    parts = [
        p
        if isinstance(p, str)
        else f"https://sqs.eu-west-1.amazonaws.com/111122223333/{p['Ref']}"
        if "Ref" in p
        else p["Fn::GetAtt"][0]
        for p in raw["Fn::Join"][1]
    ]
    queues = {k: QueueUrls.from_json(v) for k, v in json.loads("".join(parts)).items()}

    for runtime, priority in KEYS:
        lanes = [u.rsplit("/", 1)[-1] for u in queues[queue_key(runtime, priority)].lanes]
        assert lanes == lanes_of(lanes_synth, runtime, priority)


def test_an_alarm_watches_the_oldest_message_over_every_lane(lanes_synth: Synth) -> None:
    alarm = lanes_synth.resources[
        lanes_synth.logical_id("Scheduler/Monitoring/OldestMessageLambdaNormal")
    ]["Properties"]
    watched = [
        m["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for m in alarm["Metrics"]
        if "MetricStat" in m
    ]

    assert watched == lanes_of(lanes_synth, Runtime.LAMBDA, Priority.NORMAL)
    assert any(m.get("Expression", "").startswith("MAX(") for m in alarm["Metrics"])


def test_the_most_lanes_keep_every_function_environment_under_4_kb(lanes_synth: Synth) -> None:
    """At the props' limit of extra lanes, with the console's variables, every token at its
    longest, measured as Lambda measures it: the variables' compact JSON, where every quote of
    DUETIME_QUEUES (itself JSON) is escaped (found by review: the sum of the keys' and values'
    lengths left out ~300 bytes)."""
    resources = lanes_synth.resources

    def longest(value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Fn::Join" in value:
            return "".join(longest(v) for v in value["Fn::Join"][1])
        if "Ref" in value and resources.get(value["Ref"], {}).get("Type") == "AWS::SQS::Queue":
            return "u" * QUEUE_URL_BYTES
        if value.get("Fn::GetAtt", [None, None])[1] == "QueueName":
            return "n" * QUEUE_NAME_BYTES
        return "t" * OTHER_TOKEN_BYTES

    assert sum(n - 1 for n in LANES.values()) == MAX_EXTRA_LANES
    functions = lanes_synth.of_type("AWS::Lambda::Function")
    api = [f for f in functions.values() if "DUETIME_CONSOLE_CLIENT_ID" in str(f)]
    assert api, "the lanes synth has the console's variables too"
    for logical_id, function in functions.items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        rendered = {k: longest(v) for k, v in variables.items()}
        size = len(json.dumps(rendered, separators=(",", ":")).encode())
        assert size < LAMBDA_ENVIRONMENT_BYTES, (logical_id, size)
