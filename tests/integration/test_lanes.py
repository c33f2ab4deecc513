"""Lanes on moto: queues spread over three SQS queues each (`create_resources(lanes=3)`, as the
construct's `queue_lanes`). Runs are sent over the lanes, and the workers that poll every lane
(the Fargate worker's loop; an event source mapping per lambda lane) run each exactly once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from duetime import wiring
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.entrypoints import worker as worker_handler
from duetime.local.lambda_runtime import SqsEventSource
from duetime.resources import create_resources
from duetime.wiring import Components, build
from tests.conftest import Aws
from tests.integration.conftest import RECORDER
from tests.waiting import wait_for

LANES = 3
JOBS = 60


@pytest.fixture
def parts(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Components]:
    settings = create_resources(
        aws.dynamodb,
        aws.sqs,
        "laned",
        lanes=LANES,
        timer_shards=4,
        allow_private_targets=True,
        require_https=False,
    )
    RECORDER.calls.clear()
    built = build(settings, aws.session)
    monkeypatch.setattr(worker_handler, "components", lambda: built)
    yield built
    wiring.components.cache_clear()


def submit(aws: Aws, parts: Components, runtime: Runtime) -> list[str]:
    """JOBS jobs due now, over the three priorities, sent at once to their queues' lanes, and
    more until every lane holds a run (a run's lane is a hash of its job id, which is drawn at
    random: 20 over 3 lanes leave one empty a few times in a thousand)."""
    priorities = list(Priority)
    jobs: list[str] = []
    while len(jobs) < JOBS or not all(lane_counts(aws, parts, runtime).values()):
        assert len(jobs) < 10 * JOBS, "a lane never got a run"
        body = {
            "schedule": {"delay_seconds": 0},
            "runtime": runtime.value,
            "priority": priorities[len(jobs) % 3].value,
            "target": {"type": "handler", "name": "test.record"},
        }
        jobs.append(parts.service.create("tenant-a", parse_job_spec(body)).id)
    return jobs


def messages(aws: Aws, url: str) -> int:
    names: Any = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def lane_counts(aws: Aws, parts: Components, runtime: Runtime) -> Counter[str]:
    return Counter(
        {
            url: messages(aws, url)
            for p in Priority
            for url in parts.settings.queue(runtime, p).lanes
        }
    )


def test_the_fargate_worker_polls_every_lane_and_runs_each_run_once(
    aws: Aws, parts: Components
) -> None:
    jobs = submit(aws, parts, Runtime.FARGATE)
    sent = lane_counts(aws, parts, Runtime.FARGATE)
    assert len(sent) == 3 * LANES
    assert sum(sent.values()) == len(jobs)
    assert all(n > 0 for n in sent.values()), sent

    worker = wiring.queue_worker(
        parts, Runtime.FARGATE, concurrency=8, wait_seconds=1, stop_timeout_seconds=5
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(RECORDER.calls) >= len(jobs), seconds=30)
        wait_for(lambda: sum(lane_counts(aws, parts, Runtime.FARGATE).values()) == 0)
    finally:
        worker.stop()
        thread.join(timeout=15)

    assert not thread.is_alive(), "the worker did not stop"
    assert sorted(c.job_id for c in RECORDER.calls) == sorted(jobs)  # each exactly once


def test_a_mapping_per_lambda_lane_runs_each_run_once(aws: Aws, parts: Components) -> None:
    jobs = submit(aws, parts, Runtime.LAMBDA)
    sent = lane_counts(aws, parts, Runtime.LAMBDA)
    assert all(n > 0 for n in sent.values()), sent
    # What the construct deploys: one event source mapping per lane, invoking the worker
    # function with that lane's ARN (the handler finds the lane's URL from it).
    sources = [SqsEventSource(aws.sqs, url, worker_handler.handler, wait_seconds=0) for url in sent]

    while sum(source.poll_once() for source in sources):
        pass

    assert sorted(c.job_id for c in RECORDER.calls) == sorted(jobs)
    assert sum(lane_counts(aws, parts, Runtime.LAMBDA).values()) == 0
