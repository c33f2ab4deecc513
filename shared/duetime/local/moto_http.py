"""The local moto server's HTTP layer: persistent connections, one write per answer.

moto's `ThreadedMotoServer` serves through werkzeug's development server, which closes the
connection after every answer (werkzeug says its keep-alive is not safe: http.server cannot
drain an unread body). So every AWS call of the local stack opened a TCP connection, and the
server started a thread for it; after each answer werkzeug also waited on a new selector to
drain the socket. Measured on a 2-core machine (one PutItem + one GetItem per loop, 10
threads): 4.9 ms of the server's CPU and 3.1 ms of the client's per call, 175 calls a second.

`keep_alive_handler()` answers the same WSGI application (moto's, with moto's header handling)
but reads each request's body by its Content-Length, writes status, headers and body in one
send with TCP_NODELAY, and keeps the connection for the client's next call (HTTP/1.1). A
request whose body is chunked, or whose answer fails, goes through werkzeug's own path and
closes its connection as before. Same measurement: 3.4 ms of the server's CPU and 2.6 ms of
the client's per call, 250 calls a second (docs/performance.md, "The local emulator").
"""

from __future__ import annotations

import functools
import io
import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

_log = logging.getLogger(__name__)
# Headers the handler writes itself (the body is sent whole, with its length).
_FRAMING = frozenset({"content-length", "connection", "transfer-encoding"})


@functools.cache
def keep_alive_handler() -> type[Any]:
    """The request handler (a class made on first use: moto, werkzeug and flask are the local
    extra's, and this module is imported without them)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class KeepAliveHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # one write per answer: nothing for Nagle to hold back
        answered = 0  # requests taken, by every server of this process (a sign of activity)

        def run_wsgi(self) -> None:
            KeepAliveHandler.answered += 1
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.close_connection = True
                super().run_wsgi()
                return
            if self.headers.get("Expect", "").lower().strip() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length > 0 else b""
            environ = self.make_environ()
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            try:
                status, headers, payload = _call(self.server.app, environ)
            except Exception:
                _log.exception("moto failed to answer %s %s", self.command, self.path)
                self.close_connection = True
                status, headers, payload = "500 INTERNAL SERVER ERROR", [], b""
            self._answer(status, headers, payload)

        def _answer(self, status: str, headers: list[tuple[str, str]], payload: bytes) -> None:
            code = int(status.split(None, 1)[0])
            bodiless = self.command == "HEAD" or code in (204, 304) or 100 <= code < 200
            lines = [f"HTTP/1.1 {status}"]
            lines += [f"{k}: {v}" for k, v in headers if k.lower() not in _FRAMING]
            if bodiless:
                # A HEAD answer tells the length of what a GET would return (S3's HeadObject).
                lines += [f"{k}: {v}" for k, v in headers if k.lower() == "content-length"]
                payload = b""
            else:
                lines.append(f"Content-Length: {len(payload)}")
            if self.close_connection:
                lines.append("Connection: close")
            head = "\r\n".join(lines) + "\r\n\r\n"
            self.wfile.write(head.encode("latin-1") + payload)

    return KeepAliveHandler


def _call(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run the WSGI application on one request: its status, headers and whole body."""
    answer: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answer[:] = [status, headers]
        return chunks.append

    result = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return answer[0], answer[1], b"".join(chunks)


# Host names a local AWS SDK call names (a browser page cannot, but for *.localhost).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})


def local_callers_only(app: Any) -> Any:
    """The emulator has no authentication (`duetime local` holds every tenant's jobs, their
    targets' credentials and webhook secrets): it answers AWS SDK calls only. A request with
    an `Origin` header or a browser's `Sec-Fetch-*` ones (a web page's: SDKs send none), one
    naming a host other than this machine (a page's DNS rebinding), and any to moto's own
    `/moto-api` (its recorder, replay and seed: nothing of duetime calls them) are refused,
    `403`, with no CORS headers. Until 2026-11-30 moto's own CORS let any web page the
    developer opened script it, and later the same day a page's plain `GET` (an image, no
    `Origin`) could still start moto's recorder (outside security audits)."""

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        host = str(environ.get("HTTP_HOST", ""))
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        browser = any(key.startswith(("HTTP_ORIGIN", "HTTP_SEC_FETCH_")) for key in environ)
        moto_own = str(environ.get("PATH_INFO", "")).startswith("/moto-api")
        local = name in LOOPBACK_HOSTS or name.endswith(".localhost")
        if browser or moto_own or not local:
            body = b"refused: the local emulator answers AWS SDK calls from this machine only"
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return app(environ, start_response)

    return guarded


class MotoHttpServer:
    """moto's application behind `keep_alive_handler()`, on a thread (a connection per
    thread)."""

    def __init__(self, host: str, port: int) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        app = local_callers_only(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=keep_alive_handler()
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def answered(self) -> int:
        """Requests taken so far (by every server of this process)."""
        return int(keep_alive_handler().answered)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()
