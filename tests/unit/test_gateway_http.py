"""The local gateway's HTTP hygiene, with a stub API handler: request framing that two
readers could read differently is refused (400, the connection closed, the handler not
called), its own refusals have the API's error shape, and HEAD is passed through without a
body."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from duetime.local.gateway import MAX_BODY_BYTES, Gateway
from tests.unit.test_gateway import KEY, StubApi, api, call, gateway, token_for  # noqa: F401


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes
    after: bytes | None  # what came after the answer: b"" closed, None nothing (still open)

    @property
    def closed(self) -> bool:
        return self.after == b""

    def json(self) -> Any:
        return json.loads(self.body)


def send_raw(gateway: Gateway, head: str, body: bytes = b"") -> RawAnswer:  # noqa: F811
    """One request written byte for byte (duplicate headers and all), one answer read: its
    body as Content-Length says, none for HEAD."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        reader = sock.makefile("rb")
        status = int(reader.readline().split()[1])
        headers: dict[str, str] = {}
        while (line := reader.readline().strip()) != b"":
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head.startswith("HEAD ") else int(headers.get("content-length", "0"))
        data = reader.read(length)
        sock.settimeout(1)
        after: bytes | None
        try:
            after = reader.read1(1)
        except TimeoutError:
            after = None
        return RawAnswer(status, headers, data, after)


def post(*framing: str) -> str:
    lines = ["POST /jobs HTTP/1.1", "Host: x", f"Authorization: Bearer {token_for()}"]
    return "\n".join([*lines, "Content-Type: application/json", *framing]) + "\n"


CHUNKED_OK = b"2\r\n{}\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("framing", "body", "field"),
    [
        (["Content-Length: 2", "Content-Length: 5"], b"{}", "Content-Length"),
        (["Content-Length: 7", "Transfer-Encoding: chunked"], CHUNKED_OK, "Content-Length"),
        (["Transfer-Encoding: chunked", "Content-Length: 7"], CHUNKED_OK, "Content-Length"),
        (["Transfer-Encoding: gzip, chunked"], CHUNKED_OK, "Transfer-Encoding"),
        (["Transfer-Encoding: gzip"], b"{}", "Transfer-Encoding"),
        (["Transfer-Encoding: chunked, gzip"], CHUNKED_OK, "Transfer-Encoding"),
        (["Transfer-Encoding: chunked, chunked"], CHUNKED_OK, "Transfer-Encoding"),
        (
            ["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"],
            CHUNKED_OK,
            "Transfer-Encoding",
        ),
        (["Content-Length: 2, 5"], b"{}", "Content-Length"),
        (["Content-Length: -2"], b"{}", "Content-Length"),
        (["Transfer-Encoding: chunked"], b"zz\r\n{}\r\n0\r\n\r\n", "body"),
        (["Transfer-Encoding: chunked"], b"-1\r\n{}\r\n0\r\n\r\n", "body"),
        (["Transfer-Encoding: chunked"], b"0x2\r\n{}\r\n0\r\n\r\n", "body"),
        (["Transfer-Encoding: chunked"], b"+2\r\n{}\r\n0\r\n\r\n", "body"),
        (["Transfer-Encoding: chunked"], b"2\r\n{}xx\r\n0\r\n\r\n", "body"),
    ],
)
def test_given_ambiguous_or_malformed_framing_then_400_in_the_api_shape_and_the_connection_closes(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
    framing: list[str],
    body: bytes,
    field: str,
) -> None:
    answer = send_raw(gateway, post(*framing), body)

    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", field)
    assert error["message"]
    assert answer.headers["connection"] == "close"
    assert answer.closed
    assert api.events == []


@pytest.mark.parametrize(
    ("framing", "body"),
    [
        (["Content-Length: 2", "Content-Length: 2"], b"{}"),  # the same length twice: one length
        (["Transfer-Encoding: chunked"], CHUNKED_OK),
        (["Transfer-Encoding: Chunked"], b"1;ext=1\r\n{\r\n1\r\n}\r\n0\r\nX-Trailer: 1\r\n\r\n"),
    ],
)
def test_given_unambiguous_framing_then_the_body_reaches_the_handler(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
    framing: list[str],
    body: bytes,
) -> None:
    answer = send_raw(gateway, post(*framing, "Connection: close"), body)

    assert answer.status == 200
    (event,) = api.events
    assert event["body"] == "{}"


def test_given_a_body_over_the_limit_then_413_names_the_body(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    chunked = send_raw(
        gateway, post("Transfer-Encoding: chunked"), f"{MAX_BODY_BYTES + 1:x}\r\n".encode()
    )
    sized = call(gateway, "POST", "/jobs", body=b"x" * (MAX_BODY_BYTES + 1), token=token_for())

    for status, error in ((chunked.status, chunked.json()), (sized.status, sized.json())):
        assert status == 413
        assert error["error"]["code"] == "payload_too_large"
        assert error["error"]["field"] == "body"
    assert api.events == []


# --- bodies that do not arrive ---------------------------------------------------------------


@pytest.fixture
def impatient(api: StubApi) -> Iterator[Gateway]:  # noqa: F811
    """A gateway that waits 1 s for the rest of a request (60 s by default)."""
    with Gateway(api, KEY, port=0, read_timeout_seconds=1) as running:
        yield running


def test_given_a_body_that_stops_coming_then_the_connection_is_closed_within_the_timeout(
    impatient: Gateway,
    api: StubApi,  # noqa: F811
) -> None:
    # Found by an outside audit: a Content-Length with no body held a gateway thread for as
    # long as the client kept the connection open.
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", impatient.port), timeout=10) as sock:
        sock.sendall(post("Content-Length: 10").replace("\n", "\r\n").encode() + b"\r\n{}")
        assert sock.recv(1) == b""  # closed, unanswered: the request never ended
    assert time.monotonic() - started < 5
    assert api.events == []


def test_given_a_request_dripping_a_byte_at_a_time_then_it_is_closed_at_the_timeout(
    impatient: Gateway,
    api: StubApi,  # noqa: F811
) -> None:
    # Found by an outside audit: the timeout was per read, so a client sending a byte every
    # 50 s held a gateway thread (and its connection) for as long as it liked.
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", impatient.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nX-Drip: ")
        closed = False
        while time.monotonic() - started < 5 and not closed:
            try:
                sock.sendall(b"a")
                sock.settimeout(0.2)
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue  # still open
            except OSError:
                closed = True
    assert closed
    assert time.monotonic() - started < 3  # the whole request had 1 s
    assert api.events == []


def test_given_a_body_shorter_than_its_length_then_400_and_the_handler_is_not_called(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(post("Content-Length: 10").replace("\n", "\r\n").encode() + b"\r\n{}")
        sock.shutdown(socket.SHUT_WR)  # the client's end of the body: 2 bytes of 10
        answer = sock.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b'"field": "body"' in answer or b'"field":"body"' in answer
    assert api.events == []


def test_given_a_length_of_thousands_of_digits_then_413_not_a_failure(
    impatient: Gateway,
    api: StubApi,  # noqa: F811
) -> None:
    answer = send_raw(impatient, post("Content-Length: " + "9" * 5_000), b"{}")

    assert answer.status == 413
    assert answer.json()["error"]["field"] == "body"
    assert api.events == []


# --- HEAD ------------------------------------------------------------------------------------


def assert_next_answer_whole(
    connection: http.client.HTTPConnection,
    api: StubApi,  # noqa: F811
) -> None:
    """Nothing was written after the last answer's headers: the next one on the connection
    is read whole."""
    api.response = {"statusCode": 200, "headers": {}, "body": '{"next":true}'}
    connection.request("GET", "/health")
    following = connection.getresponse()
    assert (following.status, following.read()) == (200, b'{"next":true}')


def test_given_head_then_the_handlers_length_is_sent_and_no_body(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    # The API answers HEAD without the body, with the length its GET body has.
    api.response = {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json", "Content-Length": "123", "ETag": '"4"'},
        "body": "",
    }
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:
        connection.request("HEAD", "/jobs", headers={"Authorization": f"Bearer {token_for()}"})
        head = connection.getresponse()
        assert (head.status, head.read()) == (200, b"")
        assert head.headers["Content-Length"] == "123"
        assert head.headers["ETag"] == '"4"'
        assert_next_answer_whole(connection, api)
    finally:
        connection.close()
    assert [e["requestContext"]["http"]["method"] for e in api.events] == ["HEAD", "GET"]


def test_given_head_and_a_handler_that_sends_a_body_anyway_then_it_is_not_written(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    answer = send_raw(gateway, "HEAD /health HTTP/1.1\nHost: x\n")

    assert answer.status == 200
    assert answer.headers["content-length"] == str(len('{"ok":true}'))
    assert (answer.body, answer.after) == (b"", None)  # no byte after the headers


def test_given_head_on_a_job_route_without_a_token_then_401_without_body(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    answer = send_raw(gateway, "HEAD /jobs HTTP/1.1\nHost: x\n")

    assert answer.status == 401
    assert int(answer.headers["content-length"]) > 0
    assert (answer.body, answer.after) == (b"", None)  # no byte after the headers
    assert api.events == []


@pytest.mark.parametrize(
    ("head", "status", "code"),
    [
        ("GET /health HTTP/9.9\nHost: x\n", 400, "invalid"),  # was a 505
        ("GET /health HTTP/1.1\nX-Long: " + "a" * 70_000 + "\n", 431, "payload_too_large"),
        (
            "GET /health HTTP/1.1\n" + "".join(f"X-{i}: v\n" for i in range(101)),
            431,
            "payload_too_large",
        ),
    ],
)
def test_given_a_request_http_server_refuses_itself_then_4xx_in_the_api_shape(
    gateway: Gateway,  # noqa: F811
    head: str,
    status: int,
    code: str,
) -> None:
    # http.server answered these with its HTML page (found by an outside audit).
    answer = send_raw(gateway, head)
    assert answer.status == status
    assert answer.headers["content-type"] == "application/json"
    # As every answer of the API (found by an outside audit: the gateway's own had no nosniff)
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cache-control"] == "no-store"
    assert answer.json()["error"]["code"] == code
    assert answer.closed


def test_given_clients_gone_before_their_answer_then_nothing_reaches_the_terminal(
    gateway: Gateway,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            sock.sendall(b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    time.sleep(0.5)
    assert send_raw(gateway, "GET /health HTTP/1.1\nHost: x\n").status == 200
    assert "Traceback" not in capfd.readouterr().err


def test_given_a_keep_alive_connection_when_the_gateway_stops_then_it_answers_503_and_closes(
    api: StubApi,  # noqa: F811
) -> None:
    # Found by an outside audit: a connection open before the stop was still served, so jobs
    # created after Ctrl-C were answered 201 and never ran (the stack was going away).
    gateway = Gateway(api, KEY, port=0)  # noqa: F811
    gateway.start()
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    headers = {"Authorization": f"Bearer {token_for()}"}
    connection.request("POST", "/jobs", body=b"{}", headers=headers)
    assert connection.getresponse().read() == b'{"ok":true}'
    gateway.stop()

    connection.request("POST", "/jobs", body=b"{}", headers=headers)
    answer = connection.getresponse()
    body = json.loads(answer.read())
    assert (answer.status, body["error"]["code"]) == (503, "unavailable")
    assert answer.getheader("connection") == "close"
    assert len(api.events) == 1  # the handler never saw the second
    connection.close()


def test_given_a_path_with_leading_slashes_then_the_handler_gets_it_as_sent(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    # Python's HTTP server collapses `//jobs` into `/jobs`: the gateway served it as the jobs
    # route, where a path that is no route is a 404 (found by a contract audit).
    answer = send_raw(gateway, f"GET //jobs?limit=1 HTTP/1.1\nHost: x\n{post().splitlines()[2]}\n")

    assert answer.status == 200  # the stub's answer
    (event,) = api.events
    assert (event["rawPath"], event["rawQueryString"]) == ("//jobs", "limit=1")


def test_given_a_malformed_header_line_then_400_naming_the_headers(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    # A space before the colon: Python's parser dropped it and every header after it, an
    # If-Match included (a stale PATCH went through; found by a contract audit, round two).
    head = f'PATCH /jobs/x HTTP/1.1\nHost: x\nX-A : 1\nIf-Match: "1"\n{post().splitlines()[2]}\n'
    answer = send_raw(gateway, head)

    assert answer.status == 400
    assert answer.json()["error"]["field"] == "headers"
    assert answer.closed
    assert api.events == []


@pytest.mark.parametrize("method", ["get", "M-SEARCH", "VERSION-CONTROL"])
def test_given_any_method_token_then_it_reaches_the_api(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
    method: str,
) -> None:
    # (They were a 400 `invalid`; the API answers a method a path lacks with 405 and Allow.)
    answer = send_raw(gateway, f"{method} /jobs HTTP/1.1\nHost: x\n{post().splitlines()[2]}\n")

    assert answer.status == 200  # the stub's answer
    assert [e["requestContext"]["http"]["method"] for e in api.events] == [method]


def test_given_a_304_then_no_length_and_no_body_and_the_connection_goes_on(
    gateway: Gateway,  # noqa: F811
    api: StubApi,  # noqa: F811
) -> None:
    api.response = {"statusCode": 304, "headers": {"ETag": '"4"'}, "body": ""}
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:
        connection.request("GET", "/jobs", headers={"Authorization": f"Bearer {token_for()}"})
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (304, b"")
        assert answer.headers["ETag"] == '"4"'
        assert "Content-Length" not in answer.headers
        assert_next_answer_whole(connection, api)
    finally:
        connection.close()
