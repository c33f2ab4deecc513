"""A tiny OpenID provider for the console's sign-in tests: authorization code + PKCE (S256),
on 127.0.0.1 at a free port, with no login page (`/authorize` answers at once).

- `GET /.well-known/openid-configuration`: issuer, authorization_endpoint, token_endpoint;
- `GET /authorize`: checks response_type=code, the client id, the registered redirect URI,
  code_challenge_method=S256 and a state; remembers the challenge under a new code and
  redirects to `redirect_uri?code=...&state=...` (`tamper_state`: with another state);
- `POST /token` (form): grant_type=authorization_code, the code (once only), the same redirect
  URI and client id, and a code_verifier with BASE64URL(SHA256(verifier)) == the challenge;
  answers `{"access_token": token(), "id_token": ..., "token_type": "Bearer", "expires_in":
  ...}`;
- `GET /logout` (its `end_session_endpoint`): records the parameters and redirects to the
  registered URI when `post_logout_redirect_uri` is it.

Discovery and token answers carry CORS headers for the console's origin, as an identity
provider that serves single-page apps does. What it saw is kept in `authorizations` and
`exchanges` for the tests to check.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

EXPIRES_IN = 3600


@dataclass
class Authorization:
    """One `/authorize` request as the provider saw it."""

    params: dict[str, str]
    code: str


@dataclass
class Exchange:
    """One `/token` request: its form, and whether the provider granted a token."""

    form: dict[str, str]
    granted: bool
    reason: str = ""
    access_token: str = ""  # the token handed out, if granted


@dataclass
class FakeIdp:
    client_id: str
    redirect_uri: str  # the one registered redirect URI (the console's address)
    origin: str  # the console's origin, allowed by CORS
    token: Callable[[], str]  # the access token it hands out
    url: str = ""
    tamper_state: bool = False
    issuer: str = ""  # the issuer its discovery document names ("": its own URL)
    authorizations: list[Authorization] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    logouts: list[dict[str, str]] = field(default_factory=list)  # GET /logout's parameters
    id_tokens: list[str] = field(default_factory=list)  # the id tokens handed out
    _challenges: dict[str, tuple[str, str]] = field(default_factory=dict)  # code: challenge, uri
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorize(self, params: dict[str, str]) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) for GET /authorize."""
        problems = [
            name
            for name, ok in (
                ("response_type", params.get("response_type") == "code"),
                ("client_id", params.get("client_id") == self.client_id),
                ("redirect_uri", params.get("redirect_uri") == self.redirect_uri),
                ("code_challenge_method", params.get("code_challenge_method") == "S256"),
                ("code_challenge", len(params.get("code_challenge", "")) >= 43),
                ("state", bool(params.get("state"))),
            )
            if not ok
        ]
        if problems:  # a real provider shows an error page, never redirects to an unknown URI
            return 400, {"Content-Type": "text/plain"}, f"bad request: {', '.join(problems)}"
        code = secrets.token_urlsafe(24)
        state = "tampered-" + params["state"] if self.tamper_state else params["state"]
        with self._lock:
            self.authorizations.append(Authorization(dict(params), code))
            self._challenges[code] = (params["code_challenge"], params["redirect_uri"])
        location = f"{params['redirect_uri']}?{urlencode({'code': code, 'state': state})}"
        return 302, {"Location": location}, ""

    def exchange(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """(status, JSON) for POST /token."""
        with self._lock:
            found = self._challenges.pop(form.get("code", ""), None)  # a code works once
        reason = ""
        if form.get("grant_type") != "authorization_code":
            reason = "unsupported_grant_type"
        elif form.get("client_id") != self.client_id:
            reason = "invalid_client"
        elif found is None:
            reason = "invalid_grant: unknown or used code"
        elif form.get("redirect_uri") != found[1]:
            reason = "invalid_grant: redirect_uri differs"
        elif s256(form.get("code_verifier", "")) != found[0]:
            reason = "invalid_grant: code_verifier does not match the challenge"
        token = "" if reason else self.token()
        with self._lock:
            self.exchanges.append(Exchange(dict(form), not reason, reason, token))
        if reason:
            return 400, {"error": reason.split(":")[0], "error_description": reason}
        id_token = f"id-{secrets.token_urlsafe(12)}"  # (not a JWT: the console only hands it back)
        with self._lock:
            self.id_tokens.append(id_token)
        return 200, {
            "access_token": token,
            "id_token": id_token,
            "token_type": "Bearer",
            "expires_in": EXPIRES_IN,
        }

    def logout(self, params: dict[str, str]) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) for GET /logout (RP-initiated logout): back to the
        registered URI only."""
        with self._lock:
            self.logouts.append(dict(params))
        if params.get("post_logout_redirect_uri") != self.redirect_uri:
            return 400, {"Content-Type": "text/plain"}, "bad request: post_logout_redirect_uri"
        return 302, {"Location": self.redirect_uri}, ""

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer or self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "end_session_endpoint": f"{self.url}/logout",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        }


def s256(verifier: str) -> str:
    """BASE64URL(SHA256(ASCII(verifier))) without padding (RFC 7636, 4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@contextmanager
def running(idp: FakeIdp) -> Iterator[FakeIdp]:
    """Serves `idp` on 127.0.0.1 at a free port (sets `idp.url`) until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/.well-known/openid-configuration":
                self._json(200, idp.discovery())
            elif url.path in ("/authorize", "/logout"):
                params = {k: v[-1] for k, v in parse_qs(url.query).items()}
                answer = idp.authorize if url.path == "/authorize" else idp.logout
                status, headers, body = answer(params)
                self._send(status, headers, body.encode())
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/token":
                self._json(404, {"error": "not_found"})
                return
            body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
            form = {k: v[-1] for k, v in parse_qs(body).items()}
            self._json(*idp.exchange(form))

        def do_OPTIONS(self) -> None:  # a CORS preflight
            self._send(204, {"Access-Control-Allow-Headers": "Content-Type"}, b"")

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._send(status, {"Content-Type": "application/json"}, json.dumps(body).encode())

        def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            headers = {
                "Access-Control-Allow-Origin": idp.origin,
                "Access-Control-Allow-Methods": "GET, POST",
                "Cache-Control": "no-store",
                "Content-Length": str(len(body)),
                **headers,
            }
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    idp.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="fake-idp", daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        server.shutdown()
        server.server_close()
