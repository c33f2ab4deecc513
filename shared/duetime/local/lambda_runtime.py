"""Lambda-shaped events and contexts, and the SQS event source mapping's polling loops."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

Handler = Callable[[dict[str, Any], Any], Any]

# Lambda's standard-mode scaling of an SQS event source mapping: five concurrent batches at
# first, then up to 300 more a minute while messages are available (the Lambda developer guide,
# "Configuring scaling behavior for SQS event source mappings"; docs/scaling.md).
LAMBDA_INITIAL_POLLERS = 5
LAMBDA_RAMP_SECONDS = 60 / 300
# The local stack's default most pollers per lambda queue: the normal priority mapping's
# deployed maximum concurrency (infra/props.py PriorityConcurrency).
LAMBDA_MAX_POLLERS = 20


@dataclass
class FakeContext:
    """The parts of a Lambda context that Powertools reads."""

    function_name: str = "duetime-local"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:duetime-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timeout_ms: int = 900_000

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_ms


def scheduled_event(rule_arn: str, now: datetime) -> dict[str, Any]:
    """The event an EventBridge schedule rule gives its target."""
    _, _, _, region, account, _ = rule_arn.split(":", 5)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


def sqs_event(messages: Sequence[MessageTypeDef], queue_arn: str, region: str) -> dict[str, Any]:
    """Turn ReceiveMessage results into the event Lambda's SQS integration delivers."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "binaryValue": value.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": value["DataType"],
                    }
                    for name, value in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m.get("MD5OfBody") or hashlib.md5(m["Body"].encode()).hexdigest(),  # noqa: S324
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


class SqsEventSource:
    """One poll of an SQS event source mapping: receive up to `batch_size`, invoke the
    handler with a Lambda-shaped event, delete every record not listed in the response's
    batchItemFailures (ReportBatchItemFailures). A handler that raises fails the whole batch:
    nothing is deleted and the messages come back after their visibility timeout, as on AWS."""

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        handler: Handler,
        *,
        batch_size: int = 10,
        wait_seconds: int = 1,
        region: str = "us-east-1",
    ) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._handler = handler
        self._batch_size = batch_size
        self._wait = wait_seconds
        self._region = region
        self._arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]

    def poll_once(self, received: Callable[[int], None] | None = None) -> int:
        """One receive and, when it got messages, one invocation. `received` is told how many
        messages came before the handler runs."""
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch_size,
            WaitTimeSeconds=self._wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if received is not None:
            received(len(messages))
        if not messages:
            return 0
        response = self._handler(sqs_event(messages, self._arn, self._region), FakeContext())
        failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self._sqs.delete_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
        return len(messages)


class ScalingPollers:
    """An event source mapping's pollers of one queue, scaled with its backlog as Lambda's
    standard mode scales them: one poller always polls; when a receive gets messages and every
    poller then holds a batch, one more starts so that one keeps receiving: at once up to
    `initial` (Lambda "starts processing five batches at a time"), then at most one every
    `ramp_seconds` (Lambda adds "up to 300 more instances per minute"), up to `maximum` (the
    mapping's maximum concurrency). An added poller stops when a receive of its own comes back
    empty, unless every other poller holds a batch. Each poller has its own source (its own
    handler: its own execution environment), reused by the next poller added.

    Lambda keeps five pollers on a queue however idle, which costs nothing there. Here every
    empty receive is a call the emulator serves, so an idle queue has one: with five each, the
    idle queues made a tenth of the steady bench scenario's calls (docs/performance.md)."""

    def __init__(
        self,
        make_source: Callable[[], SqsEventSource],
        maximum: int,
        *,
        initial: int = LAMBDA_INITIAL_POLLERS,
        ramp_seconds: float = LAMBDA_RAMP_SECONDS,
    ) -> None:
        self._make_source = make_source
        self._maximum = max(1, maximum)
        self._initial = initial
        self._ramp = ramp_seconds
        self._next_ramp = 0.0  # when the next poller beyond `initial` may start (monotonic)
        self._lock = threading.Lock()
        self._pollers = 0
        self._busy = 0
        self._started = 0
        self._threads: list[threading.Thread] = []
        self._idle: list[SqsEventSource] = []  # the sources of pollers that stopped
        self._name = "pollers"
        self.peak = 0  # the most pollers at once (one waiting for its ramp included)

    @property
    def polling(self) -> int:
        """How many pollers there are now."""
        return self._pollers

    def run(self, stopping: threading.Event, label: str) -> None:
        """Poll until `stopping` is set, then wait for every poller's batch to end."""
        from duetime.observability import logger

        self._name = threading.current_thread().name
        while not stopping.is_set():  # the emulator may not answer yet: try again
            try:
                with self._lock:
                    self._start(stopping, label, added=False)
                break
            except Exception:
                logger.exception("starting a poller failed", extra={"queue": label})
                stopping.wait(1)
        stopping.wait()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def _start(self, stopping: threading.Event, label: str, *, added: bool) -> None:
        """Start a poller (the lock held); beyond `initial`, it starts polling on the ramp.
        Its source first: one that cannot be made (an emulator call) changes no count (until
        2026-11-30 it left a poller counted that did not exist, and the queue never scaled)."""
        source = self._idle.pop() if self._idle else self._make_source()
        now, delay = time.monotonic(), 0.0
        if self._pollers >= self._initial:
            delay = max(0.0, self._next_ramp - now)
            self._next_ramp = now + delay + self._ramp
        elif self._pollers == self._initial - 1:  # the last of the first ones: the ramp begins
            self._next_ramp = now + self._ramp
        self._pollers += 1
        self.peak = max(self.peak, self._pollers)
        self._threads = [t for t in self._threads if t.is_alive()]
        args = (source, stopping, label, added, delay)
        name = f"{self._name}-{self._started}"
        self._started += 1
        thread = threading.Thread(target=self._poll, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _add_if_all_busy(self, stopping: threading.Event, label: str) -> None:
        """With the lock held: one more poller when every one holds a batch (none is left
        receiving), up to the maximum. If it cannot start (an emulator call failed), it is
        tried again in a second, while that still holds: the batch goes on meanwhile."""
        from duetime.observability import logger

        if self._busy < self._pollers or self._pollers >= self._maximum or stopping.is_set():
            return
        try:
            self._start(stopping, label, added=True)
        except Exception:
            logger.exception("adding a poller failed", extra={"queue": label})

            def again() -> None:
                with self._lock:
                    self._add_if_all_busy(stopping, label)

            retry = threading.Timer(1.0, again)
            retry.daemon = True
            retry.start()

    def _poll(
        self,
        source: SqsEventSource,
        stopping: threading.Event,
        label: str,
        added: bool,
        delay: float = 0.0,
    ) -> None:
        from duetime.observability import logger

        holding = False  # this poller holds a batch

        def received(count: int) -> None:
            nonlocal holding
            with self._lock:
                holding = count > 0
                self._busy += holding
                if count > 0:
                    self._add_if_all_busy(stopping, label)

        stopping.wait(delay)
        while not stopping.is_set():
            holding = False
            try:
                count = source.poll_once(received)
            except Exception:
                logger.exception("event source mapping poll failed", extra={"queue": label})
                count = -1
            with self._lock:
                self._busy -= holding
                # An added poller retires on an empty receive, unless it is the one left
                # receiving (the others hold batches: a long run must not stop the queue).
                if added and count == 0 and self._pollers - self._busy > 1:
                    self._pollers -= 1
                    self._idle.append(source)
                    return
            if count < 0:
                stopping.wait(1)
        with self._lock:
            self._pollers -= 1
