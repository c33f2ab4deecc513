"""The local stack's moto server process (duetime.local.moto_process) and the SQS fixes it
applies (duetime.local.moto_sqs): it serves AWS calls, ends with its parent's pipe, refuses a
port in use with a clear error, and its SQS behaves as SQS does where moto 5.2 does not."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from duetime.local import moto_process


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process, url = moto_process.start("127.0.0.1", 0)
    try:
        yield process, url
    finally:
        moto_process.stop(process)


@pytest.fixture
def sqs(server: tuple[subprocess.Popen[str], str]) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=server[1],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _queue(sqs: Any, name: str) -> str:
    url: str = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    return url


def test_given_the_process_then_it_serves_aws_calls_until_stopped() -> None:
    process, url = moto_process.start("127.0.0.1", 0)
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert ddb.list_tables()["TableNames"] == []

    moto_process.stop(process)

    assert process.returncode == 0
    with pytest.raises(EndpointConnectionError):
        ddb.list_tables()


def test_given_a_port_in_use_then_start_fails_with_a_message_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(moto_process.MotoProcessError, match=f"cannot listen on .*:{port}"):
            moto_process.start("127.0.0.1", port)


def test_given_a_port_whose_last_connections_wait_in_time_wait_then_it_can_be_listened_on() -> None:
    # Found by an outside audit: after a clean stop, `duetime local` with the same
    # `--moto-port` was refused for a minute ("Address already in use"), nothing listening.
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server's side closes first: its end waits in TIME-WAIT
        client.close()
    assert moto_process.cannot_listen("127.0.0.1", port) is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert moto_process.cannot_listen("127.0.0.1", taken.getsockname()[1]) is not None


def test_given_concurrent_receivers_then_each_message_goes_to_one_of_them(sqs: Any) -> None:
    url = _queue(sqs, "one-receiver-each")
    for batch in range(20):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "MessageBody": f"{batch}-{i}"} for i in range(10)],
        )
    received: list[str] = []
    lock = threading.Lock()

    def receive() -> None:
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not got:
                return
            with lock:
                received.extend(m["Body"] for m in got)

    threads = [threading.Thread(target=receive) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(received) == 200
    assert len(set(received)) == 200


def test_given_a_delayed_message_then_a_long_poll_gets_it_when_its_delay_ends(
    sqs: Any,
) -> None:
    url = _queue(sqs, "delayed")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=2)
    sqs.send_message(QueueUrl=url, MessageBody="now")

    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in first] == ["now"]

    started = time.monotonic()
    second = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=10)
    waited = time.monotonic() - started

    assert [m["Body"] for m in second["Messages"]] == ["later"]
    # the long poll answers when the delay ends (~2 s), not at the end of its 10 s wait
    assert waited < 5


def test_given_a_received_message_then_it_is_invisible_until_its_visibility_timeout(
    sqs: Any,
) -> None:
    url = _queue(sqs, "in-flight")
    sqs.send_message(QueueUrl=url, MessageBody="once")
    got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"]

    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]

    assert [m["Body"] for m in again] == ["once"]
    assert again[0]["MessageId"] == got[0]["MessageId"]


def test_given_deletes_by_receipt_handle_then_they_remove_exactly_those_messages(sqs: Any) -> None:
    from botocore.exceptions import ClientError

    url = _queue(sqs, "deletes")
    for start in range(0, 30, 10):
        entries = [{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]

    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=batch[0]["ReceiptHandle"])  # again: no-op
    with pytest.raises(ClientError) as refused:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")

    assert len(deleted["Successful"]) == 10
    assert refused.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
    left = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        left += [m["Body"] for m in got]
    assert sorted(left + [m["Body"] for m in batch]) == sorted(f"m{n}" for n in range(30))
    assert len(left) == 20


def test_given_a_message_received_twice_then_either_handle_deletes_it(sqs: Any) -> None:
    url = _queue(sqs, "handles")
    sqs.send_message(QueueUrl=url, MessageBody="twice")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]
    second = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
    assert first["ReceiptHandle"] != second["ReceiptHandle"]

    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])  # the older one
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])  # gone: a no-op

    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert counts == dict.fromkeys(names, "0")  # neither waiting nor in flight: deleted


def test_given_waiting_messages_then_the_queue_answers_the_age_of_the_oldest_ready_one(
    sqs: Any,
) -> None:
    url = _queue(sqs, "age-of-oldest")

    def age() -> int:
        names = ["ApproximateAgeOfOldestMessage"]
        found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return int(found["ApproximateAgeOfOldestMessage"])

    assert age() == 0  # an empty queue
    before_send = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="ready")
    after_send = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    time.sleep(2.1)
    # The ready one has waited two seconds or more (whole seconds, floored; as long as this
    # machine took to ask); the delayed one does not count.
    before_ask = time.monotonic()
    waited = age()
    after_ask = time.monotonic()
    assert int(before_ask - after_send) <= waited <= int(after_ask - before_send)
    assert waited >= 2
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    assert age() == 0  # in flight: no longer waiting for a worker


def _authorization_headers(client: Any) -> list[str | None]:
    """The Authorization header of each request `client` sends from now on."""
    seen: list[str | None] = []

    def record(request: Any, **_: Any) -> None:
        value = request.headers.get("Authorization")
        seen.append(value.decode() if isinstance(value, bytes) else value)

    client.meta.events.register("before-send", record)
    return seen


def test_the_hot_paths_calls_go_unsigned_to_moto_and_reach_what_signed_calls_do(
    server: tuple[subprocess.Popen[str], str],
) -> None:
    """In moto's default region the local stack's DynamoDB and SQS calls are not signed
    (moto needs no signature: it is CPU saved on both sides); they reach the same account and
    region as signed calls. Other services, and another region, stay signed."""
    from duetime.local.endpoint import MOTO_DEFAULT_REGION, moto_session

    url = server[1]
    session = moto_session(MOTO_DEFAULT_REGION)
    ddb, sqs, s3 = (session.client(name, endpoint_url=url) for name in ("dynamodb", "sqs", "s3"))
    headers = {name: _authorization_headers(c) for name, c in (("ddb", ddb), ("sqs", sqs))}
    s3_headers = _authorization_headers(s3)

    ddb.create_table(
        TableName="unsigned",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    queue_url = sqs.create_queue(QueueName="unsigned")["QueueUrl"]
    s3.list_buckets()

    assert headers == {"ddb": [None], "sqs": [None]}
    assert s3_headers
    assert all((h or "").startswith("AWS4-HMAC-SHA256") for h in s3_headers)
    signed = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    assert "unsigned" in signed.client("dynamodb", endpoint_url=url).list_tables()["TableNames"]
    assert queue_url in signed.client("sqs", endpoint_url=url).list_queues()["QueueUrls"]

    elsewhere = moto_session("eu-west-1").client("dynamodb", endpoint_url=url)
    elsewhere_headers = _authorization_headers(elsewhere)
    assert "unsigned" not in elsewhere.list_tables()["TableNames"]  # its own region
    assert "/eu-west-1/dynamodb/" in (elsewhere_headers[0] or "")
    # A measurement of what a call costs on AWS signs every call.
    measured = moto_session(MOTO_DEFAULT_REGION, unsigned_hot_path=False)
    measured_ddb = measured.client("dynamodb", endpoint_url=url)
    measured_headers = _authorization_headers(measured_ddb)
    assert "unsigned" in measured_ddb.list_tables()["TableNames"]
    assert "/us-east-1/dynamodb/" in (measured_headers[0] or "")
