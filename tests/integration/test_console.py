"""The web console's files as the API function serves them (duetime.api.console): through the
real resolver that build_app makes, with API Gateway v2.0 events as for every route."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from duetime.api.app import build_app
from duetime.api.console import security_headers
from duetime.local.lambda_runtime import FakeContext
from duetime.settings import DEFAULT_CONSOLE_DIR, ApiSettings, ConsoleSettings
from tests.integration.conftest import Engine
from tests.integration.test_api import http_event

CSP_TOKEN = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Console:
    engine: Engine

    def get(self, path: str, settings: ConsoleSettings | None = None, **kw: Any) -> Answer:
        app = build_app(
            self.engine.parts.service, ApiSettings(console=settings or ConsoleSettings())
        )
        # No claims: API Gateway's console routes have no authorizer.
        event = http_event(kw.pop("method", "GET"), path, **kw)
        reply = app.resolve(event, FakeContext())
        raw = reply.get("body") or ""
        body = base64.b64decode(raw) if reply.get("isBase64Encoded") else raw.encode()
        return Answer(reply["statusCode"], dict(reply.get("headers") or {}), body)


@pytest.fixture
def console(engine: Engine) -> Console:
    return Console(engine)


@pytest.fixture
def site(tmp_path: Path) -> ConsoleSettings:
    """A console directory with a secret file beside it and one in a sub-directory."""
    root = tmp_path / "console"
    (root / "nested").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>t</title>")
    (root / "app.js").write_text("export const a = 1;\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (root / "nested" / "inner.js").write_text("export {};\n")
    # Hidden files, which the AWS package leaves out: served locally until 2026-11-30 (found
    # by an outside audit).
    (root / ".hidden.js").write_text("export const secret = 1;\n")
    (root / ".env.json").write_text('{"secret": true}')
    (tmp_path / "secret.json").write_text('{"secret": true}')
    (tmp_path / "pyproject.toml").write_text("[secret]")
    return ConsoleSettings(directory=root)


def test_the_repository_console_is_served_by_default_with_its_security_headers(
    console: Console,
) -> None:
    assert (DEFAULT_CONSOLE_DIR / "index.html").is_file()
    reply = console.get("/console/")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/html")
    assert b'<script type="module" src="/console/app.js">' in reply.body
    assert reply.headers["Content-Security-Policy"] == CSP_TOKEN
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert reply.headers["Referrer-Policy"] == "no-referrer"
    assert reply.headers["X-Frame-Options"] == "DENY"
    assert reply.headers["Strict-Transport-Security"] == "max-age=63072000"
    assert reply.headers["Cache-Control"] == "no-cache"


def test_console_without_a_slash_is_the_same_page(console: Console) -> None:
    # No redirect: API Gateway may or may not keep the slash; the page names its files by
    # absolute paths, so both addresses work.
    reply = console.get("/console")
    assert reply.status == 200
    assert reply.body == console.get("/console/").body
    assert reply.headers["Content-Security-Policy"] == CSP_TOKEN


def test_each_file_has_its_type_and_a_short_cache(console: Console, site: ConsoleSettings) -> None:
    script = console.get("/console/app.js", site)
    assert (script.status, script.body) == (200, b"export const a = 1;\n")
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert script.headers["Cache-Control"] == "public, max-age=300"
    image = console.get("/console/logo.png", site)
    assert (image.status, image.body) == (200, b"\x89PNG\r\n\x1a\n\x00\xff")
    assert image.headers["Content-Type"] == "image/png"


@pytest.mark.parametrize(
    "path",
    [
        "/console/..%2Fsecret.json",
        "/console/..%2Fpyproject.toml",
        "/console/%2E%2E%2Fsecret.json",
        "/console/..%5Csecret.json",
        "/console/../secret.json",
        "/console/nested%2Finner.js",
        "/console/nested/inner.js",
        "/console/nested",
        "/console/missing.js",
        "/console/.hidden.js",
        "/console/.env.json",
        "/console/%00app.js",
        "/console/a/b",
        "/console/x/",
        "/console//app.js",
        "/console/app.js/",
    ],
)
def test_nothing_outside_the_flat_directory_is_served(
    console: Console, site: ConsoleSettings, path: str
) -> None:
    reply = console.get(path, site)
    assert reply.status == 404
    assert reply.json()["error"]["code"] == "not_found"
    assert b"secret" not in reply.body.replace(b"secret.json", b"")
    # Every 404 of the console carries its security headers (found by an outside audit:
    # paths of two segments or more fell to the API's 404, without them)
    expected = security_headers(site)
    assert {name: reply.headers.get(name) for name in expected} == expected


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
def test_other_methods_are_refused(console: Console, site: ConsoleSettings, method: str) -> None:
    for path in ("/console", "/console/", "/console/app.js", "/console/missing.js"):
        reply = console.get(path, site, method=method)
        assert reply.status == 405
        assert reply.headers["Allow"] == "GET, HEAD"
        assert reply.json()["error"]["code"] == "method_not_allowed"


def test_without_a_console_directory_the_routes_are_not_found(
    console: Console, tmp_path: Path
) -> None:
    settings = ConsoleSettings(directory=tmp_path / "absent")
    assert console.get("/console/", settings).status == 404
    assert console.get("/console/app.js", settings).status == 404


def test_config_asks_for_a_token_by_default(console: Console) -> None:
    reply = console.get("/console/config.json")
    assert (reply.status, reply.json()) == (200, {"auth": "token"})
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.headers["Cache-Control"] == "no-cache"


def test_config_and_policy_name_the_issuer_with_a_client_id(console: Console) -> None:
    settings = ConsoleSettings.from_env(
        {
            "DUETIME_CONSOLE_CLIENT_ID": "console-client",
            "DUETIME_CONSOLE_ISSUER": "https://login.example.com/realms/ops",
            "DUETIME_CONSOLE_SCOPES": "openid  duetime/jobs",
        }
    )
    reply = console.get("/console/config.json", settings)
    assert reply.json() == {
        "auth": "oidc",
        "issuer": "https://login.example.com/realms/ops",
        "client_id": "console-client",
        "scopes": "openid duetime/jobs",
    }
    policy = reply.headers["Content-Security-Policy"]
    assert "connect-src 'self' https://login.example.com;" in policy
    assert "form-action 'self' https://login.example.com;" in policy


@pytest.mark.parametrize(
    ("issuer", "sources"),
    [
        # Cognito's token endpoint is the user pool's hosted domain, not the issuer's origin:
        # the sign-in's token request was blocked by the policy (found by review).
        (
            "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbC123",
            "'self' https://cognito-idp.eu-west-1.amazonaws.com "
            "https://*.auth.eu-west-1.amazoncognito.com",
        ),
        (
            "https://accounts.google.com",
            "'self' https://accounts.google.com https://oauth2.googleapis.com",
        ),
        ("https://tenant.eu.auth0.com/", "'self' https://tenant.eu.auth0.com"),
    ],
)
def test_the_policy_allows_the_providers_token_endpoint(
    console: Console, issuer: str, sources: str
) -> None:
    settings = ConsoleSettings(client_id="console-client", issuer=issuer)
    policy = console.get("/console/config.json", settings).headers["Content-Security-Policy"]
    assert f"connect-src {sources};" in policy
    assert f"form-action {sources};" in policy


def test_settings_from_the_environment() -> None:
    assert ConsoleSettings.from_env({}) == ConsoleSettings()
    assert ConsoleSettings.from_env({"DUETIME_CONSOLE_DIR": "/opt/console"}).directory == Path(
        "/opt/console"
    )
    with pytest.raises(RuntimeError, match="DUETIME_CONSOLE_ISSUER"):
        ConsoleSettings.from_env({"DUETIME_CONSOLE_CLIENT_ID": "x"})
    assert ApiSettings.from_env({}).console.scopes == "openid"


def test_the_console_routes_need_no_token_but_the_api_still_does(console: Console) -> None:
    assert console.get("/console/config.json").status == 200
    assert console.get("/jobs").status == 401
