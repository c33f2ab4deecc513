"""The local stack's moto backs a DynamoDB transaction up by the items it names, not by copies
of whole tables (duetime.local.moto_fixes.make_dynamodb_writes_atomic).

moto 5.2 deep-copied every table a TransactWriteItems named before applying it, under the lock
that makes its writes atomic: each transaction cost time in the size of its tables, and every
other write waited for it. The cron scenario's 1,000 jobs, each ending in a transaction with
its tenant's recurring count over a table of thousands of jobs, took 16-27 s to start on a
2-core host (docs/performance.md). A transaction refused must still leave nothing of itself:
not its items' changes, nor their stream records."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import Item

TABLE = "jobs"


@pytest.fixture
def dynamodb(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "tenant", "KeyType": "HASH"},
                {"AttributeName": "id", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "tenant", "AttributeType": "S"},
                {"AttributeName": "id", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        yield client


def key(name: str) -> dict[str, Any]:
    return {"tenant": {"S": "t"}, "id": {"S": name}}


def put(client: Any, name: str, n: int) -> None:
    client.put_item(TableName=TABLE, Item=key(name) | {"n": {"N": str(n)}})


def items(client: Any) -> dict[str, int]:
    answer = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return {i["id"]["S"]: int(i["n"]["N"]) for i in answer if "n" in i}


def records(client: Any) -> int:
    streams = boto3.client(
        "dynamodbstreams",
        region_name="us-east-1",
        config=Config(account_id_endpoint_mode="disabled"),
    )
    arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return len(streams.get_records(ShardIterator=iterator, Limit=1000)["Records"])


def increment(name: str, *, below: int | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": TABLE,
        "Key": key(name),
        "UpdateExpression": "ADD n :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }
    if below is not None:
        update["ConditionExpression"] = "n < :limit"
        update["ExpressionAttributeValues"][":limit"] = {"N": str(below)}
    return {"Update": update}


def test_a_refused_transaction_leaves_its_items_and_the_stream_as_they_were(dynamodb: Any) -> None:
    put(dynamodb, "counter", 1)
    put(dynamodb, "gone", 7)
    put(dynamodb, "full", 5)
    before = records(dynamodb)
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(
            TransactItems=[
                increment("counter"),  # applied by moto, then undone
                {"Put": {"TableName": TABLE, "Item": key("new") | {"n": {"N": "3"}}}},
                {"Delete": {"TableName": TABLE, "Key": key("gone")}},
                increment("full", below=5),  # refused: the whole transaction is
            ]
        )
    reasons = [r["Code"] for r in refused.value.response["CancellationReasons"]]
    assert reasons == ["None", "None", "None", "ConditionalCheckFailed"]
    assert items(dynamodb) == {"counter": 1, "gone": 7, "full": 5}
    assert records(dynamodb) == before  # no record of a change that never was

    dynamodb.transact_write_items(TransactItems=[increment("counter"), increment("full")])
    assert items(dynamodb) == {"counter": 2, "gone": 7, "full": 6}
    assert records(dynamodb) == before + 2
    # The item moto updated in place before the refusal is a copy: changing it again later
    # does not reach back into what was restored.
    dynamodb.transact_write_items(TransactItems=[increment("counter")])
    assert items(dynamodb)["counter"] == 3


def test_a_transaction_copies_the_items_it_names_not_its_tables(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(200):
        put(dynamodb, f"job-{i:03}", i)
    put(dynamodb, "counter", 0)
    copies = 0
    copy_item = Item.__deepcopy__

    def counted(self: Item, memo: dict[int, Any]) -> Item:
        nonlocal copies
        copies += 1
        return copy_item(self, memo)

    monkeypatch.setattr(Item, "__deepcopy__", counted)
    dynamodb.transact_write_items(TransactItems=[increment("counter"), increment("job-007")])
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(
            TransactItems=[increment("counter"), increment("job-008", below=0)]
        )
    assert copies <= 8  # the named items (and moto's own copy in an update), not 201 each time
    assert items(dynamodb)["counter"] == 1
    assert items(dynamodb)["job-007"] == 8
    assert items(dynamodb)["job-008"] == 8


def test_a_refused_transaction_undoes_an_entry_that_names_its_table_by_arn(dynamodb: Any) -> None:
    put(dynamodb, "counter", 1)
    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["TableArn"]
    by_arn = increment("counter")
    by_arn["Update"]["TableName"] = arn  # DynamoDB takes a table's name or its ARN
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(TransactItems=[by_arn, increment("counter-2", below=0)])
    assert items(dynamodb) == {"counter": 1}


def test_a_read_waits_for_a_transaction_that_is_then_refused(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GetItem takes the write lock: one made while a transaction is between its first
    write and its refusal does not see that write (it did before 2026-12-01)."""
    from moto.dynamodb.models import DynamoDBBackend

    put(dynamodb, "counter", 0)
    seen: list[int] = []
    reader = threading.Thread(
        target=lambda: seen.append(
            int(dynamodb.get_item(TableName=TABLE, Key=key("counter"))["Item"]["n"]["N"])
        )
    )
    update = DynamoDBBackend.update_item

    def then_read(*args: Any, **kwargs: Any) -> Any:
        result = update(*args, **kwargs)
        reader.start()
        reader.join(0.5)  # under the lock, the read waits for the transaction's end
        return result

    monkeypatch.setattr(DynamoDBBackend, "update_item", then_read)
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(
            TransactItems=[increment("counter"), increment("missing", below=0)]
        )
    reader.join(5)
    assert seen == [0]
