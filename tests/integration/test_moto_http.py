"""The local moto server's HTTP layer (duetime.local.moto_http): calls share a connection, an
answer is framed by its length, and what it does not keep alive it closes as before."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest

from duetime.local import moto_process

LIST_TABLES = {
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20261128/us-east-1/dynamodb/aws4_request",
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    process: subprocess.Popen[str]
    process, url = moto_process.start("127.0.0.1", 0)
    try:
        yield url
    finally:
        moto_process.stop(process)


def connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "", parts.port)


def client(url: str, service: str) -> Any:
    return boto3.client(
        service,  # type: ignore[call-overload]
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_calls_on_one_connection_are_all_answered_on_it(url: str) -> None:
    connection = connect(url)
    answers = []
    for _ in range(3):
        connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
        response = connection.getresponse()
        answers.append(
            (response.status, json.loads(response.read()), response.getheader("Connection"))
        )
        sock = connection.sock
    assert answers == [(200, {"TableNames": []}, None)] * 3
    assert connection.sock is sock  # never reconnected
    connection.close()


def test_a_chunked_request_is_answered_and_its_connection_closed(url: str) -> None:
    connection = connect(url)
    connection.request(
        "POST", "/", body=iter([b"{", b"}"]), headers=LIST_TABLES, encode_chunked=True
    )
    response = connection.getresponse()
    assert response.status == 200
    assert json.loads(response.read()) == {"TableNames": []}
    assert response.getheader("Connection") == "close"
    connection.close()


def test_an_s3_object_written_read_and_headed_keeps_its_length(url: str) -> None:
    s3 = client(url, "s3")
    s3.create_bucket(Bucket="moto-http")
    body = b"x" * 70_000
    s3.put_object(Bucket="moto-http", Key="k", Body=body)

    assert s3.head_object(Bucket="moto-http", Key="k")["ContentLength"] == len(body)
    assert s3.get_object(Bucket="moto-http", Key="k")["Body"].read() == body
    missing = client(url, "dynamodb")
    with pytest.raises(missing.exceptions.ResourceNotFoundException):
        missing.describe_table(TableName="none")  # an error answer, and the next call works
    assert missing.list_tables()["TableNames"] == []


def _request(target: str, body: dict[str, Any]) -> dict[str, Any]:
    """The WSGI environ of a JSON-protocol call, as the local stack's clients send it."""
    from werkzeug.test import EnvironBuilder

    return EnvironBuilder(
        method="POST",
        path="/",
        data=json.dumps(body),
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target},
    ).get_environ()


@pytest.mark.parametrize(
    ("target", "body", "service"),
    [
        ("DynamoDB_20120810.ListTables", {}, "dynamodb"),
        ("DynamoDB_20120810.DescribeTable", {"TableName": "none"}, "dynamodb"),
        ("DynamoDB_20120810.GetItem", {"TableName": "none", "Key": {"k": {"S": "x"}}}, "dynamodb"),
        ("DynamoDB_20120810.PutItem", {"TableName": "none", "Item": {"k": {"S": "x"}}}, "dynamodb"),
        ("AmazonSQS.ListQueues", {}, "sqs"),
        ("AmazonSQS.GetQueueUrl", {"QueueName": "none"}, "sqs"),
        ("AmazonSQS.SendMessage", {"QueueUrl": "none", "MessageBody": "x"}, "sqs"),
        ("DynamoDBStreams_20120810.ListStreams", {}, "dynamodbstreams"),
    ],
)
def test_a_hot_path_call_answered_directly_is_answered_as_moto_s_application_answers_it(
    target: str, body: dict[str, Any], service: str
) -> None:
    """The DynamoDB, Streams and SQS calls skip moto's Flask application (`_dispatch`): their
    status, body and content type are those of the application's answer, errors included."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from duetime.local.moto_http import _call, _dispatch, _handler

    handler = _handler(target)
    assert handler is not None
    # The application routes an unsigned call by its service's signing scope: give it one.
    scope = {"dynamodbstreams": "dynamodb"}.get(service, service)
    signed = _request(target, body)
    signed["HTTP_AUTHORIZATION"] = (
        f"AWS4-HMAC-SHA256 Credential=testing/20261128/us-east-1/{scope}/aws4_request, "
        "SignedHeaders=host, Signature=0"
    )
    app = DomainDispatcherApplication(create_backend_app)

    direct = _dispatch(handler, _request(target, body))
    through_app = _call(app, signed)

    assert direct[0] == through_app[0]
    assert json.loads(direct[2] or b"{}") == json.loads(through_app[2] or b"{}")
    content_type = {k.lower(): v for k, v in through_app[1]}["content-type"]
    assert {k.lower(): v for k, v in direct[1]}["content-type"] == content_type


def test_other_calls_have_no_direct_handler() -> None:
    from duetime.local.moto_http import _handler

    assert _handler("") is None
    assert _handler("AWSKMS.Decrypt") is None
    assert _handler("DynamoDB_20111205.ListTables") is None  # the old API: moto's app
