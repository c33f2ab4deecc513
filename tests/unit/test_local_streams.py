"""The local runs-stream mapping's pace (duetime.local.streams): four polls a second while
records come, one a second when a poll read none, never a poll right after another."""

from __future__ import annotations

from typing import Any

from duetime.local.streams import (
    STREAM_IDLE_POLL_SECONDS,
    STREAM_POLL_SECONDS,
    StreamEventSource,
)
from duetime.local.ttl import TtlDeletes

INSERT = {"eventName": "INSERT", "dynamodb": {"Keys": {"job_id": {"S": "a"}}}}


class Streams:
    """A stream whose GetRecords returns one record for the first `busy` polls, then none."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.polls = 0

    def describe_table(self, **_: Any) -> dict[str, Any]:
        return {"Table": {"LatestStreamArn": "arn:stream"}}

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": "it"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        self.polls += 1
        records = [INSERT] if self.polls <= self.busy else []
        return {"Records": records, "NextShardIterator": "it"}


class Stopping:
    """A stop event that records each pause and stops after `pauses` of them."""

    def __init__(self, pauses: int) -> None:
        self.left = pauses
        self.waits: list[float] = []

    def is_set(self) -> bool:
        return self.left <= 0

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.left -= 1
        return self.is_set()


def test_it_polls_at_lambdas_pace_while_records_come_and_slower_when_idle() -> None:
    streams = Streams(busy=3)
    delivered: list[dict[str, Any]] = []
    source = StreamEventSource(
        streams,  # type: ignore[arg-type]
        streams,
        "runs",
        lambda event, _: delivered.append(event),
        TtlDeletes(),
        only=lambda record: record["eventName"] == "REMOVE",
    )
    stopping = Stopping(pauses=5)

    source.run(stopping)  # type: ignore[arg-type]

    assert streams.polls == 5
    busy, idle = STREAM_POLL_SECONDS, STREAM_IDLE_POLL_SECONDS
    assert stopping.waits == [busy, busy, busy, idle, idle]
    assert delivered == []  # the filter let no INSERT through
