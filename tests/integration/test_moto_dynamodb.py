"""The local moto server writes DynamoDB and DynamoDB Streams answers as JSON at once
(duetime.local.moto_dynamodb): every answer parses to what moto's own serializer gives."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from duetime.local import moto_process
from tests.integration.test_moto_http import LIST_TABLES

# What differs between two servers (and two runs) whatever they answer.
VOLATILE = {
    "ResponseMetadata",
    "ApproximateCreationDateTime",
    "CreationDateTime",
    "CreationRequestDateTime",
    "eventID",
    "LastIncreaseDateTime",
    "LastDecreaseDateTime",
    "LatestStreamLabel",
    "LatestStreamArn",
    "StreamArn",
    "StreamLabel",
    "ShardIterator",
    "NextShardIterator",
    "TableId",
    "SizeBytes",  # moto counts a record's creation time, whose text varies in length
}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    fast, fast_url = moto_process.start("127.0.0.1", 0)
    plain, plain_url = moto_process.start("127.0.0.1", 0, plain=True)
    try:
        yield fast_url, plain_url
    finally:
        moto_process.stop(fast)
        moto_process.stop(plain)


def clients(url: str) -> tuple[Any, Any]:
    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    streams_config = Config(account_id_endpoint_mode="disabled")
    return (
        session.client("dynamodb", endpoint_url=url),
        session.client("dynamodbstreams", endpoint_url=url, config=streams_config),
    )


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


ITEM = {
    "pk": {"S": "a"},
    "sk": {"N": "1"},
    "n": {"N": "1.5"},
    "b": {"B": b"\x00\x01bin"},
    "flag": {"BOOL": True},
    "nothing": {"NULL": True},
    "ss": {"SS": ["x", "y"]},
    "ns": {"NS": ["1", "2"]},
    "bs": {"BS": [b"z"]},
    "list": {"L": [{"M": {"deep": {"N": "3"}}}, {"S": "é"}]},
}


def conversation(ddb: Any, streams: Any) -> list[Any]:
    """The same calls on either server: their answers, or their errors."""
    answers: list[Any] = []

    def call(fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            answer = fn(**kwargs)
        except ClientError as exc:
            answer = {"error": exc.response["Error"], "item": exc.response.get("Item")}
        answers.append(stable(answer))
        return answer

    key = {"pk": {"S": "a"}, "sk": {"N": "1"}}
    call(
        ddb.create_table,
        TableName="t",
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    call(ddb.describe_table, TableName="t")
    call(ddb.list_tables)
    call(ddb.put_item, TableName="t", Item=ITEM)
    call(
        ddb.put_item,
        TableName="t",
        Item=ITEM,
        ConditionExpression="attribute_not_exists(pk)",
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    call(ddb.put_item, TableName="t", Item=ITEM | {"n": {"N": "2"}}, ReturnValues="ALL_OLD")
    call(ddb.get_item, TableName="t", Key=key, ConsistentRead=True)
    call(ddb.get_item, TableName="t", Key={"pk": {"S": "none"}, "sk": {"N": "1"}})
    call(
        ddb.update_item,
        TableName="t",
        Key=key,
        UpdateExpression="ADD n :one SET #l = list_append(#l, :more)",
        ExpressionAttributeNames={"#l": "list"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":more": {"L": [{"N": "4"}]}},
        ReturnValues="ALL_NEW",
    )
    call(
        ddb.batch_get_item,
        RequestItems={"t": {"Keys": [key, {"pk": {"S": "b"}, "sk": {"N": "2"}}]}},
    )
    call(
        ddb.query,
        TableName="t",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "a"}},
    )
    call(ddb.scan, TableName="t", Select="COUNT")
    call(ddb.delete_item, TableName="t", Key=key, ReturnValues="ALL_OLD")
    call(ddb.describe_time_to_live, TableName="t")
    arn = ddb.describe_table(TableName="t")["Table"]["LatestStreamArn"]
    shards = call(streams.describe_stream, StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shards[0]["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    call(streams.get_records, ShardIterator=iterator, Limit=1000)
    return answers


def test_every_answer_parses_as_moto_serializer_writes_it(servers: tuple[str, str]) -> None:
    fast, plain = (conversation(*clients(url)) for url in servers)

    assert len(fast) == 16
    for got, expected in zip(fast, plain, strict=True):
        assert got == expected
    records = fast[-1]["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "MODIFY", "REMOVE"]
    assert records[0]["dynamodb"]["NewImage"]["b"] == {"B": b"\x00\x01bin"}


def test_the_local_server_answers_without_moto_serializer(servers: tuple[str, str]) -> None:
    """The two servers' raw answers to one call: moto's serializer spaces its JSON out."""
    bodies = []
    for url in servers:
        parts = urlsplit(url)
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
        connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
        bodies.append(connection.getresponse().read())
        connection.close()
    fast, plain = bodies
    assert json.loads(fast) == json.loads(plain)
    assert fast == json.dumps(json.loads(plain), separators=(",", ":")).encode()
    assert fast != plain
