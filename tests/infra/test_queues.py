"""SQS queues: one per runtime × priority with a DLQ, leases longer than any execution."""

from __future__ import annotations

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.resources import DLQ_RETENTION_SECONDS, MAX_RECEIVE_COUNT
from duetime.settings import queue_key
from tests.infra.conftest import Synth

KEYS = [queue_key(r, p) for r in Runtime for p in Priority]


def _queues(synth: Synth) -> dict[str, tuple[str, str]]:
    """queue key -> (queue logical id, DLQ logical id)."""
    return dict(zip(KEYS, synth.queue_ids(), strict=True))


def test_one_queue_and_one_dlq_per_runtime_and_priority(synth: Synth) -> None:
    run_queues = {i for pair in synth.queue_ids() for i in pair}
    others = set(synth.of_type("AWS::SQS::Queue")) - run_queues

    assert len(run_queues) == 2 * len(KEYS)
    assert others == {synth.logical_id("Scheduler/History/ArchiveFailures")}


@pytest.mark.parametrize("key", KEYS)
def test_queue_redrives_to_its_own_dlq(synth: Synth, key: str) -> None:
    queue_id, dlq_id = _queues(synth)[key]
    queue = synth.resources[queue_id]["Properties"]

    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    }
    assert synth.resources[dlq_id]["Properties"]["MessageRetentionPeriod"] == (
        DLQ_RETENTION_SECONDS
    )
    # SQS keeps a message's first enqueue time: the DLQ must keep it longer than the queue.
    assert queue["MessageRetentionPeriod"] < DLQ_RETENTION_SECONDS


@pytest.mark.parametrize("key", KEYS)
def test_visibility_outlives_six_worker_timeouts(synth: Synth, key: str) -> None:
    _, worker = synth.function("worker")
    queue = synth.resources[_queues(synth)[key][0]]["Properties"]

    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]


def test_every_queue_is_encrypted_and_refuses_plain_http(synth: Synth) -> None:
    queues = synth.of_type("AWS::SQS::Queue")
    policies = synth.of_type("AWS::SQS::QueuePolicy").values()
    for logical_id, queue in queues.items():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True, logical_id
        denies_http = [
            s
            for p in policies
            if {"Ref": logical_id} in p["Properties"]["Queues"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Effect"] == "Deny"
            and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert denies_http, f"{logical_id} accepts requests without TLS"
