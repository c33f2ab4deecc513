"""The local stack's moto reads a Query's partition, not its whole table, and orders a Scan's
items by their keys' values (duetime.local.moto_dynamodb.make_dynamodb_fast).

moto 5.2 answered every Query and every Scan page by sorting every item of the table, each
comparison a Python call, under the lock that makes the local stack's writes atomic: a Query
of one partition took ~77 ms in a table of 10,000 items, a Scan of it 0.7 s (the TTL reaper's,
every 60 s), and every write waited (an outside audit of the emulator, 2026-12-01). The
answers must stay moto's: the same items, in the same order, page after page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import DynamoType

from duetime.local.moto_dynamodb import make_dynamodb_fast

PARTITIONS = 40


@pytest.fixture
def timers(aws_env: None) -> Iterator[Any]:
    make_dynamodb_fast()  # as the local stack's moto process does
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="timers",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for first in range(0, 2_000, 25):
            client.batch_write_item(
                RequestItems={
                    "timers": [
                        {
                            "PutRequest": {
                                "Item": {"pk": {"S": f"p{k % PARTITIONS}"}, "sk": {"N": str(k)}}
                            }
                        }
                        for k in range(first, first + 25)
                    ]
                }
            )
        yield client


def comparisons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the comparisons of key values moto makes in Python."""
    made = [0]
    for name in ("__lt__", "__eq__"):
        original = getattr(DynamoType, name)

        def counted(self: DynamoType, other: Any, original: Any = original) -> bool:
            made[0] += 1
            return bool(original(self, other))

        monkeypatch.setattr(DynamoType, name, counted)
    return made


def test_a_query_reads_its_partition_only_and_answers_as_moto(
    timers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = comparisons(monkeypatch)
    pages, start = [], None
    while True:
        extra = {"ExclusiveStartKey": start} if start else {}
        answer = timers.query(
            TableName="timers",
            KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":p": {"S": "p7"}, ":lo": {"N": "100"}, ":hi": {"N": "900"}},
            ConsistentRead=True,
            Limit=7,
            **extra,
        )
        pages.append([int(i["sk"]["N"]) for i in answer["Items"]])
        start = answer.get("LastEvaluatedKey")
        if start is None:
            break
    found = [k for page in pages for k in page]
    assert found == [k for k in range(100, 901) if k % PARTITIONS == 7]
    assert all(len(page) <= 7 for page in pages)
    # The partition's 50 items, sorted and walked a page at a time: not the table's 2,000.
    assert made[0] < 2_000, made[0]


def test_a_scan_pages_through_every_item_once_in_key_order(timers: Any) -> None:
    seen, start = [], None
    while True:
        extra = {"ExclusiveStartKey": start} if start else {}
        answer = timers.scan(TableName="timers", Limit=150, **extra)
        seen += [(i["pk"]["S"], int(i["sk"]["N"])) for i in answer["Items"]]
        start = answer.get("LastEvaluatedKey")
        if start is None:
            break
    assert seen == sorted(seen)  # moto's order: by partition, then by sort key (as numbers)
    assert len(seen) == len(set(seen)) == 2_000
