"""What the DynamoDB stores share: batch calls that resend what DynamoDB left unprocessed,
one page of a newest-first query, opaque page cursors, and telling a failed condition apart."""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from duetime.adapters.aws_errors import is_transient
from duetime.adapters.codec import from_item
from duetime.ports import StoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_BATCH_GET = 100
BATCH_WRITE = 25


def is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def is_cancelled_by_condition(exc: ClientError) -> bool:
    """A transaction cancelled because one of its conditions failed."""
    if not is_cancelled(exc):
        return False
    reasons = exc.response.get("CancellationReasons", [])
    return any(reason.get("Code") == "ConditionalCheckFailed" for reason in reasons)


def refused_by(exc: ClientError, index: int) -> bool:
    """A transaction cancelled (at least) by the condition of its item `index`."""
    reasons = exc.response.get("CancellationReasons", []) if is_cancelled(exc) else []
    return len(reasons) > index and reasons[index].get("Code") == "ConditionalCheckFailed"


def refused_only_by_last(exc: ClientError) -> bool:
    """A transaction cancelled by its last item's condition alone (the others' reasons are
    `None`)."""
    reasons = exc.response.get("CancellationReasons", [])
    codes = [reason.get("Code") for reason in reasons]
    return bool(codes) and codes[-1] == "ConditionalCheckFailed" and set(codes[:-1]) <= {"None"}


def encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str, keys: frozenset[str]) -> dict[str, Any]:
    """What encode_cursor wrote: an object of exactly `keys`, each once (another shape is
    refused; until 2026-11-30 extra or repeated keys went through: a contract audit)."""
    try:
        # Strictly what encode_cursor writes: URL-safe base64 (no other character, which a
        # lenient decoder would skip) of UTF-8 JSON (json.loads would guess UTF-16 from bytes).
        raw = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True)
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=_once_each)
    except ValueError as exc:
        raise ValueError("invalid cursor") from exc
    if not isinstance(value, dict) or set(value) != keys:
        raise ValueError("invalid cursor")
    return value


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a key twice")
    return found


# Why a transaction's item may be cancelled that time mends (DynamoDB's CancellationReasons).
PASSING_CANCELLATIONS = frozenset(
    {"None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
    | {"RequestLimitExceeded", "InternalServerError"}
)


def store_error(exc: ClientError | BotoCoreError) -> StoreError:
    """A call's error, after the SDK's retries, as a StoreError: transient if time may mend
    it (until 2026-11-30 most writes called every error transient, an access denied too: a
    chain refused for good was tried again every 30 s and never quarantined; a fault audit).
    A transaction cancelled only by conflicts and throttles is (the SDK does not retry it)."""
    if isinstance(exc, ClientError) and is_cancelled(exc):
        reasons = exc.response.get("CancellationReasons", [])
        passing = {str(reason.get("Code")) for reason in reasons} <= PASSING_CANCELLATIONS
        return StoreError(str(exc), transient=passing)
    # No answer (botocore's timeouts, a reset): a write's outcome is unknown (StoreError.unknown)
    silent = isinstance(exc, BotoCoreError) and is_transient(exc)
    return StoreError(str(exc), transient=is_transient(exc), unknown=silent)


def is_cancelled(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "TransactionCanceledException"


@contextmanager
def store_errors() -> Iterator[None]:
    """A call that fails after the SDK's retries as a StoreError, transient or not (the
    sweeper's hand-over tells a table that is down from a timer that fails on its own by it;
    until 2026-11-30 a throttled batch call raised botocore's error). Also a decorator
    (`@store_errors()`): a store method's calls that give no answer (botocore's read or
    connect timeouts, a BotoCoreError) are transient StoreErrors, as its throttles are (until
    2026-12-01 most methods caught ClientError only, and the hand-over took a completion
    without an answer for its timer's own failure: an outside audit). A method's own
    StoreErrors (ConditionFailed) go through as they are."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise store_error(exc) from exc


def batch_get(
    client: DynamoDBClient, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool
) -> list[dict[str, Any]]:
    """BatchGetItem in chunks of 100, retrying unprocessed keys; items in plain values. A
    failed call is a StoreError."""
    with store_errors():
        return _batch_get(client, table, keys, consistent=consistent)


def _batch_get(
    client: DynamoDBClient, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for start in range(0, len(keys), _BATCH_GET):
        request: Any = {
            table: {"Keys": keys[start : start + _BATCH_GET], "ConsistentRead": consistent}
        }
        for _ in _unprocessed_rounds("BatchGetItem"):
            response = client.batch_get_item(RequestItems=request)
            items += [from_item(i) for i in response.get("Responses", {}).get(table, [])]
            request = response.get("UnprocessedKeys") or None
            if not request:
                break
    return items


def batch_write(client: DynamoDBClient, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem of up to 25 requests, retrying unprocessed ones. A failed call is a
    StoreError."""
    request: Any = {table: requests}
    with store_errors():
        for _ in _unprocessed_rounds("BatchWriteItem"):
            response = client.batch_write_item(RequestItems=request)
            request = response.get("UnprocessedItems") or None
            if not request:
                break


# Items a batch call leaves unprocessed (throttled partitions) are sent again after a backoff
# with full jitter, as DynamoDB asks, not at once: an immediate resend lands on the same
# throttled partition. After this many rounds the call fails.
UNPROCESSED_ROUNDS = 8
UNPROCESSED_BACKOFF_S = 0.05
UNPROCESSED_BACKOFF_CAP_S = 2.0


def _unprocessed_rounds(operation: str) -> Iterator[int]:
    """Round numbers for a batch call and its resends; sleeps before each resend, and raises
    StoreError when the rounds run out with items still unprocessed."""
    for round_ in range(UNPROCESSED_ROUNDS):
        if round_:
            ceiling = min(UNPROCESSED_BACKOFF_CAP_S, UNPROCESSED_BACKOFF_S * 2**round_)
            time.sleep(random.uniform(0, ceiling))
        yield round_
    raise StoreError(f"{operation}: items still unprocessed after {UNPROCESSED_ROUNDS} rounds")


def query_page(
    client: DynamoDBClient, params: dict[str, Any], limit: int, sort_key: str
) -> tuple[list[dict[str, Any]], Any]:
    """One page of a query, newest first, and the sort-key value to continue after (None at
    the end). One extra item tells whether another page exists: a query that stops at its
    Limit returns a LastEvaluatedKey even when nothing follows."""
    response = client.query(**params, ScanIndexForward=False, Limit=limit + 1)
    items = [from_item(i) for i in response.get("Items", [])]
    last = response.get("LastEvaluatedKey")  # also set when the 1 MB page limit cut it short
    if len(items) > limit:
        return items[:limit], items[limit - 1][sort_key]
    return items, from_item(last)[sort_key] if last else None
