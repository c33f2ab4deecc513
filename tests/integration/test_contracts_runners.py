"""Contract tests for the ports that set work going: `SweepLauncher`, which starts the shards'
sweeps, and `TargetRunner`, which runs a job's target. Part of the contract suite of
test_contracts.py (the stores, queues and secrets), in a module of its own.

As there, every test runs through a parametrised fixture against the in-memory twin and the AWS
adapter: the coordinator's `InProcessLauncher` and `LambdaSweepLauncher`; `MemoryTargetRunner`
and `TargetExecutor` sending to SQS queues on moto. moto runs a Lambda function only in Docker,
so the sweeper function's invocations are answered on the client (`answer`), after botocore
built and validated each call; moto still answers what is left to it (an unknown function).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import pytest
from botocore.awsrequest import AWSResponse

from duetime.adapters.lambda_launcher import LambdaSweepLauncher
from duetime.adapters.memory.targets import MemoryTargetRunner
from duetime.domain.invocation import Invocation, TargetError, delivery_metadata
from duetime.domain.targets import SqsTarget
from duetime.entrypoints import sweeper as sweeper_entrypoint
from duetime.local.lambda_runtime import FakeContext
from duetime.ports import SweepLauncher, TargetRunner
from duetime.services.coordinator import InProcessLauncher
from duetime.services.sweep import Sweeper, SweepReport
from duetime.targets import AwsClients, TargetExecutor
from tests.conftest import REGION, Aws

SWEEPER_FUNCTION = "duetime-sweeper"
SHARDS = 25  # more than either launcher starts at once (8 threads; 16 invokes)
QUEUES = f"https://sqs.{REGION}.amazonaws.com/123456789012"  # moto's account
SCHEDULED_MS = 1_795_237_200_123  # 2026-11-21T05:00:00.123Z


def _moto(request: pytest.FixtureRequest) -> Aws:
    return cast(Aws, request.getfixturevalue("aws"))


Reply = tuple[int, dict[str, Any]]  # HTTP status, the parsed response


def answer(client: Any, operation: str, reply: Callable[[dict[str, Any]], Reply | None]) -> None:
    """Answer a boto3 client's `operation` calls before they are sent: `reply` gets the call's
    parameters (as the caller passed them; botocore has validated them against the API by
    then) and returns an HTTP status and the parsed response, or None to send the call on."""
    service = client.meta.service_model.service_id.hyphenize()

    def keep(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["contract-call"] = dict(params)

    def respond(context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        replied = reply(context["contract-call"])
        if replied is None:
            return None
        status, parsed = replied
        metadata = {"ResponseMetadata": {"HTTPStatusCode": status}}
        return AWSResponse(None, status, {}, None), {**parsed, **metadata}

    client.meta.events.register(f"before-parameter-build.{service}.{operation}", keep)
    client.meta.events.register(f"before-call.{service}.{operation}", respond)


# --- fixtures: one per port ----------------------------------------------------------------------


class RecordingSweeper:
    """Stands in for the Sweeper: records the shards it swept; the sweep of a shard in
    `failing` raises."""

    def __init__(self) -> None:
        self.swept: list[int] = []
        self.failing: set[int] = set()
        self._lock = threading.Lock()

    def sweep_shard(self, shard: int, owner: str | None = None) -> SweepReport:
        if shard in self.failing:
            raise RuntimeError(f"the sweep of shard {shard} failed")
        with self._lock:
            self.swept.append(shard)
        return SweepReport(started_ms=0, shards=1)


class LambdaFront:
    """Lambda's Invoke as the launcher's client meets it. An asynchronous invocation of
    `function` is accepted (202) and its event queued for the function, unless the shard it
    names is in `throttled` (429 TooManyRequestsException: the account is out of concurrency).
    Any other function is unknown: 404 ResourceNotFoundException, as Lambda answers. (Not passed
    on to moto: its server compiles werkzeug routes with `ast.parse` on each call, and CPython
    3.11's parser is not thread-safe: the launcher's parallel calls could fail with a
    SystemError instead of the 404.)"""

    def __init__(self, client: Any, function: str) -> None:
        self.function = function
        self.calls: list[dict[str, Any]] = []  # the parameters of every Invoke, as passed
        self.queued: list[dict[str, Any]] = []  # the events of the accepted invocations
        self.throttled: set[int] = set()
        self._lock = threading.Lock()
        answer(client, "Invoke", self._invoke)

    def _invoke(self, call: dict[str, Any]) -> Reply | None:
        with self._lock:
            self.calls.append(call)
        if call["FunctionName"] != self.function:
            message = f"Function not found: {call['FunctionName']}"
            return 404, {"Error": {"Code": "ResourceNotFoundException", "Message": message}}
        if call.get("InvocationType") != "Event":
            return None
        event = json.loads(call["Payload"])
        if event.get("shard") in self.throttled:
            return 429, {"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}}
        with self._lock:
            self.queued.append(event)
        return 202, {"StatusCode": 202}

    def run_queued(self) -> None:
        """Run the function on the events queued so far, each once, as Lambda does."""
        with self._lock:
            events, self.queued = self.queued, []
        for event in events:
            sweeper_entrypoint.handler(event, FakeContext())


@dataclass
class LauncherUnderTest:
    """A SweepLauncher plus what a test needs that the port does not offer: `started()`, the
    shards whose sweep started, sorted (on AWS: what the sweeper function swept, run on the
    events Lambda accepted), and `fail(shard)`, which makes starting that shard's sweep fail
    (in one process the sweep raises; on AWS Lambda throttles its invocation)."""

    launcher: SweepLauncher
    started: Callable[[], list[int]]
    fail: Callable[[int], None]


@pytest.fixture(params=["in-process", "lambda"])
def launcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> LauncherUnderTest:
    sweeper = RecordingSweeper()
    if request.param == "in-process":
        return LauncherUnderTest(
            InProcessLauncher(cast(Sweeper, sweeper)),
            lambda: sorted(sweeper.swept),
            sweeper.failing.add,
        )
    aws = _moto(request)
    client = aws.session.client("lambda")
    front = LambdaFront(client, SWEEPER_FUNCTION)
    monkeypatch.setattr(sweeper_entrypoint, "components", lambda: SimpleNamespace(sweeper=sweeper))

    def started() -> list[int]:
        front.run_queued()
        return sorted(sweeper.swept)

    return LauncherUnderTest(
        LambdaSweepLauncher(client, SWEEPER_FUNCTION), started, front.throttled.add
    )


@dataclass
class TargetsUnderTest:
    """A TargetRunner plus what a test needs that the port does not offer: `queue(name)` makes a
    queue target; `arrived(target)` reads what reached it, as (payload, duetime-* attributes);
    `broken(name, retryable)` makes a queue target whose deliveries fail, for good (on AWS: the
    queue does not exist) or for now (on AWS: SQS answers 503 ServiceUnavailable)."""

    runner: TargetRunner
    queue: Callable[[str], SqsTarget]
    arrived: Callable[[SqsTarget], list[tuple[Any, dict[str, str]]]]
    broken: Callable[[str, bool], SqsTarget]


@pytest.fixture(params=["memory", "sqs"])
def targets(request: pytest.FixtureRequest) -> TargetsUnderTest:
    if request.param == "memory":
        memory = MemoryTargetRunner()

        def named(name: str) -> SqsTarget:
            return SqsTarget(queue_url=f"{QUEUES}/{name}")

        def received(target: SqsTarget) -> list[tuple[Any, dict[str, str]]]:
            return [(i.payload, delivery_metadata(i)) for i in memory.received(target)]

        def failing(name: str, retryable: bool) -> SqsTarget:
            target = named(name)
            memory.fail(target, retryable=retryable)
            return target

        return TargetsUnderTest(memory, named, received, failing)
    aws = _moto(request)
    sqs = aws.session.client("sqs")
    unavailable: set[str] = set()
    answer(
        sqs,
        "SendMessage",
        lambda call: (
            (503, {"Error": {"Code": "ServiceUnavailable", "Message": "try again later"}})
            if call["QueueUrl"] in unavailable
            else None
        ),
    )

    def create(name: str) -> SqsTarget:
        return SqsTarget(queue_url=aws.sqs.create_queue(QueueName=name)["QueueUrl"])

    def on_queue(target: SqsTarget) -> list[tuple[Any, dict[str, str]]]:
        found: list[tuple[Any, dict[str, str]]] = []
        while messages := aws.sqs.receive_message(
            QueueUrl=target.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
            for m in messages:
                attributes = m.get("MessageAttributes", {})
                values = {name: value["StringValue"] for name, value in attributes.items()}
                found.append((json.loads(m["Body"]), values))
        return found

    def broken(name: str, retryable: bool) -> SqsTarget:
        if not retryable:
            return SqsTarget(queue_url=f"{QUEUES}/{name}")  # never created
        target = create(name)
        unavailable.add(target.queue_url)
        return target

    return TargetsUnderTest(TargetExecutor(clients=AwsClients(sqs=sqs)), create, on_queue, broken)


# --- builders ------------------------------------------------------------------------------------


def invocation(payload: Any = None, *, attempt: int = 1, job_id: str = "01JDUE") -> Invocation:
    return Invocation(
        tenant="tenant-a",
        job_id=job_id,
        run_id=f"{job_id}-{SCHEDULED_MS}",
        scheduled_ms=SCHEDULED_MS,
        attempt=attempt,
        payload=payload,
        timeout_seconds=5.0,
    )


def attributes(attempt: int = 1, job_id: str = "01JDUE") -> dict[str, str]:
    """The duetime-* values, as docs/targets.md documents them."""
    return {
        "duetime-tenant": "tenant-a",
        "duetime-job-id": job_id,
        "duetime-run-id": f"{job_id}-{SCHEDULED_MS}",
        "duetime-scheduled-for": "2026-11-21T05:00:00.123Z",
        "duetime-attempt": str(attempt),
    }


# --- SweepLauncher -------------------------------------------------------------------------------


def test_given_shards_when_launched_then_each_shard_is_swept_once_and_none_failed(
    launcher: LauncherUnderTest,
) -> None:
    failed = launcher.launcher.launch(range(SHARDS))

    assert failed == []
    assert launcher.started() == list(range(SHARDS))


def test_given_some_shards_failing_to_start_then_exactly_those_are_returned_in_order(
    launcher: LauncherUnderTest,
) -> None:
    for shard in (17, 3, 11):
        launcher.fail(shard)

    failed = launcher.launcher.launch(range(SHARDS))

    assert failed == [3, 11, 17]
    assert launcher.started() == [s for s in range(SHARDS) if s not in (3, 11, 17)]


def test_given_every_shard_failing_to_start_then_all_are_returned_in_the_order_given(
    launcher: LauncherUnderTest,
) -> None:
    shards = [2, 0, 1]
    for shard in shards:
        launcher.fail(shard)

    assert launcher.launcher.launch(shards) == shards
    assert launcher.started() == []


def test_given_no_shards_when_launched_then_nothing_starts(launcher: LauncherUnderTest) -> None:
    assert launcher.launcher.launch([]) == []
    assert launcher.started() == []


def test_given_a_sweeper_function_when_launching_then_each_shard_is_one_async_invoke_of_it(
    aws: Aws,
) -> None:
    client = aws.session.client("lambda")
    front = LambdaFront(client, SWEEPER_FUNCTION)

    assert LambdaSweepLauncher(client, SWEEPER_FUNCTION).launch([4, 0]) == []

    assert sorted(front.calls, key=lambda call: call["Payload"]) == [
        {"FunctionName": SWEEPER_FUNCTION, "InvocationType": "Event", "Payload": b'{"shard": 0}'},
        {"FunctionName": SWEEPER_FUNCTION, "InvocationType": "Event", "Payload": b'{"shard": 4}'},
    ]


def test_given_no_such_function_when_launching_then_lambdas_refusal_fails_every_shard(
    aws: Aws,
) -> None:
    client = aws.session.client("lambda")
    front = LambdaFront(client, SWEEPER_FUNCTION)

    failed = LambdaSweepLauncher(client, "duetime-sweeper-gone").launch([0, 1, 2])

    assert failed == [0, 1, 2]  # each answered ResourceNotFoundException
    assert [call["FunctionName"] for call in front.calls] == ["duetime-sweeper-gone"] * 3
    assert front.queued == []


# --- TargetRunner --------------------------------------------------------------------------------


PAYLOADS = [
    {"report": "daily", "ids": [1, 2, 3], "ratio": 0.5, "nested": {"ok": True}},
    None,
    "a text: naïve 漢字",
    [1, "two", False],
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=["object", "null", "text", "array"])
def test_given_a_queue_target_when_executed_then_the_payload_arrives_with_the_duetime_attributes(
    targets: TargetsUnderTest, payload: Any
) -> None:
    reports = targets.queue("reports")

    targets.runner.execute(reports, invocation(payload))

    assert targets.arrived(reports) == [(payload, attributes())]


def test_given_the_attempts_of_one_run_when_executed_then_each_arrives_once_with_its_attempt(
    targets: TargetsUnderTest,
) -> None:
    reports = targets.queue("reports")

    for attempt in (1, 2, 3):
        targets.runner.execute(reports, invocation({"n": 1}, attempt=attempt))

    arrived = sorted(targets.arrived(reports), key=lambda message: message[1]["duetime-attempt"])
    assert arrived == [({"n": 1}, attributes(attempt)) for attempt in (1, 2, 3)]


def test_given_two_queue_targets_when_each_is_executed_then_each_queue_holds_only_its_own_run(
    targets: TargetsUnderTest,
) -> None:
    reports, billing = targets.queue("reports"), targets.queue("billing")

    targets.runner.execute(reports, invocation("r", job_id="01JREPORT"))
    targets.runner.execute(billing, invocation("b", job_id="01JBILLING"))

    assert targets.arrived(reports) == [("r", attributes(job_id="01JREPORT"))]
    assert targets.arrived(billing) == [("b", attributes(job_id="01JBILLING"))]


@pytest.mark.parametrize("retryable", [False, True], ids=["missing-queue", "unavailable"])
def test_given_a_failed_delivery_then_target_error_says_whether_to_retry_and_others_still_arrive(
    targets: TargetsUnderTest, retryable: bool
) -> None:
    broken, healthy = targets.broken("broken", retryable), targets.queue("healthy")

    with pytest.raises(TargetError) as caught:
        targets.runner.execute(broken, invocation({"n": 1}))
    targets.runner.execute(healthy, invocation({"n": 2}))

    assert caught.value.retryable is retryable
    assert targets.arrived(healthy) == [({"n": 2}, attributes())]


# --- the in-memory twin's own controls -----------------------------------------------------------


def test_given_a_target_told_to_fail_twice_then_its_third_run_arrives_and_all_are_kept() -> None:
    runner = MemoryTargetRunner()
    reports = SqsTarget(queue_url=f"{QUEUES}/reports")
    runner.fail(reports, retryable=True, times=2, message="busy")

    for attempt in (1, 2):
        with pytest.raises(TargetError, match="busy") as caught:
            runner.execute(reports, invocation(attempt=attempt))
        assert caught.value.retryable
    runner.execute(reports, invocation(attempt=3))

    assert [i.attempt for i in runner.received(reports)] == [3]
    assert [(t, i.attempt) for t, i in runner.executions] == [
        (reports, 1),
        (reports, 2),
        (reports, 3),
    ]
    runner.fail(reports, retryable=False)
    with pytest.raises(TargetError):
        runner.execute(reports, invocation(attempt=4))
    runner.recover(reports)
    runner.execute(reports, invocation(attempt=5))
    assert [i.attempt for i in runner.received(reports)] == [3, 5]
