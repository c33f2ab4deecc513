"""Fixes to moto so it behaves like the AWS services duetime relies on.

DynamoDB's conditional writes are atomic: of two writers racing on one condition, one wins.
moto (5.2) evaluates the condition and applies the write as separate steps with no lock, so
two threads can both pass the same condition — concurrent sweeps would then both acquire a
partition's lease, and concurrent claims could both win a run. duetime depends on that
atomicity, so the local stack and the tests serialize moto's item writes.

SQS refuses a MessageGroupId that is not 1-128 ASCII letters, digits and punctuation; moto
takes anything, so a value AWS would refuse (a tenant with a space) passed every local test.
`make_sqs_strict` makes moto refuse it as AWS does.

A DynamoDB Streams iterator expires after 15 minutes; moto keeps every one it made, one a
GetRecords call: a long-running local stack grew by ~1.6 KB a poll of its runs stream (140 MB
a day idle; found by an outside audit). `make_stream_iterators_bounded` keeps the newest.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.RLock()
_applied = False


def make_dynamodb_writes_atomic() -> None:
    """Wrap moto's DynamoDB item writes (and the reads that iterate items) in one lock
    (idempotent)."""
    global _applied  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _applied:
            return
        from moto.dynamodb.models import DynamoDBBackend

        # Queries and scans iterate the table's items: a write landing meanwhile makes them
        # fail ("dictionary changed size during iteration"), which DynamoDB never does.
        for name in (
            "put_item",
            "update_item",
            "delete_item",
            "transact_write_items",
            "batch_write_item",
            "query",
            "scan",
        ):
            original = getattr(DynamoDBBackend, name, None)
            if original is not None:
                setattr(DynamoDBBackend, name, _serialized(original))
        _applied = True


_sqs_strict = False


def make_sqs_strict() -> None:
    """Make moto refuse MessageGroupIds that SQS refuses (idempotent)."""
    global _sqs_strict  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _sqs_strict:
            return
        from moto.sqs.exceptions import InvalidParameterValue
        from moto.sqs.models import SQSBackend

        from duetime.domain.ids import valid_message_group_id

        original = SQSBackend._validate_message

        @functools.wraps(original)
        def validate(self: Any, queue: Any, *args: Any, **kwargs: Any) -> None:
            group_id = kwargs.get("group_id", args[3] if len(args) > 3 else None)
            if group_id is not None and not valid_message_group_id(group_id):
                raise InvalidParameterValue(
                    f"Value {group_id} for parameter MessageGroupId is invalid. Reason: "
                    "MessageGroupId can only include alphanumeric and punctuation characters. "
                    "1 to 128 in length."
                )
            original(self, queue, *args, **kwargs)

        SQSBackend._validate_message = validate  # type: ignore[method-assign]
        _sqs_strict = True


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            return method(*args, **kwargs)

    return locked


# Stream iterators moto keeps: the newest, far more than a poller uses (it takes each call's
# next one), as AWS's expire.
KEPT_STREAM_ITERATORS = 1024
_streams_bounded = False


def make_stream_iterators_bounded() -> None:
    """Make moto forget all but its newest KEPT_STREAM_ITERATORS stream iterators (idempotent)."""
    global _streams_bounded  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _streams_bounded:
            return
        from moto.dynamodbstreams.models import DynamoDBStreamsBackend

        original = DynamoDBStreamsBackend.get_records

        @functools.wraps(original)
        def get_records(self: Any, iterator_arn: str, limit: int) -> Any:
            answer = original(self, iterator_arn, limit)
            with _lock:
                iterators = self.shard_iterators
                for arn in list(iterators)[: max(0, len(iterators) - KEPT_STREAM_ITERATORS)]:
                    iterators.pop(arn, None)
            return answer

        DynamoDBStreamsBackend.get_records = get_records  # type: ignore[method-assign]
        _streams_bounded = True
