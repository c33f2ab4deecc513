"""The Lambda event source mapping of a DynamoDB stream (the runs table's → the archiver),
which moto does not run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime.local.lambda_runtime import FakeContext, Handler
from duetime.local.ttl import TtlDeletes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The archiver's mapping (infra/constructs/history.py) takes up to 1,000 records a batch.
STREAM_BATCH_SIZE = 1000
# Lambda polls each shard of a DynamoDB stream four times a second: so does the stack while
# records come (a burst of runs writes two stream records each; polling again after every
# handful of them took a quarter of the emulator's time from the burst: docs/performance.md),
# and once a second when a poll read nothing (an idle stack's emulator stays idle).
STREAM_POLL_SECONDS = 0.25
STREAM_IDLE_POLL_SECONDS = 1.0


class StreamEventSource:
    """The Lambda event source mapping of a DynamoDB stream: read each shard from its trim
    horizon with GetRecords, invoke the handler with Lambda's event shape (batches of up to
    `batch_size`), and move on only when the handler returns; a handler that raises gets the
    same batch again at the next poll, as Lambda retries a failed batch. REMOVE records of
    the reaper's deletes get DynamoDB TTL's `userIdentity`. With `only`, the mapping's filter,
    the other records are dropped before the handler (and a batch with none left is not
    delivered), as Lambda's filter criteria do."""

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        streams: Any,  # boto3 DynamoDB Streams client
        table: str,
        handler: Handler,
        marks: TtlDeletes,
        *,
        batch_size: int = STREAM_BATCH_SIZE,
        region: str = "us-east-1",
        only: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> None:
        self._only = only
        self.read = 0  # records the last poll read (delivered or filtered out)
        self._streams = streams
        self._table = table
        self._handler = handler
        self._marks = marks
        self._batch_size = batch_size
        self._region = region
        self.arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        shards = streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        self._iterators: dict[str, str | None] = {
            shard["ShardId"]: streams.get_shard_iterator(
                StreamArn=self.arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for shard in shards
        }
        # A batch the handler failed, with the iterator after it: delivered again, unchanged.
        self._pending: dict[str, tuple[dict[str, Any], str | None]] = {}

    def poll_once(self) -> int:
        """One batch per shard at most; returns how many records were delivered."""
        self.read = 0
        delivered = 0
        for shard, iterator in list(self._iterators.items()):
            pending = self._pending.get(shard)
            if pending is None:
                if iterator is None:  # a closed shard, read to its end
                    continue
                reply = self._streams.get_records(ShardIterator=iterator, Limit=self._batch_size)
                records = reply.get("Records", [])
                self.read += len(records)
                following: str | None = reply.get("NextShardIterator")
                event = self.event(records)
                if self._only is not None:
                    event["Records"] = [r for r in event["Records"] if self._only(r)]
                if not event["Records"]:
                    self._iterators[shard] = following
                    continue
                pending = self._pending[shard] = (event, following)
            event, following = pending
            self._handler(event, FakeContext())
            del self._pending[shard]
            self._iterators[shard] = following
            delivered += len(event["Records"])
        return delivered

    def run(self, stopping: threading.Event) -> None:
        """Poll until `stopping` is set: every STREAM_POLL_SECONDS while records come, every
        STREAM_IDLE_POLL_SECONDS after a poll that read none; a batch the handler failed is
        delivered again at the next poll, as Lambda does."""
        from duetime.observability import logger

        while not stopping.is_set():
            try:
                self.poll_once()
            except Exception:
                logger.exception("runs stream: the archiver failed; retrying the batch")
            busy = self.read or self._pending
            stopping.wait(STREAM_POLL_SECONDS if busy else STREAM_IDLE_POLL_SECONDS)

    def event(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """GetRecords results in the shape Lambda delivers them."""
        return {"Records": [self._lambda_record(r) for r in records]}

    def _lambda_record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        change = dict(record.get("dynamodb", {}))
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            change["ApproximateCreationDateTime"] = int(created.timestamp())
        shaped: dict[str, Any] = {
            "eventID": record.get("eventID"),
            "eventName": record.get("eventName"),
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion", self._region),
            "dynamodb": change,
            "eventSourceARN": self.arn,
        }
        identity = record.get("userIdentity")
        if isinstance(identity, Mapping):
            shaped["userIdentity"] = {
                "type": identity.get("Type", identity.get("type")),
                "principalId": identity.get("PrincipalId", identity.get("principalId")),
            }
        elif record.get("eventName") == "REMOVE" and self._marks.take(
            self._table, change.get("Keys", {})
        ):
            shaped["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
        return shaped
