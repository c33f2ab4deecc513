"""Lambda-shaped events and contexts, and the SQS event source mapping's polling loop."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

Handler = Callable[[dict[str, Any], Any], Any]


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

    def poll_once(self) -> int:
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch_size,
            WaitTimeSeconds=self._wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
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

    def run(self, stopping: threading.Event, label: str) -> None:
        """Poll until `stopping` is set, as the mapping's pollers do; a failed poll is logged
        (with `label`) and the next comes a second later."""
        from duetime.observability import logger

        while not stopping.is_set():
            try:
                self.poll_once()
            except Exception:
                logger.exception("event source mapping poll failed", extra={"queue": label})
                stopping.wait(1)
