"""The local API gateway and its dev keys, with a stub API handler: the v2.0 event it builds,
the JWT authorizer's refusals, the size limit and handler failures."""

from __future__ import annotations

import base64
import http.client
import json
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest

from duetime.cli.main import main
from duetime.local.gateway import MAX_BODY_BYTES, Gateway
from duetime.local.keys import (
    AUDIENCE,
    ISSUER,
    InvalidToken,
    issue_token,
    load_or_create_key,
    verify_token,
)

KEY = b"k" * 48


@dataclass
class StubApi:
    """Records each event; answers with `response` (or raises it if it is an exception)."""

    response: Any = field(
        default_factory=lambda: {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json"},
            "body": '{"ok":true}',
        }
    )
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        assert context.get_remaining_time_in_millis() > 0
        with self.lock:
            self.events.append(event)
        if isinstance(self.response, Exception):
            raise self.response
        return self.response


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.fixture
def api() -> StubApi:
    return StubApi()


@pytest.fixture
def gateway(api: StubApi) -> Iterator[Gateway]:
    with Gateway(api, KEY, port=0) as running:
        yield running


def call(
    gateway: Gateway,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    token: str | None = None,
) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        connection.request(method, path, body=body, headers=all_headers)
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        connection.close()


def token_for(tenant: str = "tenant-a", **overrides: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": tenant, "iat": now, "exp": now + 60}
    claims.update(overrides)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, KEY, algorithm="HS256")


def test_given_a_valid_token_when_a_request_arrives_then_the_handler_gets_a_v2_event(
    gateway: Gateway, api: StubApi
) -> None:
    before_ms = time.time_ns() // 1_000_000
    answer = call(
        gateway,
        "POST",
        "/jobs?status=scheduled&limit=5&tag=a&tag=b",
        body=b'{"schedule": {"delay_seconds": 2}}',
        headers={"Content-Type": "application/json", "X-Trace": "abc", "Cookie": "a=1; b=2"},
        token=issue_token("tenant-a", 60, KEY, scopes=("jobs/write",)),
    )

    assert answer.status == 200
    assert answer.json() == {"ok": True}
    (event,) = api.events
    assert event["version"] == "2.0"
    assert event["routeKey"] == "$default"
    assert event["rawPath"] == "/jobs"
    assert event["rawQueryString"] == "status=scheduled&limit=5&tag=a&tag=b"
    assert event["queryStringParameters"] == {"status": "scheduled", "limit": "5", "tag": "a,b"}
    assert "pathParameters" not in event  # the resolver matches /jobs/{id} itself
    assert event["headers"]["content-type"] == "application/json"
    assert event["headers"]["x-trace"] == "abc"
    assert all(name == name.lower() for name in event["headers"])
    assert event["cookies"] == ["a=1", "b=2"]
    assert json.loads(event["body"]) == {"schedule": {"delay_seconds": 2}}
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["http"]["method"] == "POST"
    assert context["http"]["path"] == "/jobs"
    assert context["http"]["sourceIp"] == "127.0.0.1"
    assert context["stage"] == "$default"
    assert context["requestId"]
    assert before_ms <= context["timeEpoch"] <= time.time_ns() // 1_000_000
    claims = context["authorizer"]["jwt"]["claims"]
    assert claims["sub"] == "tenant-a"
    assert claims["iss"] == ISSUER
    assert isinstance(claims["exp"], str)  # API Gateway passes claims as strings
    assert context["authorizer"]["jwt"]["scopes"] == ["jobs/write"]
    assert answer.headers["apigw-requestid"] == context["requestId"]


def test_given_a_null_claim_then_the_event_leaves_it_out(gateway: Gateway, api: StubApi) -> None:
    # (An outside audit: a tenant claim of JSON null reached the API as the tenant "None".)
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u", "tenant": None, "iat": now, "exp": now + 60}
    answer = call(gateway, "GET", "/jobs", token=jwt.encode(body, KEY, algorithm="HS256"))

    assert answer.status == 200
    (event,) = api.events
    assert "tenant" not in event["requestContext"]["authorizer"]["jwt"]["claims"]


def test_given_a_binary_body_then_the_event_carries_it_base64_encoded(
    gateway: Gateway, api: StubApi
) -> None:
    payload = bytes(range(256))
    call(
        gateway,
        "PUT",
        "/blob",
        body=payload,
        headers={"Content-Type": "application/octet-stream"},
        token=token_for(),
    )

    (event,) = api.events
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == payload


def test_given_a_handler_response_then_status_headers_cookies_and_body_are_written_back(
    gateway: Gateway, api: StubApi
) -> None:
    api.response = {
        "statusCode": 201,
        "headers": {"Content-Type": "image/png", "Location": "/jobs/1"},
        "cookies": ["session=1; HttpOnly", "theme=dark"],
        "body": base64.b64encode(b"\x89PNG\x00").decode(),
        "isBase64Encoded": True,
    }

    answer = call(gateway, "POST", "/jobs", body=b"{}", token=token_for())

    assert answer.status == 201
    assert answer.headers["Location"] == "/jobs/1"
    assert answer.headers.get_all("Set-Cookie") == ["session=1; HttpOnly", "theme=dark"]
    assert answer.body == b"\x89PNG\x00"


# Tokens are made when the test runs (not at collection): a valid exp must still be valid then.
REFUSED: dict[str, tuple[Callable[[], str | None], str]] = {
    "missing": (lambda: None, "missing bearer token"),
    "not-bearer": (lambda: "Basic dXNlcjpwYXNz", "must be 'Bearer <token>'"),
    "bad-signature": (
        lambda: "Bearer " + jwt.encode({"sub": "x"}, b"z" * 48, algorithm="HS256"),
        # What to do, too (a new user's token made in another directory had no hint).
        "signature does not match the local key: it was made with another key; run `duetime"
        " token` where `duetime local` runs, or give both the same --state-dir",
    ),
    "expired": (lambda: "Bearer " + token_for(exp=int(time.time()) - 5), "expired"),
    "audience": (lambda: "Bearer " + token_for(aud="someone-else"), "audience"),
    "issuer": (lambda: "Bearer " + token_for(iss="https://idp.example.com"), "issuer"),
    "no-exp": (lambda: "Bearer " + token_for(exp=None), "'exp'"),
    "junk": (lambda: "Bearer not-a-jwt", "invalid token"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_given_no_valid_token_then_401_and_the_handler_is_not_called(
    gateway: Gateway, api: StubApi, case: str
) -> None:
    make_header, reason = REFUSED[case]
    header = make_header()

    answer = call(gateway, "GET", "/jobs", headers={"Authorization": header} if header else {})

    assert answer.status == 401
    error = answer.json()["error"]
    assert error["code"] == "unauthorized"
    assert reason in error["message"]
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Cache-Control"] == "no-store"  # as every answer of the API
    assert api.events == []


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("path", ["/health", "/openapi.json", "/console/", "/console/app.js"])
def test_given_a_public_route_then_it_needs_no_token(
    gateway: Gateway, api: StubApi, path: str, method: str
) -> None:
    answer = call(gateway, method, path)

    assert answer.status == 200
    (event,) = api.events
    assert event["routeKey"] == f"{method} {path}"
    assert "authorizer" not in event["requestContext"]


def test_given_a_post_to_a_public_path_then_it_still_needs_a_token(
    gateway: Gateway, api: StubApi
) -> None:
    assert call(gateway, "POST", "/health", body=b"{}").status == 401
    assert api.events == []


def test_given_a_body_over_1_mib_then_413_and_the_handler_is_not_called(
    gateway: Gateway, api: StubApi
) -> None:
    answer = call(gateway, "POST", "/jobs", body=b"x" * (MAX_BODY_BYTES + 1), token=token_for())

    assert answer.status == 413
    assert answer.json()["error"]["code"] == "payload_too_large"
    assert answer.headers["Cache-Control"] == "no-store"
    assert api.events == []


def test_given_a_body_of_exactly_1_mib_then_it_is_passed_on(gateway: Gateway, api: StubApi) -> None:
    answer = call(gateway, "POST", "/jobs", body=b"x" * MAX_BODY_BYTES, token=token_for())

    assert answer.status == 200
    assert len(api.events[0]["body"]) == MAX_BODY_BYTES


def test_given_a_handler_that_raises_then_500_json_and_the_error_is_logged(
    gateway: Gateway, api: StubApi, caplog: pytest.LogCaptureFixture
) -> None:
    api.response = RuntimeError("boom in the handler")

    answer = call(gateway, "GET", "/jobs", token=token_for())

    assert answer.status == 500
    assert answer.json() == {"error": {"code": "internal", "message": "internal error"}}
    (logged,) = [r for r in caplog.records if r.getMessage() == "API handler failed"]
    assert logged.levelname == "ERROR"
    assert logged.exc_info is not None
    assert str(logged.exc_info[1]) == "boom in the handler"


def test_given_a_keep_alive_connection_then_it_serves_several_requests(
    gateway: Gateway, api: StubApi
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:
        for _ in range(3):
            connection.request("GET", "/health")
            response = connection.getresponse()
            assert response.status == 200
            response.read()
    finally:
        connection.close()
    assert len(api.events) == 3


# --- keys ------------------------------------------------------------------------------------


def test_given_no_key_yet_then_it_is_created_private_and_then_reused(tmp_path: Path) -> None:
    state = tmp_path / "state"

    key, created = load_or_create_key(state)
    again, created_again = load_or_create_key(state)

    assert created is True
    assert created_again is False
    assert again == key
    assert len(key) >= 32
    mode = stat.S_IMODE((state / "jwt-hs256.key").stat().st_mode)
    assert mode == 0o600


def test_given_an_issued_token_then_it_verifies_with_the_tenant_as_sub() -> None:
    claims = verify_token(issue_token("tenant-b", 300, KEY), KEY)

    assert claims["sub"] == "tenant-b"
    assert claims["iss"] == ISSUER
    assert claims["aud"] == AUDIENCE
    assert claims["exp"] - claims["iat"] == 300


def test_given_an_expired_token_then_verification_says_so() -> None:
    token = issue_token("tenant-b", 10, KEY, now=int(time.time()) - 60)

    with pytest.raises(InvalidToken, match="expired"):
        verify_token(token, KEY)


@pytest.mark.parametrize(
    "claims", [{"exp": "9999999999"}, {"exp": True}, {"nbf": "0"}, {"iat": [1]}, {"exp": None}]
)
def test_given_a_time_claim_that_is_no_number_then_the_token_is_refused(
    claims: dict[str, Any],
) -> None:
    # RFC 7519: exp, nbf and iat are NumericDates (JSON numbers); found by an outside audit,
    # a numeric string was taken
    now = int(time.time())
    body = {"sub": "tenant-b", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 60}
    token = jwt.encode(body | claims, KEY, algorithm="HS256")

    with pytest.raises(InvalidToken):
        verify_token(token, KEY)


def test_given_a_fractional_expiry_then_the_token_is_taken() -> None:
    now = time.time()
    body = {"sub": "tenant-b", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60.5}
    assert verify_token(jwt.encode(body, KEY, algorithm="HS256"), KEY)["exp"] == now + 60.5


@pytest.mark.parametrize("tenant", ["", "with space", "x" * 129])
def test_given_an_unusable_tenant_then_no_token_is_issued(tenant: str) -> None:
    with pytest.raises(ValueError, match="tenant"):
        issue_token(tenant, 60, KEY)


def test_given_the_token_command_then_it_prints_a_token_for_the_state_dir_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["token", "--tenant", "tenant-c", "--state-dir", str(tmp_path / "s")])

    out, err = capsys.readouterr()
    assert code == 0
    key, created = load_or_create_key(tmp_path / "s")
    assert created is False
    assert verify_token(out.strip(), key)["sub"] == "tenant-c"
    assert "created the local signing key" in err


@pytest.mark.parametrize("tenant", ["two words", "[acme]"])
def test_given_a_bad_tenant_then_the_token_command_explains_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tenant: str
) -> None:
    # (A tenant in brackets reads as a list claim, which the API refuses: since 2026-11-30.)
    code = main(["token", "--tenant", tenant, "--state-dir", str(tmp_path)])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("duetime: the tenant must be")


@pytest.mark.parametrize("method", ["TRACE", "QUERY", "PROPFIND"])
def test_given_any_method_then_it_reaches_the_api_like_behind_api_gateway(
    gateway: Gateway, api: StubApi, method: str
) -> None:
    answer = call(gateway, method, "/jobs", token=token_for())
    assert answer.status == 200
    assert api.events[-1]["requestContext"]["http"]["method"] == method
