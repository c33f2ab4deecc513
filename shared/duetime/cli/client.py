"""The HTTP client of the duetime API for `duetime jobs` (docs/cli.md): the base URL and the
token from the flags or the environment, JSON requests, and the API's errors as exceptions.

HTTP is `urllib.request` on purpose: no dependency for a handful of JSON calls.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from duetime import __version__
from duetime.cli.format import cut
from duetime.cli.types import header_problem

API_URL_ENV = "DUETIME_API_URL"
TOKEN_ENV = "DUETIME_TOKEN"  # noqa: S105 (the variable's name, not a secret)
DEFAULT_API_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_SECONDS = 30.0


class UsageError(Exception):
    """The command cannot be sent as given (exit 2)."""


class Unreachable(Exception):
    """No answer from the API, or from a local stack that stopped with its local.json left
    behind (exit 1, as for any call without an answer; duetime.cli.main)."""


class ApiError(Exception):
    """The API answered with an error (exit 1)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after  # the answer's Retry-After header, as sent

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.message}"
        return f"{text} (field: {self.field})" if self.field else text


def client_for(args: argparse.Namespace) -> ApiClient:
    if args.api_url == "":  # (it was taken for no flag: the token went to the default URL)
        raise UsageError("--api-url is empty: give the API's URL, or leave the flag out")
    base_url = (args.api_url or os.environ.get(API_URL_ENV) or DEFAULT_API_URL).rstrip("/")
    try:
        parts = urllib.parse.urlsplit(base_url)
    except ValueError:
        parts = urllib.parse.urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"the API URL must be http:// or https://, not {base_url!r}")
    if not (base_url.isascii() and base_url.isprintable()) or " " in base_url:
        raise UsageError(  # a request line is ASCII, its parts split at spaces
            f"the API URL must be printable ASCII without spaces (percent-encode the rest), "
            f"not {base_url!r}"
        )
    if parts.query or parts.fragment or "?" in base_url or "#" in base_url:
        raise UsageError(f"the API URL is a base, with no ? or #, not {base_url!r}")
    if host_problem(parts.hostname or ""):
        raise UsageError(  # (the resolver's UnicodeError was a traceback until 2026-12-01)
            f"the API URL's host has an empty or over-63-character label (a doubled dot?), "
            f"not {parts.hostname!r}"
        )
    token = args.token
    if token is None:
        token = os.environ.get(TOKEN_ENV, "").strip()
        problem = header_problem(token) if token else None
        if problem is not None:
            raise UsageError(f"{TOKEN_ENV} {problem}")
    if not token:
        raise UsageError(
            f"no API token: pass --token or set {TOKEN_ENV} "
            '(for the local stack: export DUETIME_TOKEN="$(duetime token --tenant me)")'
        )
    return ApiClient(base_url, token, args.timeout)


def host_problem(host: str) -> bool:
    """Whether the resolver refuses this host name: an empty label (`a..b`) or one of over 63
    characters (Python's `idna` codec, which the socket uses, raises UnicodeError)."""
    try:
        host.encode("idna")
    except UnicodeError:
        return True
    return False


# (status, body, an error status's reason, its Retry-After header)
_Exchange = tuple[int, bytes, object | None, str | None]


@dataclass(frozen=True)
class ApiClient:
    """JSON over HTTP with a bearer token. Raises ApiError or Unreachable."""

    base_url: str
    token: str
    timeout: float

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | list[str] | None] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        url = self.base_url + path
        # A list is a repeated parameter (`tag=a:1&tag=b:2`).
        params = [
            (key, str(item))
            for key, value in (query or {}).items()
            if value is not None
            for item in (value if isinstance(value, list) else [value])
        ]
        if params:
            url += "?" + urllib.parse.urlencode(params)
        # The scheme was checked in client_for: http(s) only, never file:.
        request = urllib.request.Request(url, method=method)  # noqa: S310
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", f"duetime-cli/{__version__}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        if body is not None:
            request.add_header("Content-Type", "application/json")
            try:
                request.data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
            except ValueError as exc:  # NaN: the flags and files refuse it before this
                raise UsageError(f"the body cannot be sent as JSON: {exc}") from None
        try:
            status, raw, refused, retry_after = self._exchange(request)
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except (OSError, HTTPException) as exc:  # timeouts and resets after connecting
            raise self._unreachable(exc) from None
        except UnicodeError:  # a proxy's host the resolver refuses (`a..b`; client_for checks
            # the API's): a traceback until 2026-12-01 (an outside CLI audit)
            raise self._unreachable(
                "a host name on the way (a proxy's: HTTPS_PROXY, HTTP_PROXY) has an empty or "
                "over-63-character label"
            ) from None
        if refused is not None:  # the API's (or something in between's) 4xx or 5xx
            raise _api_error(status, refused, raw, retry_after)
        if not raw.strip():
            return None
        return _answer(status, raw)

    def _exchange(self, request: urllib.request.Request) -> _Exchange:
        """One request's status, body and, for an error status, its reason and Retry-After,
        all within the timeout (urllib's bounds each socket read: an answer trickling in a byte
        a second held the command for as long as it lasted; found by an outside audit; an
        error's body too, found by review). TimeoutError past it."""
        done: list[_Exchange | BaseException] = []

        def exchange() -> None:
            try:
                opener = urllib.request.build_opener(_RefuseRedirects)
                with opener.open(request, timeout=self.timeout) as response:
                    done.append((response.status, response.read(), None, None))
            except urllib.error.HTTPError as exc:
                try:
                    body = exc.read()
                except (OSError, HTTPException):
                    body = b""
                finally:
                    exc.close()
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                done.append((exc.code, body, exc.reason, retry_after))
            except BaseException as exc:  # raised again in the caller's thread
                done.append(exc)

        thread = threading.Thread(target=exchange, name="duetime-request", daemon=True)
        thread.start()
        thread.join(self.timeout)
        if not done:
            raise TimeoutError
        if isinstance(done[0], BaseException):
            raise done[0]
        return done[0]

    def _unreachable(self, reason: object) -> Unreachable:
        if isinstance(reason, ConnectionRefusedError):
            return Unreachable(
                f'cannot reach the API at {self.base_url} — is "duetime local" running?'
            )
        if isinstance(reason, TimeoutError):
            return Unreachable(f"no answer from the API at {self.base_url} in {self.timeout:g} s")
        return Unreachable(f"cannot reach the API at {self.base_url}: {reason}")


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """The API never redirects, and urllib would carry the bearer token to wherever a redirect
    points: a 3xx is reported as an error instead."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> None:
        return None


def _answer(status: int, raw: bytes) -> Any:
    """A 2xx's JSON. A lone surrogate (`"\\ud800"`) is JSON but not Unicode: it could be
    neither printed nor sent back (a cursor). A number beyond a double (`1e400`) is read as
    infinity, which `--json` would print as `Infinity`, no JSON (until 2026-12-01; an outside
    CLI audit)."""
    try:
        data = json.loads(raw, parse_constant=_not_json)
    except RecursionError:
        problem = "JSON nested too deeply"
    except ValueError:  # not JSON, not UTF-8, a number of over 4,300 digits
        problem = "with something not JSON"
    else:
        try:
            json.dumps(data, ensure_ascii=False, allow_nan=False).encode()
            return data
        except UnicodeEncodeError:
            problem = "text that is not Unicode (a lone surrogate)"
        except RecursionError:
            problem = "JSON nested too deeply"
        except ValueError:  # inf from 1e400 (a NaN or Infinity token is refused above)
            problem = "a number beyond a double (such as 1e400)"
    raise ApiError(status, "bad_response", f"the API answered {problem}", None)


def _not_json(constant: str) -> Any:
    """NaN, Infinity: Python's reader takes them, JSON has no such value."""
    raise ValueError(f"{constant} is not JSON")


def _api_error(status: int, reason: object, raw: bytes, retry_after: str | None) -> ApiError:
    """The error from the API's `{"error": {"code", "message", "field"}}`, or the best we have
    when something in between (a proxy, a gateway) answered instead."""
    try:
        error = json.loads(raw)["error"]
        code, message = str(error["code"]), str(error["message"])
        field = error.get("field")
        return ApiError(status, code, message, str(field) if field else None, retry_after)
    except (ValueError, RecursionError, TypeError, KeyError, AttributeError):
        text = raw.decode("utf-8", "replace").strip()
        message = cut(" ".join(text.split())) or str(reason)
        return ApiError(status, "http_error", message, None, retry_after)
