"""The local stack's moto keeps only its newest DynamoDB Streams iterators
(duetime.local.moto_fixes.make_stream_iterators_bounded): it kept one a GetRecords call, for
good, and a long-running stack grew by ~1.6 KB a poll of its runs stream."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodbstreams.models import dynamodbstreams_backends

from duetime.local.moto_fixes import KEPT_STREAM_ITERATORS, make_stream_iterators_bounded


@pytest.mark.usefixtures("aws_env")
def test_polling_a_stream_keeps_a_bounded_number_of_iterators_and_reads_every_record() -> None:
    make_stream_iterators_bounded()
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        streams = boto3.client(
            "dynamodbstreams",
            region_name="us-east-1",
            config=Config(account_id_endpoint_mode="disabled"),
        )
        table = dynamodb.create_table(
            TableName="runs",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )["TableDescription"]
        arn = table["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        read = 0
        for poll in range(KEPT_STREAM_ITERATORS + 500):
            if poll % 100 == 0:
                dynamodb.put_item(TableName="runs", Item={"pk": {"S": str(poll)}})
            answer = streams.get_records(ShardIterator=iterator)
            read += len(answer["Records"])
            iterator = answer["NextShardIterator"]

        backend = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        assert len(backend.shard_iterators) <= KEPT_STREAM_ITERATORS + 1
        assert read == 16  # every record, once
