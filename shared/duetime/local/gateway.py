"""The local stand-in for API Gateway (HTTP API, JWT authorizer, payload format 2.0).

Each HTTP request becomes the event API Gateway would give the API Lambda, and the handler's
answer becomes the HTTP response:
- routes: `GET /health`, `GET /openapi.json` and the web console's files (`GET /console`,
  `GET /console/...`), and HEAD on each, are public (their own routes, routeKey
  "GET /health"); everything else goes to the `$default` route behind the JWT authorizer;
- a HEAD answer has the handler's status and headers and no body; its Content-Length is the
  handler's (the API sets the length its GET body has), else the length of the handler's body;
- request framing is refused as ambiguous, with a 400 that closes the connection, before
  anything reaches the handler: a Content-Length that is not a number or is sent twice with
  different values, Content-Length together with Transfer-Encoding, a Transfer-Encoding other
  than one `chunked` (`gzip, chunked` too: bad input is a 4xx, not RFC 9112's 501), a
  malformed chunk (request smuggling hygiene: a proxy in front could read the request's end
  elsewhere);
- the authorizer: `Authorization: Bearer <jwt>`, HS256 with the local key, issuer and audience
  pinned, `exp` required. A refused token is a 401 and the handler is not called;
- request bodies over 1 MiB are refused with 413 and never reach the handler (API Gateway's
  limit is 10 MB; the API allows 64 KiB of payload, so 1 MiB is ample);
- the gateway's own refusals have the API's error shape, `{"error": {"code", "message",
  "field"?}}` (`field`: the header or `body` at fault);
- a handler that raises is a 500 (API Gateway: "Internal Server Error"), logged here;
- its listen backlog is LISTEN_BACKLOG, not Python's default of 5: a burst of concurrent
  clients waits in the kernel's queue to be accepted, rather than being refused or reset.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from duetime.local.apigw import Request, content_length, request_event, response_parts
from duetime.local.keys import InvalidToken, bearer_token, verify_token
from duetime.local.lambda_runtime import FakeContext
from duetime.observability import logger

Handler = Callable[[dict[str, Any], Any], Any]

MAX_BODY_BYTES = 1024 * 1024
_DRAIN_LIMIT_BYTES = 16 * MAX_BODY_BYTES
# How long a connection may take to send a whole request (or, kept alive, to wait for the
# next and send it): then it is closed, so a client that stops sending, or sends a byte at a
# time, holds no thread.
READ_TIMEOUT_SECONDS = 60.0
PUBLIC_ROUTES = frozenset({("GET", "/health"), ("GET", "/openapi.json")})
# Connections the kernel holds for the accept loop (capped by net.core.somaxconn, 4096 on
# current Linux). At 5, 16 clients connecting at once overflowed it: one got a reset.
LISTEN_BACKLOG = 1024
# Content types delivered as text; anything else arrives base64-encoded, as API Gateway does.
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,8}")  # at most 4 GiB a chunk: past any limit
_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110's token: any is a method


def is_public(method: str, path: str) -> bool:
    """Routes without the authorizer, as on AWS: the API's public routes and the console,
    with HEAD wherever GET."""
    method = "GET" if method == "HEAD" else method
    console = method == "GET" and (path == "/console" or path.startswith("/console/"))
    return (method, path) in PUBLIC_ROUTES or console


class _Refused(Exception):
    """A request the gateway answers itself, in the API's error shape."""

    def __init__(self, status: HTTPStatus, code: str, message: str, field: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class Gateway:
    """An HTTP server on `host:port` (0: any free port) invoking `handler` per request."""

    def __init__(
        self,
        handler: Handler,
        key: bytes,
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        max_body_bytes: int = MAX_BODY_BYTES,
        read_timeout_seconds: float = READ_TIMEOUT_SECONDS,
    ) -> None:
        self.handler = handler
        self.key = key
        self.max_body_bytes = max_body_bytes
        self.read_timeout_seconds = read_timeout_seconds
        self._host = host
        self._server = _Server((host, port), _RequestHandler, self)
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()  # from then on a request gets 503 (keep-alive ones)
        # The connections reading a request, and until when they may (`_reap`).
        self._reading: dict[socket.socket, float] = {}
        self._reading_lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="gateway"
        )
        self._thread.start()
        threading.Thread(target=self._reap, name="gateway reaper", daemon=True).start()

    def reading(self, connection: socket.socket, reading: bool) -> float:
        """`connection` starts reading a request (its deadline, returned, is from now), or is
        done: no longer closed at it."""
        deadline = time.monotonic() + self.read_timeout_seconds
        with self._reading_lock:
            if reading:
                self._reading[connection] = deadline
            else:
                self._reading.pop(connection, None)
        return deadline

    def _reap(self) -> None:
        """Close the connections past their deadline: the socket's timeout bounds each read,
        not the request (a byte every 50 s held a thread for ever until 2026-11-30: found by
        an outside audit)."""
        while not self.stopping.wait(min(0.25, self.read_timeout_seconds / 4)):
            now = time.monotonic()
            with self._reading_lock:
                late = [c for c, deadline in self._reading.items() if deadline < now]
                for connection in late:
                    del self._reading[connection]
            for connection in late:
                with contextlib.suppress(OSError):  # gone already
                    connection.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Gateway:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], handler: type[_RequestHandler], gateway: Gateway):
        self.gateway = gateway
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone before its answer is nothing to report; anything else goes to the
        functions' log, not the terminal (socketserver printed a traceback there)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            logger.exception("gateway request failed")


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive: every response carries Content-Length
    server_version = "duetime-local-gateway"
    _deadline = 0.0  # when the request being read must have arrived (handle_one_request)

    def do_GET(self) -> None:
        self._serve()

    # Every method reaches the API, as behind API Gateway: the resolver answers 405 in JSON.
    # (http.server looks up `do_<METHOD>` and would answer an unknown one with HTML 501.)
    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_") and _METHOD.fullmatch(name[3:]):  # any token: `get`, M-SEARCH
            return self.do_GET
        raise AttributeError(name)

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.gateway.read_timeout_seconds)  # for each read

    def handle_one_request(self) -> None:
        gateway = self.server.gateway
        self._deadline = gateway.reading(self.connection, True)  # the whole request, by then
        try:
            super().handle_one_request()
        finally:
            gateway.reading(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr (the terminal shows the live figures)."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals, before any of duetime's code (a bad request line, a
        header line too long, too many headers, an HTTP version not 1.x), in the API's error
        shape and always a 4xx (until 2026-11-30 an HTML page, and a 505)."""
        self.close_connection = True
        self.request_version = self.protocol_version  # a status line, even before the version
        status = HTTPStatus(code) if 400 <= code < 500 else HTTPStatus.BAD_REQUEST
        large = status in (
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
            HTTPStatus.REQUEST_URI_TOO_LONG,
        )
        code_name = "payload_too_large" if large else "invalid"
        request_id = base64.b64encode(uuid.uuid4().bytes[:10]).decode()
        self._error(status, code_name, message or status.phrase, request_id)

    def _serve(self) -> None:
        gateway = self.server.gateway
        if time.monotonic() >= self._deadline:
            # Past its deadline its connection is being closed (`Gateway._reap`), and what was
            # read may be cut anywhere, an end of headers included: nobody to answer.
            self.close_connection = True
            return
        request_id = base64.b64encode(uuid.uuid4().bytes[:10]).decode()
        if self.headers.defects:  # ` Name: v`, `Name : v`: the headers after it were dropped
            self.close_connection = True
            problem = "a header line is malformed (a space before its colon, say)"
            self._error(HTTPStatus.BAD_REQUEST, "invalid", problem, request_id, "headers")
            return
        url = urlsplit(self.path)
        path = url.path or "/"
        sent = self.requestline.split(" ")[1:2]
        if sent and sent[0].startswith("//"):  # Python's server made it `/…`: not a route
            path = sent[0].partition("?")[0].partition("#")[0]
        public = is_public(self.command, path)
        if gateway.stopping.is_set():
            # A connection kept alive past the stop: the stack is going away, so nothing it
            # would accept now would run (until 2026-11-30 it was served: found by an audit).
            self.close_connection = True
            message = "the local stack is stopping"
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable", message, request_id)
            return
        try:
            body = self._read_body()
            gateway.reading(self.connection, False)  # read: the API's own time is not the client's
        except TimeoutError:  # the request never ended: nobody to answer
            self.close_connection = True
            return
        except _Refused as refused:
            # What follows on the connection cannot be told apart from this body.
            self.close_connection = True
            self._error(refused.status, refused.code, refused.message, request_id, refused.field)
            return
        claims: dict[str, Any] | None = None
        if not public:
            try:
                claims = verify_token(bearer_token(self.headers.get("Authorization")), gateway.key)
            except InvalidToken as exc:
                self._error(HTTPStatus.UNAUTHORIZED, "unauthorized", str(exc), request_id)
                return

        event = request_event(
            Request(self.command, path, url.query, self.request_version, self.client_address[0]),
            self.headers.items(),
            body,
            claims,
            route_key=f"{self.command} {path}" if public else "$default",
            request_id=request_id,
        )
        try:
            result = gateway.handler(event, FakeContext(function_name="duetime-api"))
            status, headers, cookies, payload = response_parts(result)
        except Exception:
            logger.exception("API handler failed", extra={"request_id": request_id})
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal", "internal error", request_id)
            return
        self._send(status, headers, cookies, payload, request_id)

    def _read_body(self) -> bytes:
        """The request body, framed by one Content-Length or by chunks, never both (RFC 9112
        §6.3: a message with both, or with lengths that disagree, has no reliable end)."""
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        codings = ",".join(self.headers.get_all("Transfer-Encoding") or [])
        if codings:
            if lengths:
                raise _invalid("Content-Length", "Content-Length and Transfer-Encoding together")
            if [c.strip().lower() for c in codings.split(",")] != ["chunked"]:
                # RFC 9112 suggests 501 for a coding before chunked (`gzip, chunked`); bad
                # input is a 4xx here, never a 5xx (docs/api.md, "Errors").
                raise _invalid("Transfer-Encoding", "the only transfer coding accepted is chunked")
            return self._read_chunked()
        if len(lengths) > 1:
            raise _invalid("Content-Length", "Content-Length sent with different values")
        length = lengths.pop() if lengths else "0"
        if not length.isascii() or not length.isdigit():
            raise _invalid("Content-Length", "Content-Length is not a number of bytes")
        # Past 16 digits it is too large unconverted (int() refuses over 4,300 digits).
        size = int(length) if len(length.lstrip("0")) <= 16 else _DRAIN_LIMIT_BYTES + 1
        if size > self.server.gateway.max_body_bytes:
            # Read (a bounded amount of) what the client sends, until the request's deadline,
            # so that it gets to read the 413 rather than a connection reset.
            self.server.gateway.reading(self.connection, False)  # (answered, not closed)
            _drain(self.rfile, min(size, _DRAIN_LIMIT_BYTES), self._deadline)
            raise self._too_large()
        body = self.rfile.read(size)
        if len(body) < size:
            raise _invalid("body", f"the body ended after {len(body)} of {size} bytes")
        return body

    def _read_chunked(self) -> bytes:
        """A chunked request body: hexadecimal sizes (no sign, prefix or underscore), each
        chunk followed by CRLF."""
        limit = self.server.gateway.max_body_bytes
        body = bytearray()
        while True:
            size_line = self.rfile.readline(1024).split(b";")[0].strip()
            if not _CHUNK_SIZE.fullmatch(size_line):
                raise _invalid("body", "malformed chunked body: a bad chunk size")
            size = int(size_line, 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return bytes(body)
            if len(body) + size > limit:
                raise self._too_large()
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.readline(8) != b"\r\n":
                raise _invalid("body", "malformed chunked body: a chunk is not followed by CRLF")
            body += chunk

    def _too_large(self) -> _Refused:
        limit = self.server.gateway.max_body_bytes
        return _Refused(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "payload_too_large",
            f"the request body is larger than {limit} bytes",
            "body",
        )

    def _error(
        self,
        status: HTTPStatus,
        code: str,
        message: str,
        request_id: str,
        field: str | None = None,
    ) -> None:
        headers = {
            "content-type": "application/json",
            "cache-control": "no-store",
            "x-content-type-options": "nosniff",  # as the API's answers
        }
        if self.close_connection:
            headers["connection"] = "close"
        if status == HTTPStatus.UNAUTHORIZED:
            headers["www-authenticate"] = 'Bearer error="invalid_token"'
        error = {"code": code, "message": message}
        if field is not None:
            error["field"] = field
        payload = json.dumps({"error": error}, separators=(",", ":")).encode()
        self._send(status, headers, [], payload, request_id)

    def _send(
        self,
        status: int,
        headers: Mapping[str, str],
        cookies: list[str],
        payload: bytes,
        request_id: str,
    ) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "transfer-encoding"):
                self.send_header(name, value)
        for cookie in cookies:
            self.send_header("Set-Cookie", cookie)
        self.send_header("apigw-requestid", request_id)
        if status != HTTPStatus.NOT_MODIFIED:  # a 304 has no body, and no length of its own
            length = content_length(self.command, headers, payload)
            self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command != "HEAD" and status != HTTPStatus.NOT_MODIFIED:  # no body to write
            self.wfile.write(payload)


def _invalid(field: str, message: str) -> _Refused:
    return _Refused(HTTPStatus.BAD_REQUEST, "invalid", message, field)


def _drain(stream: Any, size: int, deadline: float) -> None:
    try:
        while size > 0 and time.monotonic() < deadline:
            chunk = stream.read1(min(size, 65_536))
            if not chunk:
                return
            size -= len(chunk)
    except (TimeoutError, ConnectionError):  # the client stopped sending, or went away
        return
