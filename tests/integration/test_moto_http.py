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


def test_the_server_counts_the_requests_it_takes() -> None:
    from duetime.local.moto_http import MotoHttpServer

    server = MotoHttpServer("127.0.0.1", 0)
    server.start()
    try:
        host, port = server.address
        before = server.answered
        connection = http.client.HTTPConnection(host, port)
        for _ in range(3):
            connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
            connection.getresponse().read()
        connection.close()
        assert server.answered - before == 3
    finally:
        server.stop()
