"""Fixes to moto's SQS so the local stack keeps up with a deep queue.

moto 5.2 recomputes every queue attribute (ApproximateNumberOfMessages and friends, each a
scan of the whole queue) in two hot paths:
- `send_message` reads `queue.attributes` to look up ContentBasedDeduplication, once per
  message sent (batch sends too): a send costs O(depth);
- the retention check in `receive_message` reads MessageRetentionPeriod through
  `get_queue_attributes`, which builds the attributes three times per message received.
At a depth of 2,000 a batch send falls to ~20 messages/s and receive+delete to ~7 messages/s,
so a burst of jobs due together would be late by minutes. `make_sqs_fast` reads the two
values from the queue's own fields instead; everything else (delays, visibility, redrive,
receive counts, FIFO deduplication) is moto's code unchanged.

Receiving scans the queue too: `Queue.messages` (the visible, undelayed ones) read the clock
twice per message through datetime arithmetic, so a receive cost ~10 ms per 1,000 messages
queued or delayed, and a long poll's wait re-scanned on every send. It now reads the clock once
per scan.

One addition: a queue answers `ApproximateAgeOfOldestMessage` to GetQueueAttributes, how long
the oldest message ready for a worker has waited (SQS publishes it as a CloudWatch metric,
which moto does not have): the local figures of GET /admin/stats read it.

Three more differences from SQS are fixed on the way:
- two concurrent receives on one queue could both take the same message (moto checks and
  marks it received without a lock): a receive now holds the queue's lock, which its long
  poll's wait releases, so one message goes to one receiver per visibility timeout;
- a long poll waits until a message arrives *or until the next delayed (or in-flight)
  message becomes visible*; moto sleeps through the whole second, so a message whose delay
  ended mid-wait was received up to a second late (SQS answers at once);
- `Queue.delete_message` rebuilds the message list without the lock `add_message` appends
  under, so a message sent while another one is deleted could vanish; it now holds the lock
  (and finds the message by an index of receipt handles, not by two scans of the queue).

The send path is a copy of moto 5.2.5's `SQSBackend.send_message` with the one lookup
changed, so the patch applies only to that version (moto is pinned in pyproject.toml);
on another version it does nothing and says so.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import string
import threading
from collections.abc import Callable
from typing import Any

_SUPPORTED_MOTO = "5.2.5"
# A queue attribute only this emulator answers (SQS has it as a CloudWatch metric only).
AGE_OF_OLDEST = "ApproximateAgeOfOldestMessage"
_lock = threading.Lock()
_applied = False
_log = logging.getLogger(__name__)


def make_sqs_fast() -> bool:
    """Patch moto's SQS model in this process (idempotent). False when moto's version is not
    the one the patch was written against (moto is then left as it is)."""
    global _applied  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _applied:
            return True
        import moto
        from moto.sqs.models import Queue, SQSBackend

        if moto.__version__ != _SUPPORTED_MOTO:
            _log.warning(
                "moto %s is not %s: SQS speed-up not applied", moto.__version__, _SUPPORTED_MOTO
            )
            return False
        patches: list[tuple[type, str, Any]] = [
            (SQSBackend, "send_message", _send_message),
            (SQSBackend, "is_message_valid_based_on_retention_period", _within_retention_period),
            (Queue, "delete_message", _holding_messages_lock(_delete_message)),
            (Queue, "wait_for_messages", _wait_until_ready),
            (Queue, "messages", property(_ready_messages)),
            (SQSBackend, "receive_message", _holding_queue_lock(SQSBackend.receive_message)),
            (Queue, "approximate_age_of_oldest_message", property(_age_of_oldest_message)),
        ]
        for owner, name, replacement in patches:
            setattr(owner, name, replacement)
        if AGE_OF_OLDEST not in Queue.BASE_ATTRIBUTES:
            Queue.BASE_ATTRIBUTES = [*Queue.BASE_ATTRIBUTES, AGE_OF_OLDEST]
        _applied = True
        return True


def _within_retention_period(self: Any, queue_name: str, message: Any) -> bool:
    """moto's check, reading the period from the queue rather than from all its attributes."""
    from moto.core.utils import unix_time

    retention_period: int = self.get_queue(queue_name).message_retention_period
    return bool(retention_period + message.sent_timestamp / 1000 > unix_time())


def _wait_until_ready(queue: Any, timeout: float) -> None:
    """A long poll's wait: until a message arrives (as moto) *or until the next delayed or
    in-flight message becomes visible*. moto waits the whole second, so a message whose delay
    ends mid-wait was received up to a second late; SQS answers a long poll at once."""
    from moto.core.utils import unix_time_millis

    with queue._messages_lock:
        now = unix_time_millis()
        upcoming = (max(m.visible_at, m.delayed_until) for m in queue._messages)
        next_ms = min((t for t in upcoming if t > now), default=None)
        wait = timeout if next_ms is None else min(timeout, (next_ms - now) / 1000 + 0.001)
        queue._messages_lock.wait_for(lambda: queue.messages, timeout=wait)


def _ready_messages(queue: Any) -> list[Any]:
    """moto's `Queue.messages` (visible and not delayed) with one clock reading per scan."""
    from moto.core.utils import unix_time_millis

    now = unix_time_millis()
    return [m for m in queue._messages if now > m.visible_at and now >= m.delayed_until]


def _age_of_oldest_message(queue: Any) -> int:
    """Seconds the oldest message ready for a worker has waited (since its delay ended), 0
    when none waits: the local stand-in for CloudWatch's ApproximateAgeOfOldestMessage."""
    from moto.core.utils import unix_time_millis

    now = unix_time_millis()
    waiting = [max(m.sent_timestamp, m.delayed_until) for m in _ready_messages(queue)]
    return int(now - min(waiting)) // 1000 if waiting else 0


def _holding_queue_lock(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(backend: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        with backend.get_queue(queue_name)._messages_lock:
            return method(backend, queue_name, *args, **kwargs)

    return locked


def _delete_message(queue: Any, receipt_handle: str) -> None:
    """moto's `Queue.delete_message` (a handle from any receive of a message deletes it; a
    deleted message's handle again does nothing; an unknown one is ReceiptHandleIsInvalid),
    finding the message through an index of the handles instead of two scans of the queue per
    message: at a depth of 3,000 a DeleteMessageBatch of 10 took ~60 ms. The index is made
    again when a handle is not in it (a receive since: once per batch)."""
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    if receipt_handle in queue.deleted_messages:
        return
    index: dict[str, Any] = queue.__dict__.get("_duetime_handles") or {}
    message = index.get(receipt_handle)
    if message is None:
        index = {h: m for m in queue._messages for h in m.all_receipt_handles}
        queue._duetime_handles = index
        message = index.get(receipt_handle)
        if message is None:
            raise ReceiptHandleIsInvalid()
    queue._messages = [m for m in queue._messages if m is not message]
    queue.pending_messages.discard(message)
    queue.deleted_messages.update(message.all_receipt_handles)
    for handle in message.all_receipt_handles:
        index.pop(handle, None)


def _holding_messages_lock(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(queue: Any, *args: Any, **kwargs: Any) -> Any:
        with queue._messages_lock:  # a Condition over an RLock: add_message appends under it
            return method(queue, *args, **kwargs)

    return locked


def _send_message(
    self: Any,
    queue_name: str,
    message_body: str,
    message_attributes: dict[str, Any] | None = None,
    delay_seconds: int | None = None,
    deduplication_id: str | None = None,
    group_id: str | None = None,
    system_attributes: dict[str, Any] | None = None,
    validate_group_id: bool = True,
) -> Any:
    """moto 5.2.5's `SQSBackend.send_message`; only the ContentBasedDeduplication lookup
    differs (the queue's field: `queue.attributes` is the O(depth) part)."""
    from moto.moto_api._internal import mock_random as random
    from moto.sqs.exceptions import InvalidParameterValue
    from moto.sqs.models import MAXIMUM_MESSAGE_DELAY, Message

    queue = self.get_queue(queue_name)

    self._validate_message(
        queue,
        message_body=message_body,
        delay_seconds=int(delay_seconds or 0),
        deduplication_id=deduplication_id,
        group_id=group_id,
        validate_group_id=validate_group_id,
    )

    delay_seconds = int(delay_seconds) if delay_seconds is not None else queue.delay_seconds

    message_id = str(random.uuid4())
    message = Message(message_id, message_body, system_attributes)

    # moto: `queue.attributes.get("ContentBasedDeduplication") == "true"`; the attribute is
    # listed for FIFO queues only, and stored as a bool on the queue.
    if queue.fifo_queue and queue.content_based_deduplication:
        sha256 = hashlib.sha256()
        sha256.update(message_body.encode("utf-8"))
        message.deduplication_id = sha256.hexdigest()

    # Attributes, but not *message* attributes
    if deduplication_id is not None:
        message.deduplication_id = deduplication_id
        message.sequence_number = "".join(random.choice(string.digits) for _ in range(20))

    if group_id is not None:
        message.group_id = group_id

    if message_attributes:
        message.message_attributes = message_attributes

    if delay_seconds > MAXIMUM_MESSAGE_DELAY:
        msg = (
            f"Value {delay_seconds} for parameter DelaySeconds is invalid. "
            "Reason: DelaySeconds must be >= 0 and <= 900."
        )
        raise InvalidParameterValue(msg)

    message.mark_sent(delay_seconds=delay_seconds)

    queue.add_message(message)

    return message
