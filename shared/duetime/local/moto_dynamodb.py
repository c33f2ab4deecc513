"""Answers of moto's DynamoDB and DynamoDB Streams, written as JSON at once.

moto 5.2 writes every answer through its generic serializer, which walks the operation's
output shape and, for every attribute of every item, asks a chain of alias providers which
key to read: ~3 ms of the server's CPU per stream record (a GetRecords of 25 records took 76
ms, of 400 records 1.1 s), and a share of every GetItem, BatchGetItem and Query. A burst of
runs writes two stream records each, so the runs-stream mapping's reads alone took a quarter
of the emulator's time from the burst.

The results of these two services are already in the wire's shape (moto builds them as
DynamoDB JSON: `DynamoResult`), so `make_dynamodb_fast` has their successful answers dumped
as they are: timestamps as epoch seconds (to the millisecond, as the serializer writes them)
and binary values in base64, as the JSON protocol sends them. Errors, and answers that are not
plain dictionaries, go through moto's serializer unchanged. Tested against the serializer's
own answers (tests/integration/test_moto_dynamodb.py).

moto also answered every Query and every Scan page by sorting the whole table, each comparison
of two keys a Python call, under the lock that makes the local stack's writes atomic
(duetime.local.moto_fixes): a Query of one partition took ~77 ms in a table of 10,000 items,
the TTL reaper's Scan of it 0.7 s, and every write waited (until 2026-12-01; an outside audit
of the emulator). A Query of a table (not of an index) now sorts its partition only, and the
sort's keys are the key values (the order moto's comparisons of them give;
tests/unit/test_moto_reads.py).
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import threading
from collections.abc import Callable
from typing import Any

_JSON_SERVICES = frozenset({"dynamodb", "dynamodbstreams"})
_query = threading.local()  # `of`: the (table, partition key) a Query of a table reads
_CONTENT_TYPE = "application/x-amz-json-1.0"
_lock = threading.Lock()
_applied = False


def make_dynamodb_fast() -> None:
    """Patch moto's answers in this process (idempotent)."""
    global _applied  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _applied:
            return
        from moto.core.responses import BaseResponse

        BaseResponse.serialized = _dumped(BaseResponse.serialized)  # type: ignore[method-assign]
        _read_by_partition()
        _applied = True


def _read_by_partition() -> None:
    from moto.dynamodb.models.table import Table

    query = Table.query

    @functools.wraps(query)
    def partition_query(table: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        _query.of = (table, hash_key) if index_name is None and hash_key is not None else None
        try:
            return query(table, hash_key, *args, **kwargs)
        finally:
            _query.of = None

    def all_items(table: Any) -> list[Any]:
        of = getattr(_query, "of", None)
        if of is not None and of[0] is table:
            found = table.items.get(of[1])  # (items is a defaultdict: `get` adds nothing)
            items = [] if found is None else [found] if not table.range_key_attr else found.values()
        elif table.range_key_attr:
            items = [item for partition in table.items.values() for item in partition.values()]
        else:
            items = list(table.items.values())
        return sorted(items, key=_key_order)

    Table.query = partition_query  # type: ignore[method-assign,assignment]
    Table.all_items = all_items  # type: ignore[method-assign,assignment]


def _key_order(item: Any) -> Any:
    """moto's order of items (`Table.all_items`), by values compared in C."""
    if item.range_key:
        return (item.hash_key.cast_value, item.range_key.cast_value)
    return item.hash_key.cast_value


def _dumped(serialized: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(serialized)
    def answer(handler: Any, action_result: Any) -> Any:
        result = getattr(action_result, "result", None)
        if handler.service_name not in _JSON_SERVICES or type(result) is not dict:
            return serialized(handler, action_result)
        headers = dict(handler.response_headers)
        headers["Content-Type"] = _CONTENT_TYPE
        return 200, headers, json.dumps(result, default=_wire, separators=(",", ":"))

    return answer


def _wire(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return round(value.timestamp(), 3)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
