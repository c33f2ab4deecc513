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
        _applied = True


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
