"""HTTP delivery: one request, to an address the guard checked, within the invocation's timeout."""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import functools
import http.client
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from email.message import Message
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

from duetime import __version__
from duetime.clock import wall_ms
from duetime.domain.addresses import refusal_reason
from duetime.domain.invocation import Invocation, TargetError, delivery_metadata, to_json
from duetime.domain.signing import webhook_headers
from duetime.domain.targets import HttpTarget
from duetime.domain.text import clean
from duetime.domain.urls import a_label
from duetime.ports import SecretsUnavailable
from duetime.targets import address_guard

if TYPE_CHECKING:
    from duetime.ports import SigningSecrets

# The response body only feeds error messages; never hold more of it than this.
MAX_RESPONSE_BYTES = 64 * 1024
# A header value (or a word of one) this long is taken out of an error body (`_redacted`).
MIN_REDACTED_CHARS = 8
USER_AGENT = f"duetime/{__version__}"
_NO_BODY_METHODS = frozenset({"GET", "DELETE"})
_RETRYABLE_STATUSES = frozenset({408, 429})

Resolver = Callable[[str, int], list[str]]


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """The system trust store with hostname checking; built once (loading CAs costs ~10 ms)."""
    return ssl.create_default_context()


class HttpDelivery:
    """Sends invocations to HTTP targets.

    `resolver` and `ssl_context` exist for tests; by default names are resolved with
    `address_guard.resolve_host` (looked up on each call, so tests may monkeypatch it) and
    certificates are verified against the system trust store.

    With `webhook_secrets`, every request is signed (Standard Webhooks: `webhook-id` is the
    run id, `webhook-timestamp` the send time in epoch seconds from `wall_clock`,
    `webhook-signature` one `v1,...` per valid secret of the tenant); without, unsigned.
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        require_https: bool = False,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        webhook_secrets: SigningSecrets | None = None,
        wall_clock: Callable[[], float] = lambda: wall_ms() / 1000,
        emulator_port: int | None = None,
    ) -> None:
        self._allow_private = allow_private
        self._emulator_port = emulator_port
        self._require_https = require_https
        self._resolver = resolver
        self._ssl_context = ssl_context
        self._webhook_secrets = webhook_secrets
        self._wall_clock = wall_clock

    def deliver(self, target: HttpTarget, invocation: Invocation) -> None:
        if invocation.timeout_seconds <= 0:
            raise TargetError("timed out before the request was sent")
        # The deadline covers name resolution too: it is part of what the target costs us.
        deadline = time.monotonic() + invocation.timeout_seconds
        url = self._parse_url(target.url)
        host, port = _host_and_port(url)
        resolve = self._resolver or address_guard.resolve_host
        addresses = _within(invocation.timeout_seconds, deadline, resolve, host, port)
        address_guard.check_addresses(host, addresses, self._allow_private)
        if port == self._emulator_port and any(
            refusal_reason(address_guard.parse_address(a)) for a in addresses
        ):
            # The local stack's moto server, unauthenticated: a job calling it would act on
            # every queue and table, another tenant's too (until 2026-11-30: found by review).
            raise TargetError(
                "refused: the URL reaches the local stack's emulator", retryable=False
            )
        # Every answer passed the guard, so any of them may be dialled, in the resolver's order.
        pin = _Pin(addresses, port, invocation.timeout_seconds, deadline)
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            context = self._ssl_context or default_ssl_context()
            connection = _PinnedHTTPSConnection(host, pin, context)
        else:
            connection = _PinnedHTTPConnection(host, pin)
        method = target.method.upper()
        body = None if method in _NO_BODY_METHODS else to_json(invocation.payload).encode()
        headers = _headers(target, invocation, has_body=body is not None)
        headers |= self._signature(invocation, body or b"")
        status, reason, answered, text = _exchange(
            connection, pin, method=method, path=_path(url), body=body, headers=headers
        )
        try:
            _raise_for_status(status, reason, answered, text)
        except TargetError as failed:  # what the target said back: never the job's headers
            hidden = _redacted(str(failed), target.headers.values())
            raise TargetError(
                hidden, retryable=failed.retryable, retry_after_seconds=failed.retry_after_seconds
            ) from None

    def _signature(self, invocation: Invocation, body: bytes) -> dict[str, str]:
        """The webhook-* headers for exactly the bytes sent (b"" without a body). Signed
        last, just before sending, so the timestamp is this attempt's."""
        if self._webhook_secrets is None:
            return {}
        try:
            secrets = self._webhook_secrets.signing_secrets(invocation.tenant)
        except SecretsUnavailable as exc:
            if exc.passing:  # a throttle, no answer: the platform's, so not an attempt
                raise
            raise TargetError(f"not sent: {exc}") from exc  # a key refusing: a person fixes it
        timestamp = int(self._wall_clock())
        return webhook_headers(secrets, invocation.run_id, timestamp, body)

    def _parse_url(self, raw: str) -> SplitResult:
        try:
            url = urlsplit(raw)
        except ValueError as exc:
            raise TargetError(f"invalid URL: {exc}", retryable=False) from exc
        if url.scheme not in ("http", "https") or not url.hostname:
            raise TargetError("the URL must be an absolute http(s) URL", retryable=False)
        if self._require_https and url.scheme != "https":
            raise TargetError("refused: only https:// URLs are allowed here", retryable=False)
        return url


def _within(
    timeout: float,
    deadline: float,
    resolve: Callable[[str, int], list[str]],
    host: str,
    port: int,
) -> list[str]:
    """The name's addresses, resolved within the attempt's deadline: getaddrinfo has no
    timeout of its own, and a stalled DNS server would hold the worker for the resolver's.
    (A resolution given up on finishes on its own thread, unused.)"""
    answer: list[list[str] | BaseException] = []

    def run() -> None:
        try:
            answer.append(resolve(host, port))
        except BaseException as exc:  # handed to the caller's thread
            answer.append(exc)

    thread = threading.Thread(target=run, name=f"resolve {host}", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if not answer:
        raise TargetError(f"timed out after {timeout:g} s resolving {host}")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]


def _host_and_port(url: SplitResult) -> tuple[str, int]:
    # A fully qualified name's final dot (`example.com.`) is the same host, but TLS SNI and
    # certificate names are written without it (RFC 6066), and so is the Host header.
    hostname = (url.hostname or "").removesuffix(".")
    try:
        # The A-label form is what DNS, the Host header and TLS SNI all expect. (A job stored
        # before a_label refused a name IDNA 2008 encodes otherwise is refused here.)
        host = a_label(hostname)
        port = url.port or (443 if url.scheme == "https" else 80)
    except (UnicodeError, ValueError) as exc:
        raise TargetError(f"invalid URL: {exc}", retryable=False) from exc
    return host, port


def _path(url: SplitResult) -> str:
    path = url.path or "/"
    return f"{path}?{url.query}" if url.query else path


def _headers(target: HttpTarget, invocation: Invocation, *, has_body: bool) -> dict[str, str]:
    # Later sources win, case-insensitively: the target may replace User-Agent and Content-Type,
    # never the duetime-* headers (job validation already forbids them; this keeps it true).
    merged: dict[str, tuple[str, str]] = {}
    defaults = {"User-Agent": USER_AGENT}
    if has_body:
        defaults["Content-Type"] = "application/json"
    for source in (defaults, target.headers, delivery_metadata(invocation)):
        for name, value in source.items():
            merged[name.lower()] = (name, value)
    if not has_body:  # GET and DELETE send no body, so no Content-Type (targets.md)
        merged.pop("content-type", None)
    return dict(merged.values())


def _raise_for_status(status: int, reason: str, answered: Message, body: str) -> None:
    if 200 <= status < 300:
        return
    summary = f"HTTP {status} {reason}".rstrip()
    if 300 <= status < 400:
        location = answered.get("Location")
        where = f" to {location}" if location else ""
        raise TargetError(f"{summary}{where}: redirects are not followed", retryable=False)
    retryable = status in _RETRYABLE_STATUSES or status >= 500
    after = _retry_after(answered.get("Retry-After")) if status in (429, 503) else None
    message = f"{summary}: {body}" if body else summary
    raise TargetError(message, retryable=retryable, retry_after_seconds=after)


def _retry_after(value: str | None) -> float | None:
    """A Retry-After (RFC 9110 10.2.3): delay-seconds, or an HTTP date (0 once past); None for
    anything else."""
    text = (value or "").strip()
    if text.isdigit() and text.isascii():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # (RFC 5322's "-0000": no zone said; HTTP dates are GMT)
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, round(when.timestamp() - wall_ms() / 1000, 3))


def _exchange(
    connection: http.client.HTTPConnection,
    pin: _Pin,
    *,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
) -> tuple[int, str, Message, str]:
    """Send the request; return status, reason, headers and, for an error, the start of the body.

    Socket timeouts bound each operation, not the total: a server dripping one byte at a time
    could hold a worker for ever. A watchdog timer shuts the socket down at the deadline.
    """
    watchdog = threading.Timer(pin.remaining(), pin.abort, args=(connection,))
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        if pin.expired:
            # The watchdog's shutdown reads as an orderly end of stream, so a status line and
            # headers cut off at the deadline can look complete: they are not.
            raise TimeoutError
        # The body matters only to explain a failure, so a successful response may stream for
        # as long as it likes, and an error body cut off at the deadline still explains.
        text = _read_start(response) if response.status >= 400 else ""
        return response.status, response.reason, response.msg, text
    except http.client.InvalidURL as exc:
        raise TargetError(f"invalid URL: {exc}", retryable=False) from exc
    except ssl.SSLCertVerificationError as exc:
        raise TargetError(
            f"TLS certificate verification failed for {connection.host}: {exc.verify_message}",
            retryable=False,
        ) from exc
    except (OSError, http.client.HTTPException) as exc:
        if pin.expired or isinstance(exc, TimeoutError):
            raise TargetError(f"timed out after {pin.timeout:g} s") from exc
        raise TargetError(f"connection to {connection.host} failed: {exc}") from exc
    except ValueError as exc:
        # http.client refuses header values it cannot encode as Latin-1.
        raise TargetError(f"invalid request: {exc}", retryable=False) from exc
    finally:
        watchdog.cancel()
        connection.close()


def _redacted(text: str, values: Iterable[str]) -> str:
    """An error (the target's status, reason, Location and body) without the job's header
    values, whole or word by word (a credential is rarely shorter than MIN_REDACTED_CHARS): a
    target echoing its request would put the tenant's credentials into the run's error, the
    operator's log and the DLQ's reason (until 2026-11-30; found by an outside audit). The
    body's whitespace is folded: so are the values."""
    pieces = {piece for value in values for piece in (" ".join(value.split()), *value.split())}
    secrets = sorted((p for p in pieces if len(p) >= MIN_REDACTED_CHARS), key=len, reverse=True)
    if not secrets:
        return text
    # One pass, longest first: a value that is part of another, or of "[redacted]", is not
    # replaced again inside what was replaced.
    return re.sub("|".join(map(re.escape, secrets)), "[redacted]", text)


def _read_start(response: http.client.HTTPResponse) -> str:
    try:
        raw = response.read(MAX_RESPONSE_BYTES)
    except (OSError, http.client.HTTPException):
        return ""  # the status already says what went wrong
    # Whitespace folded, and what would drive a terminal (ESC, BEL, bidirectional overrides)
    # spelled out: the run's error is read in terminals (the CLI, history queries).
    return clean(" ".join(raw.decode("utf-8", errors="replace").split()))


class _Pin:
    """Where a connection may go (addresses the guard checked) and until when."""

    def __init__(
        self, addresses: Sequence[str], port: int, timeout: float, deadline: float
    ) -> None:
        self.addresses = tuple(addresses)
        self.port = port
        self.timeout = timeout
        self.deadline = deadline
        self.expired = False

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)

    def dial(self) -> socket.socket:
        """A TCP connection to the first checked address that answers, within the deadline."""
        errors: list[str] = []
        for address in self.addresses:
            remaining = self.remaining()
            if remaining <= 0:
                raise TimeoutError("timed out")
            try:
                # An IP literal: create_connection does no DNS lookup for it.
                sock = socket.create_connection((address, self.port), timeout=remaining)
            except TimeoutError:
                raise
            except OSError as exc:
                errors.append(f"{address}: {exc}")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise ConnectionError("; ".join(errors))

    def abort(self, connection: http.client.HTTPConnection) -> None:
        self.expired = True
        sock = connection.sock
        if sock is not None:
            # Already closed means nothing is left to interrupt.
            with contextlib.suppress(OSError):
                # socket.socket's method, not SSLSocket's: shuts the descriptor down under a
                # blocked TLS read without touching TLS state the other thread is using.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _FinalResponse(http.client.HTTPResponse):
    """A response whose interim 1xx answers (102 Processing, 103 Early Hints) are skipped, as
    http.client skips 100 Continue itself: the final status is the outcome (RFC 9110,
    section 15.2). A 101 is final: duetime never asks to switch protocols."""

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not 101 < status < 200:
                return version, status, reason
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Plain HTTP to a checked address; the Host header still names the URL's host."""

    response_class = _FinalResponse

    def __init__(self, host: str, pin: _Pin) -> None:
        super().__init__(host, pin.port, timeout=pin.remaining())
        self._pin = pin

    def connect(self) -> None:
        self.sock = self._pin.dial()


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to a checked address; SNI and certificate verification use the URL's host name."""

    response_class = _FinalResponse

    def __init__(self, host: str, pin: _Pin, context: ssl.SSLContext) -> None:
        super().__init__(host, pin.port, timeout=pin.remaining(), context=context)
        self._pin = pin
        self._tls_context = context

    def connect(self) -> None:
        raw = self.sock = self._pin.dial()
        tls = self._tls_context.wrap_socket(
            raw, server_hostname=self.host, do_handshake_on_connect=False
        )
        self.sock = tls  # before the handshake, so the watchdog can interrupt it
        tls.do_handshake()
