"""The web console's static files, served by the API function itself (same origin as the API,
locally and on AWS): docs/console.md.

- `GET /console/` and `GET /console` → index.html (no redirect: whether API Gateway keeps a
  trailing slash must not matter; the page names its files by absolute paths);
- `GET /console/<file>`: a file of the flat console directory, looked up by name among the
  files the directory holds (never joined to a path: `..`, `%2F` or a sub-directory is simply
  not one of them, so a 404), with a content type from a short allow-list of suffixes;
- `GET /console/config.json`: generated from ConsoleSettings (token paste, or OpenID Connect);
- `HEAD` as `GET` without the body (duetime.api.routing); any other method on these paths:
  405 (`Allow: GET, HEAD`; `methods_on`, answered by the API's not-found handler), TRACE
  and methods HTTP does not define included. No JWT (the API Gateway route has no
  authorizer): the files hold no data; everything the console shows comes from the API with
  the user's token.

Every file and 404 the console answers carries its Content-Security-Policy and security
headers (a 405 is the API's JSON error, with none: it is no page).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from duetime.settings import ConsoleSettings

PREFIX = "/console"
CONFIG_FILE = "config.json"
INDEX_FILE = "index.html"
CONTENT_TYPES: Mapping[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}
_TEXT_SUFFIXES = frozenset({".html", ".js", ".css", ".svg", ".json"})
# Files change only with a deployment, and their names carry no hash (no build step): a
# short max-age keeps a new version minutes away; index.html and config.json revalidate.
ASSET_CACHE = "public, max-age=300"
NO_CACHE = "no-cache"
_METHODS = ["GET", "HEAD"]


def content_security_policy(settings: ConsoleSettings) -> str:
    """Only the console's own files and the API (same origin); the identity provider's origin
    too when the console signs in with OpenID Connect (discovery and token requests are
    fetches, the authorization request a navigation)."""
    issuer = _origin(settings.issuer) if settings.client_id and settings.issuer else ""
    extra = "".join(f" {origin}" for origin in _provider_origins(issuer))
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'{extra}; form-action 'self'{extra}; base-uri 'none'; "
        "frame-ancestors 'none'"
    )


def security_headers(settings: ConsoleSettings) -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(settings),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Strict-Transport-Security": "max-age=63072000",
    }


def config_json(settings: ConsoleSettings) -> dict[str, str]:
    """What the console reads first: how to sign in."""
    if settings.client_id and settings.issuer:
        return {
            "auth": "oidc",
            "issuer": settings.issuer,
            "client_id": settings.client_id,
            "scopes": settings.scopes,
        }
    return {"auth": "token"}


def console_file(directory: Path, name: str) -> Path | None:
    """The file `name` of the flat console directory, or None. The name is compared with the
    directory's listing, so no request can name anything outside it. Hidden files are not
    served, as the AWS package leaves them out."""
    if Path(name).suffix not in CONTENT_TYPES or name.startswith("."):
        return None
    try:
        entries = {entry.name: entry for entry in directory.iterdir()}
    except OSError:  # no console directory: no console
        return None
    found = entries.get(name)
    return found if found is not None and found.is_file() and not found.is_symlink() else None


def register(app: APIGatewayHttpResolver, settings: ConsoleSettings) -> None:
    """Adds the console's routes to `app` (not in ROUTES nor the OpenAPI document: they are
    not part of the API)."""
    headers = security_headers(settings)

    def answer(
        status: HTTPStatus, content_type: str, body: str | bytes, extra: Mapping[str, str]
    ) -> Response[Any]:
        return Response(status.value, content_type, body, headers={**headers, **extra})

    def error(status: HTTPStatus, code: str, message: str, **extra: str) -> Response[Any]:
        body = json.dumps({"error": {"code": code, "message": message}})
        return answer(status, "application/json", body, {"Cache-Control": NO_CACHE, **extra})

    def file_answer(name: str) -> Response[Any]:
        if name == CONFIG_FILE:
            config = json.dumps(config_json(settings))
            return answer(
                HTTPStatus.OK, CONTENT_TYPES[".json"], config, {"Cache-Control": NO_CACHE}
            )
        found = console_file(settings.directory, name)
        if found is None:
            return error(HTTPStatus.NOT_FOUND, "not_found", f"no console file {name[:100]!r}")
        suffix = found.suffix
        data = found.read_bytes()
        cache = NO_CACHE if name == INDEX_FILE else ASSET_CACHE
        body: str | bytes = data.decode() if suffix in _TEXT_SUFFIXES else data
        return answer(HTTPStatus.OK, CONTENT_TYPES[suffix], body, {"Cache-Control": cache})

    # Powertools strips a trailing "/" from a rule: "/console/?" is the one rule for both.
    @app.route(f"{PREFIX}/?", _METHODS)
    def index() -> Response[Any]:
        return file_answer(INDEX_FILE)

    @app.route(f"{PREFIX}/<name>", _METHODS)
    def static(name: str) -> Response[Any]:
        return file_answer(name)

    # Any deeper path (`/console/a/b`, `/console//app.js`) names no file of the flat
    # directory: the console's 404, with its headers (a rule of Powertools is a regex).
    @app.route(f"{PREFIX}/.*/.*", _METHODS)
    def deeper() -> Response[Any]:
        name = app.current_event.path.removeprefix(f"{PREFIX}/")
        return error(HTTPStatus.NOT_FOUND, "not_found", f"no console file {name[:100]!r}")


def methods_on(path: str) -> list[str]:
    """The methods the console serves on `path` (empty: not a console path). Any other method
    there, TRACE or one HTTP does not define included, is the API's 405 (duetime.api.app)."""
    console = path == PREFIX or path.startswith(f"{PREFIX}/")
    return list(_METHODS) if console else []


# Providers whose token endpoint is not on the issuer's origin (their discovery documents say
# where it is): Cognito's is the user pool's hosted domain, Google's its API host.
_COGNITO_ISSUER = re.compile(r"https://cognito-idp\.([a-z0-9-]+)\.amazonaws\.com")
_GOOGLE_ISSUER = "https://accounts.google.com"


def _provider_origins(issuer: str) -> list[str]:
    """The origins the console's sign-in fetches from: the issuer's, and its token endpoint's
    where that is elsewhere."""
    if not issuer:
        return []
    if cognito := _COGNITO_ISSUER.fullmatch(issuer):
        return [issuer, f"https://*.auth.{cognito.group(1)}.amazoncognito.com"]
    if issuer == _GOOGLE_ISSUER:
        return [issuer, "https://oauth2.googleapis.com"]
    return [issuer]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
