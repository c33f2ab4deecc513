"""The local emulator (`duetime local`'s moto server) holds every local tenant's jobs, their
targets' credentials and webhook secrets, with no authentication: a web page the developer
opens must not script it (by CORS, or by DNS rebinding), while the stack's AWS SDK calls go
on."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from duetime.local import moto_process
from tests.integration.test_moto_http import LIST_TABLES, client

PAGE = "https://evil.example"
SCAN = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.Scan"}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    process: subprocess.Popen[str]
    process, url = moto_process.start("127.0.0.1", 0)
    dynamodb = client(url, "dynamodb")
    dynamodb.create_table(
        TableName="jobs",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(
        TableName="jobs", Item={"pk": {"S": "t#1"}, "headers": {"S": "Bearer sk_live_SECRET"}}
    )
    try:
        yield url
    finally:
        moto_process.stop(process)


def ask(
    url: str, method: str, headers: dict[str, str], body: str = "", path: str = "/"
) -> tuple[int, dict[str, str], str]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path, body=body or None, headers=headers)
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
    finally:
        connection.close()


def test_given_a_web_page_s_preflight_then_it_is_refused_without_cors_headers(url: str) -> None:
    # moto's own CORS answered 200 and allowed the page's origin and X-Amz-Target.
    status, headers, _ = ask(
        url,
        "OPTIONS",
        {
            "Origin": PAGE,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-amz-target",
        },
    )
    assert status == 403
    assert not any(name.startswith("access-control-") for name in headers)


def test_given_a_web_page_s_call_then_it_reads_nothing(url: str) -> None:
    status, headers, body = ask(
        url, "POST", SCAN | {"Origin": PAGE}, json.dumps({"TableName": "jobs"})
    )
    assert status == 403
    assert "SECRET" not in body
    assert "access-control-allow-origin" not in headers


def test_given_a_rebound_host_name_then_the_call_is_refused(url: str) -> None:
    # A page at evil.example whose name was rebound to 127.0.0.1 is same-origin to the
    # browser: its requests name its own host.
    port = urlsplit(url).port
    status, _, body = ask(
        url, "POST", SCAN | {"Host": f"evil.example:{port}"}, json.dumps({"TableName": "jobs"})
    )
    assert status == 403
    assert "SECRET" not in body


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_given_an_sdk_call_naming_this_machine_then_it_is_answered(url: str, host: str) -> None:
    port = urlsplit(url).port
    status, _, body = ask(url, "POST", LIST_TABLES | {"Host": f"{host}:{port}"}, "{}")
    assert status == 200
    assert json.loads(body)["TableNames"] == ["jobs"]
    assert client(url, "dynamodb").scan(TableName="jobs")["Count"] == 1


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/moto-api/recorder/start-recording", {}),
        ("/moto-api/seed?a=42", {}),
        ("/moto-api/data.json", {}),
        ("/", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}),
    ],
    ids=["start-recording", "seed", "data", "a browser's"],
)
def test_given_a_page_s_plain_get_then_moto_s_own_api_and_any_browser_request_are_refused(
    url: str, path: str, headers: dict[str, str]
) -> None:
    # A plain cross-site GET (an <img>) carries no Origin: it started moto's recorder, which
    # wrote every later request body (targets' credentials, webhook secrets) to a file in
    # the developer's checkout, replayed them, or seeded moto's ids (an outside security
    # audit, round nine).
    status, headers_back, _ = ask(url, "GET", {"Host": urlsplit(url).netloc, **headers}, path=path)
    assert status == 403
    assert "access-control-allow-origin" not in headers_back
