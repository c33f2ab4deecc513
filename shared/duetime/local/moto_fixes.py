"""Fixes to moto so it behaves like the AWS services duetime relies on.

DynamoDB's conditional writes are atomic: of two writers racing on one condition, one wins.
moto (5.2) evaluates the condition and applies the write as separate steps with no lock, so
two threads can both pass the same condition — concurrent sweeps would then both acquire a
partition's lease, and concurrent claims could both win a run. duetime depends on that
atomicity, so the local stack and the tests serialize moto's item writes.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.RLock()
_applied = False


def make_dynamodb_writes_atomic() -> None:
    """Wrap moto's DynamoDB item-write operations in one lock (idempotent)."""
    global _applied  # noqa: PLW0603 - a process-wide patch, applied once
    with _lock:
        if _applied:
            return
        from moto.dynamodb.models import DynamoDBBackend

        for name in (
            "put_item",
            "update_item",
            "delete_item",
            "transact_write_items",
            "batch_write_item",
        ):
            original = getattr(DynamoDBBackend, name, None)
            if original is not None:
                setattr(DynamoDBBackend, name, _serialized(original))
        _applied = True


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            return method(*args, **kwargs)

    return locked
