"""An AWS target in another region than the deployment's is refused at create (a `400` naming
its field): the workers call targets in their own region, so each of its runs would fail (an
outside infrastructure audit found them created, then failing every attempt into the DLQ)."""

from __future__ import annotations

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.errors import ValidationError
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.reach import region_refusal, sqs_region
from duetime.domain.targets import EventBridgeTarget, LambdaTarget, SnsTarget, SqsTarget, Target
from duetime.services.jobs import JobService
from duetime.settings import QueueUrls, Settings, queue_key

HERE = "eu-west-1"


@pytest.mark.parametrize(
    ("target", "field", "theirs"),
    [
        (SqsTarget("https://sqs.us-east-1.amazonaws.com/1/orders"), "queue_url", "us-east-1"),
        (SqsTarget("https://us-east-1.queue.amazonaws.com/1/orders"), "queue_url", "us-east-1"),
        (SnsTarget("arn:aws:sns:us-east-1:1:reports"), "topic_arn", "us-east-1"),
        (LambdaTarget("arn:aws:lambda:us-west-2:1:function:bill"), "function_arn", "us-west-2"),
        (
            EventBridgeTarget("s", "d", "arn:aws:events:ap-south-1:1:event-bus/b"),
            "event_bus",
            "ap-south-1",
        ),
    ],
)
def test_given_a_target_in_another_region_then_it_is_refused_naming_its_field(
    target: Target, field: str, theirs: str
) -> None:
    assert region_refusal(target, HERE) == (
        field,
        f"is in {theirs}: this deployment calls targets in {HERE} only",
    )


@pytest.mark.parametrize(
    "target",
    [
        SqsTarget("https://sqs.eu-west-1.amazonaws.com/1/orders"),
        SnsTarget("arn:aws:sns:eu-west-1:1:reports"),
        LambdaTarget("arn:aws:lambda:eu-west-1:1:function:bill"),
        EventBridgeTarget("s", "d", "orders"),  # a name: the deployment's region
        SqsTarget("http://127.0.0.1:4566/000000000000/orders"),  # no region named
    ],
)
def test_given_a_target_in_the_deployment_s_region_or_none_named_then_it_passes(
    target: Target,
) -> None:
    assert region_refusal(target, HERE) is None
    assert region_refusal(SnsTarget("arn:aws:sns:us-east-1:1:r"), None) is None  # emulator


def settings(base: str) -> Settings:
    queues = {
        queue_key(r, p): QueueUrls(f"{base}/duetime-{r}-{p}", f"{base}/duetime-{r}-{p}-dlq")
        for r in Runtime
        for p in Priority
    }
    return Settings("jobs", "timers", "runs", queues, timer_shards=1)


def test_given_the_deployment_s_queues_then_its_region_is_theirs() -> None:
    assert settings(f"https://sqs.{HERE}.amazonaws.com/123456789012").region() == HERE
    assert settings("http://127.0.0.1:4566/123456789012").region() is None
    assert sqs_region("not a url [") is None


def test_given_a_job_naming_a_topic_in_another_region_then_create_and_patch_refuse_it() -> None:
    deployed = settings(f"https://sqs.{HERE}.amazonaws.com/123456789012")
    queue = MemoryQueue(lambda: 0)
    service = JobService(
        MemoryJobStore(),
        MemoryTimerStore(shards=1),
        MemoryRunStore(),
        queue,
        deployed,
        clock=lambda: 1_795_255_200_000,
    )
    elsewhere = {"type": "sns", "topic_arn": "arn:aws:sns:us-east-1:123456789012:reports"}
    body = {"schedule": {"delay_seconds": 60}, "target": elsewhere}

    with pytest.raises(ValidationError) as refused:
        service.create("t", parse_job_spec(body))
    assert refused.value.field == "target.topic_arn"
    assert "us-east-1" in refused.value.message

    here = {"type": "sns", "topic_arn": f"arn:aws:sns:{HERE}:123456789012:reports"}
    job = service.create("t", parse_job_spec({**body, "target": here}))
    with pytest.raises(ValidationError) as refused:
        service.update("t", job.id, {"target": elsewhere})
    assert refused.value.field == "target.topic_arn"


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://sqs.us-west-2.amazonaws.com./1/q", "us-west-2"),  # a trailing dot
        ("https://queue.amazonaws.com/1/q", "us-east-1"),
        ("https://vpce-0a1b.sqs.us-west-2.vpce.amazonaws.com/1/q", "us-west-2"),
        ("https://sqs-fips.us-gov-west-1.amazonaws.com/1/q", "us-gov-west-1"),
        ("https://sqs.ap-east-1.api.aws/1/q", "ap-east-1"),
        ("https://sqs.cn-north-1.amazonaws.com.cn/1/q.fifo", "cn-north-1"),
        ("https://eu-west-1.queue.amazonaws.com/1/q", "eu-west-1"),
    ],
)
def test_given_every_spelling_of_an_sqs_host_then_its_region_is_read(url: str, region: str) -> None:
    # A trailing dot, a VPC endpoint, FIPS or the dual-stack name escaped the check (a review).
    assert sqs_region(url) == region
