"""Fixes to moto so it behaves like the AWS services duetime relies on.

DynamoDB's conditional writes are atomic: of two writers racing on one condition, one wins.
moto (5.2) evaluates the condition and applies the write as separate steps with no lock, so
two threads can both pass the same condition — concurrent sweeps would then both acquire a
partition's lease, and concurrent claims could both win a run. duetime depends on that
atomicity, so the local stack and the tests serialize moto's item writes.

SQS refuses a MessageGroupId that is not 1-128 ASCII letters, digits and punctuation; moto
takes anything, so a value AWS would refuse (a tenant with a space) passed every local test.
`make_sqs_strict` makes moto refuse it as AWS does.

moto backs a transaction up by deep-copying every table it names, under that lock: a
transaction took time in the size of its tables and every other write waited for it (the
cron scenario's 1,000 job ends, each a transaction over a table of thousands of jobs, started
16-27 s after their minute on a 2-core host, until 2026-12-01). The same lock lets a refused
transaction be undone from copies of the items it names, and the stream records it added.

A DynamoDB Streams iterator expires after 15 minutes; moto keeps every one it made, one a
GetRecords call: a long-running local stack grew by ~1.6 KB a poll of its runs stream (140 MB
a day idle; found by an outside audit). `make_stream_iterators_bounded` keeps the newest.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

_lock = threading.RLock()
_applied = False


def make_dynamodb_writes_atomic() -> None:
    """Wrap moto's DynamoDB item writes and reads in one lock, and back a transaction up by its
    items (idempotent)."""
    global _applied  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _applied:
            return
        from moto.dynamodb.models import DynamoDBBackend

        # Queries and scans iterate the table's items: a write landing meanwhile makes them
        # fail ("dictionary changed size during iteration"), which DynamoDB never does. And a
        # read in the middle of a transaction saw its writes, refused or not (an outside audit
        # of the emulator, 2026-12-01).
        for name in (
            "get_item",
            "batch_get_item",
            "transact_get_items",
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
                if name == "transact_write_items":
                    original = _item_scoped(original)
                setattr(DynamoDBBackend, name, _serialized(original))
        _applied = True


def _item_scoped(transact: Callable[..., Any]) -> Callable[..., Any]:
    """moto's TransactWriteItems without its copies of whole tables: a refusal (any error)
    puts back the items it names and drops the stream records it added. Runs under `_lock`."""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    def deepcopy(value: Any, memo: Any = None) -> Any:  # moto's backup: the table itself
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    models.copy = SimpleNamespace(deepcopy=deepcopy)  # type: ignore[assignment,attr-defined]

    @functools.wraps(transact)
    def scoped(backend: Any, transact_items: list[dict[str, Any]], *args: Any) -> Any:
        saved = [s for s in map(functools.partial(_saved, backend), transact_items) if s]
        streams = {
            id(s[0]): (s[0].stream_shard, len(s[0].stream_shard.items))
            for s in saved
            if s[0].stream_shard is not None
        }
        try:
            return transact(backend, transact_items, *args)
        except BaseException:
            for table, hash_key, range_key, item in reversed(saved):
                _put_back(table, hash_key, range_key, item)
            for shard, length in streams.values():
                del shard.items[length:]
            raise

    return scoped


def _saved(backend: Any, entry: dict[str, Any]) -> tuple[Any, Any, Any, Any] | None:
    """(table, hash key, range key, a copy of the item or None) for a transaction's entry;
    None for one moto refuses before writing it."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        ((_, op),) = entry.items()
        table = backend.get_table(op["TableName"])  # its name or its ARN
        attrs = op["Item"] if "Item" in op else op["Key"]
        hash_key = DynamoType(attrs[table.hash_key_attr])
        range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
        return table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))
    except Exception:  # moto refuses the entry itself
        return None


def _put_back(table: Any, hash_key: Any, range_key: Any, item: Any) -> None:
    if range_key is None:
        if item is None:
            table.items.pop(hash_key, None)
        else:
            table.items[hash_key] = item
    elif item is None:
        table.items[hash_key].pop(range_key, None)
    else:
        table.items[hash_key][range_key] = item


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
