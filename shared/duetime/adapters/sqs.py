"""SQS adapter: one standard queue per runtime × priority, each with a DLQ by redrive policy
(the JobQueue and DeadLetters ports). A queue may be spread over lanes (QueueUrls.lanes):
each run goes to one lane by a stable hash of the run, so its copies and retries meet there."""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from duetime.adapters.aws_errors import is_transient
from duetime.domain.ids import message_group_id
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import KeysUnavailable, MessageAuth, RunMessage
from duetime.ports import DeadLetter, Delivery, QueueError, QueueUnavailable
from duetime.settings import QueueUrls, queue_key

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

_BATCH = 10
_SEND_TRIES = 4
_PARALLEL_SENDS = 16  # within the connection pool of the boto3 config (duetime.wiring)
T = TypeVar("T")


class SqsJobQueue:
    def __init__(
        self,
        client: SQSClient,
        queues: Mapping[str, QueueUrls],
        auth: MessageAuth,
        *,
        longest_poll_seconds: int = 20,
    ) -> None:
        """`longest_poll_seconds`: the longest long poll `client` waits out (its read timeout
        allows: duetime.wiring.sqs_config); a receive asking for more polls that long."""
        self._client = client
        self._queues = queues
        self._auth = auth  # every run message is signed (duetime.domain.messages.MessageAuth)
        self._longest_poll = longest_poll_seconds
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=_PARALLEL_SENDS, thread_name_prefix="sqs-send"
                )
            return self._executor

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        by_queue: dict[str, list[tuple[RunMessage, int]]] = defaultdict(list)
        for message, delay in messages:
            urls = self._queues[queue_key(message.runtime, message.priority)]
            by_queue[urls.lane_for(message.job_id, message.scheduled_ms)].append((message, delay))
        batches = [
            (url, pending[start : start + _BATCH])
            for url, pending in by_queue.items()
            for start in range(0, len(pending), _BATCH)
        ]
        if len(batches) == 1:
            results = [self._outcome(*batches[0])]
        else:
            # A sweep hands over thousands of runs at once: the batches go out concurrently
            # (boto3 clients are thread-safe), not one round trip after another.
            results = list(self._pool().map(lambda b: self._outcome(*b), batches))
        # Every batch's unsent messages, whichever failed first: a batch create keeps the
        # jobs whose runs went out (until 2026-11-30 only the first failing batch's were
        # named; none read them then).
        failed = [message for refused, _, _ in results for message in refused]
        down = next((exc for _, _, exc in results if exc is not None), None)
        if down is not None:
            raise QueueUnavailable(str(down), failed) from down
        if failed:
            # With SQS's reason (a parked timer's shows it: an outside fault audit).
            why = next((f" ({why})" for _, why, _ in results if why), "")
            raise QueueError(f"{len(failed)} message(s) were not accepted by SQS{why}", failed)

    def _outcome(
        self, url: str, batch: list[tuple[RunMessage, int]]
    ) -> tuple[list[RunMessage], str, QueueUnavailable | None]:
        """`_send_batch`'s, with SQS taking no request as a value: its messages unsent."""
        try:
            return (*self._send_batch(url, batch), None)
        except QueueUnavailable as exc:
            return exc.failed, "", exc

    def _send_batch(
        self, url: str, batch: list[tuple[RunMessage, int]]
    ) -> tuple[list[RunMessage], str]:
        """Send one batch; entries SQS reports as failed on its side are resent (with backoff)
        a few times. Returns the messages not sent, those SQS refused (SenderFault) with any
        it kept failing, and SQS's reason for the first refused. Raises QueueUnavailable when
        SQS did not take the request, or kept failing entries on its side and refused none."""
        bodies = self._sealed([message for message, _ in batch])
        entries = {
            str(i): {
                "MessageBody": bodies[i],
                "DelaySeconds": max(0, min(900, delay)),
                # The tenant as message group: SQS fair queues keep one noisy tenant from
                # delaying everyone else's jobs. Derived: SQS refuses many valid tenants.
                "MessageGroupId": message_group_id(message.tenant),
            }
            for i, (message, delay) in enumerate(batch)
        }
        send = functools.partial(self._client.send_message_batch, QueueUrl=url)
        try:
            refused, unsent, why = _with_retries(send, entries, lambda e: e)
        except (BotoCoreError, ClientError) as exc:
            if isinstance(exc, ClientError) and not is_transient(exc):
                # SQS refused the request as a whole (a disabled KMS key, access denied, too
                # long): its messages are refused, as entries refused one by one are (until
                # 2026-11-30 the error went through unnamed, and a batch create withdrew the
                # jobs whose runs other requests had sent: an outside fault audit).
                error = exc.response.get("Error", {})
                return [m for m, _ in batch], f"{error.get('Code')}: {error.get('Message')}"
            if not is_transient(exc):
                raise
            raise QueueUnavailable(
                f"SQS did not take a batch: {exc}", [m for m, _ in batch]
            ) from exc
        if unsent and not refused:  # SQS kept failing on its side: not about these messages
            failed = [batch[int(i)][0] for i in unsent]
            raise QueueUnavailable(f"SQS failed {len(failed)} message(s) on its side", failed)
        return [batch[int(i)][0] for i in refused + unsent], why

    def _sealed(self, messages: Sequence[RunMessage]) -> list[str]:
        """The messages' signed bodies. Raises QueueUnavailable naming them when the keys
        cannot be read (Secrets Manager throttling, a 5xx, no answer, a refusal): that is no
        message's fault, and every send would fail the same way, as when SQS takes no request
        (until 2026-12-01 botocore's error went through, and the sweep parked every timer it
        met with an attempt counted: an outside audit; duetime.adapters.message_keys)."""
        try:
            return [self._auth.seal(message) for message in messages]
        except KeysUnavailable as exc:
            raise QueueUnavailable(f"no run message can be signed: {exc}", messages) from exc

    def send_dead(self, message: RunMessage, reason: str, *, signed: bool = True) -> None:
        """Raises QueueUnavailable when SQS took no request (the worker tries again while the
        lease lasts; until 2026-11-30 botocore's error went through, and the run reached its
        DLQ minutes late, its error lost for "the worker stopped"; a fault audit)."""
        dlq = self._queues[queue_key(message.runtime, message.priority)].dlq_url
        body = self._sealed([message])[0] if signed else message.to_json()
        try:
            self._client.send_message(
                QueueUrl=dlq,
                MessageBody=body,
                MessageAttributes={
                    "duetime-reason": {"DataType": "String", "StringValue": reason[:1000] or "-"}
                },
            )
        except (BotoCoreError, ClientError) as exc:
            if not is_transient(exc):
                raise
            raise QueueUnavailable(f"SQS did not take the DLQ copy: {exc}", [message]) from exc

    def receive(
        self,
        runtime: Runtime,
        priority: Priority,
        max_messages: int,
        wait_seconds: int,
        visibility_seconds: int | None = None,
        *,
        lane: int = 0,
    ) -> list[Delivery]:
        url = self._queues[queue_key(runtime, priority)].lanes[lane]
        params: dict[str, Any] = {
            "QueueUrl": url,
            "MaxNumberOfMessages": max_messages,
            "WaitTimeSeconds": min(wait_seconds, self._longest_poll),
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        }
        if visibility_seconds is not None:
            params["VisibilityTimeout"] = visibility_seconds
        response = self._client.receive_message(**params)
        return [
            Delivery(
                message_id=m["MessageId"],
                receipt_handle=m["ReceiptHandle"],
                body=m["Body"],
                receive_count=int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
                queue=url,
            )
            for m in response.get("Messages", [])
        ]

    def delete(self, deliveries: Sequence[Delivery]) -> list[Delivery]:
        by_queue: dict[str, list[Delivery]] = defaultdict(list)
        for delivery in deliveries:
            by_queue[delivery.queue].append(delivery)
        return [
            delivery
            for url, items in by_queue.items()
            for start in range(0, len(items), _BATCH)
            for delivery in self._delete_batch(url, items[start : start + _BATCH])
        ]

    def _delete_batch(self, url: str, batch: list[Delivery]) -> list[Delivery]:
        """Delete one batch; entries SQS reports as failed on its side are retried (with
        backoff) a few times. Returns what is left: those, those failed by their receipt
        (expired, or from a queue that is gone), or the whole batch if a request failed."""
        entries = {str(i): d for i, d in enumerate(batch)}
        delete = functools.partial(self._client.delete_message_batch, QueueUrl=url)
        try:
            refused, left, _ = _with_retries(
                delete, entries, lambda d: {"ReceiptHandle": d.receipt_handle}
            )
        except (BotoCoreError, ClientError):  # already retried by botocore
            return list(batch)
        return [entries[i] for i in refused + left]

    def change_visibility(self, delivery: Delivery, seconds: int) -> None:
        self._client.change_message_visibility(
            QueueUrl=delivery.queue,
            ReceiptHandle=delivery.receipt_handle,
            VisibilityTimeout=max(0, min(43_200, seconds)),
        )

    def dead_letters(self) -> SqsDeadLetters:
        """The dead-letter queues of these queues, read with the same client."""
        return SqsDeadLetters(self._client, self._queues)

    def url_for_arn(self, arn: str) -> str:
        """The queue URL for an event source ARN (Lambda events carry ARNs)."""
        name = arn.rsplit(":", 1)[-1]
        for urls in self._queues.values():
            for url in urls.lanes:
                if url.rstrip("/").endswith("/" + name):
                    return url
        raise KeyError(arn)


class SqsDeadLetters:
    """The dead-letter queues (the DeadLetters port): each queue's DLQ, by its queue key.

    SQS cannot peek: reading a message hides it for `visibility_seconds`; `release` makes it
    visible again at once."""

    def __init__(self, client: SQSClient, queues: Mapping[str, QueueUrls]) -> None:
        self._client = client
        self._queues = queues

    def approximate_count(self, queue: str) -> int:
        attrs = self._client.get_queue_attributes(
            QueueUrl=self._queues[queue].dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attrs.get("ApproximateNumberOfMessages", "0"))

    def receive(self, queue: str, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        response = self._client.receive_message(
            QueueUrl=self._queues[queue].dlq_url,
            MaxNumberOfMessages=max(1, min(_BATCH, max_messages)),
            # Long polling asks every SQS server: a short poll may answer empty too early.
            WaitTimeSeconds=1,
            VisibilityTimeout=visibility_seconds,
            MessageAttributeNames=["duetime-reason"],
            MessageSystemAttributeNames=["SentTimestamp", "ApproximateReceiveCount"],
        )
        letters: list[DeadLetter] = []
        for m in response.get("Messages", []):
            attributes = m.get("Attributes", {})
            reason_attribute = m.get("MessageAttributes", {}).get("duetime-reason")
            reason = reason_attribute.get("StringValue") if reason_attribute else None
            letters.append(
                DeadLetter(
                    queue=queue,
                    message_id=m["MessageId"],
                    receipt_handle=m["ReceiptHandle"],
                    body=m["Body"],
                    reason=reason,
                    sent_ms=int(attributes.get("SentTimestamp", "0")),
                    receive_count=int(attributes.get("ApproximateReceiveCount", "1")),
                )
            )
        return letters

    def release(self, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            self._client.change_message_visibility(
                QueueUrl=self._queues[letter.queue].dlq_url,
                ReceiptHandle=letter.receipt_handle,
                VisibilityTimeout=0,
            )

    def delete(self, letter: DeadLetter) -> None:
        self._client.delete_message(
            QueueUrl=self._queues[letter.queue].dlq_url, ReceiptHandle=letter.receipt_handle
        )


def _with_retries(
    call: Callable[..., Any], items: dict[str, T], entry: Callable[[T], dict[str, Any]]
) -> tuple[list[str], list[str], str]:
    """One batch call (SendMessageBatch, DeleteMessageBatch) over `items` by entry id; the
    entries SQS fails on its side are tried again, with backoff, up to _SEND_TRIES calls.
    Returns the ids SQS refused (SenderFault: a retry cannot help), those it still failed, and
    SQS's code and message for the first it refused ("" if none). A request that raises
    (after botocore's own retries) raises."""
    pending = list(items)
    refused: list[str] = []
    why = ""
    for attempt in range(_SEND_TRIES):
        entries = [entry(items[i]) | {"Id": i} for i in pending]
        failed = call(Entries=entries).get("Failed", [])
        refused += [f["Id"] for f in failed if f.get("SenderFault")]
        why = why or next(
            (
                f"{f.get('Code', '')}: {f.get('Message', '')}"
                for f in failed
                if f.get("SenderFault")
            ),
            "",
        )
        pending = [f["Id"] for f in failed if not f.get("SenderFault")]
        if not pending:
            break
        if attempt < _SEND_TRIES - 1:
            time.sleep(0.05 * 2**attempt)
    return refused, pending, why
