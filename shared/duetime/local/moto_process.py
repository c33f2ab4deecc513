"""The local stack's moto server, in a process of its own.

moto answers every AWS call in Python; the handlers that make those calls (botocore's
serialization and parsing included) are Python too. In one process they share one GIL, so
the local stack used one core of the machine however many threads it ran. With moto in a
child process the emulator and the handlers each get a core (docs/performance.md has the
before/after figures).

The child applies the moto fixes (duetime.local.moto_fixes, duetime.local.moto_sqs,
duetime.local.moto_dynamodb and `make_dispatch_fast` below), serves moto over persistent connections
(duetime.local.moto_http) without automatic full garbage collections
(duetime.local.gc_pauses), prints one JSON line (`{"url": ...}` or `{"error": ...}`) and
serves until its stdin closes: the parent holds the other end of that pipe, so the server
ends with the parent however the parent ends (a SIGKILL included).
"""

from __future__ import annotations

import argparse
import functools
import http.client
import io
import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from duetime.local.endpoint import MOTO_DEFAULT_REGION


class MotoProcessError(RuntimeError):
    """The moto server process could not start."""


def start(
    host: str, port: int, *, timeout: float = 30.0, plain: bool = False
) -> tuple[subprocess.Popen[str], str]:
    """Start the server process; returns it and the server's URL once it listens. `plain`:
    moto's own server without any of the fixes (to measure or compare them against)."""
    process = subprocess.Popen(  # noqa: S603 - our own module, no shell
        [sys.executable, "-m", __name__, "--host", host, "--port", str(port)]
        + (["--plain"] if plain else []),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # Ctrl-C stops the parent, which then stops the server
    )
    assert process.stdout is not None
    line = _first_line(process.stdout, timeout)
    try:
        answer = json.loads(line)
    except ValueError:
        answer = {"error": f"the moto process exited (code {process.poll()})"}
    if "url" not in answer:
        stop(process)
        raise MotoProcessError(str(answer.get("error", "no answer from the moto process")))
    return process, str(answer["url"])


def watch(process: subprocess.Popen[str], on_exit: Callable[[int], None]) -> None:
    """Call `on_exit(code)` from a thread of its own when the server process ends, whoever
    ends it (stop() included: the caller tells its own stop apart)."""
    thread = threading.Thread(target=lambda: on_exit(process.wait()), daemon=True)
    thread.name = "moto-watch"
    thread.start()


def stop(process: subprocess.Popen[str], timeout: float = 10.0) -> None:
    """Close the process's stdin (it stops its server and exits); kill it if it lingers."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _first_line(stream: IO[str], timeout: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


def make_dispatch_fast() -> None:
    """moto's server finds the service of every request by listing moto's package directory
    (`list_of_moto_modules`: ~150 `isdir` calls) and then matching the host against every
    service's URL patterns: about a tenth of the server's CPU under load. Both depend only on
    the installed moto and the request's host, so they are computed once; so are the methods
    of each handler class (looked up per request), and headers are read without the email
    package's feed parser (~6 % of the server's CPU)."""
    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    original = DomainDispatcherApplication.get_backend_for_host
    hosts: dict[str | None, object] = {}

    @functools.wraps(original)
    def get_backend_for_host(self: object, host: str | None) -> object:
        if host not in hosts:
            hosts[host] = original(self, host)  # type: ignore[arg-type]
        return hosts[host]

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    # An unsigned request names its service by its X-Amz-Target prefix only for the services
    # moto lists; the others would go to S3. The local stack's hot path is unsigned
    # (duetime.local.endpoint.UNSIGNED_SERVICES), in moto's default region.
    from moto.moto_server import werkzeug_app

    werkzeug_app.UNSIGNED_REQUESTS.update(
        {
            target: (service, MOTO_DEFAULT_REGION)
            for target, service in (
                ("AmazonSQS", "sqs"),
                ("DynamoDB_20120810", "dynamodb"),
                ("DynamoDBStreams_20120810", "dynamodb"),
            )
        }
    )

    # Every request also lists its handler class's methods (`inspect.getmembers`) to find the
    # action's: a class's methods do not change while the server runs.
    from moto.core import responses

    listed = responses.method_names_from_class  # type: ignore[attr-defined]
    methods = functools.cache(lambda cls: frozenset(listed(cls)))
    setattr(responses, "method_names_from_class", methods)  # noqa: B010 - moto's own name
    http.client.parse_headers = _parse_headers


_parse_headers_slowly = http.client.parse_headers


def _parse_headers(fp: Any, _class: Any = http.client.HTTPMessage) -> Any:
    """http.client.parse_headers without the email package's feed parser: one header a line
    (a folded header goes to the full parser)."""
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]
    if any(line[:1] in (b" ", b"\t") for line in lines):
        return _parse_headers_slowly(io.BytesIO(b"".join(lines)), _class)
    message = _class()
    for line in lines:
        name, colon, value = line.decode("iso-8859-1").partition(":")
        if colon:
            message[name] = value.strip()
    return message


def serve(
    host: str,
    port: int,
    out: IO[str] = sys.stdout,
    wait: IO[str] = sys.stdin,
    *,
    plain: bool = False,
) -> int:
    if plain:
        return _serve_plain(host, port, out, wait)
    from duetime.local.gc_pauses import IdleFullCollections, freeze_long_lived
    from duetime.local.moto_dynamodb import make_dynamodb_fast
    from duetime.local.moto_fixes import (
        make_dynamodb_writes_atomic,
        make_sqs_strict,
        make_stream_iterators_bounded,
    )
    from duetime.local.moto_http import MotoHttpServer
    from duetime.local.moto_sqs import make_sqs_fast

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    make_dynamodb_writes_atomic()
    make_sqs_strict()
    make_stream_iterators_bounded()
    make_sqs_fast()
    make_dynamodb_fast()
    make_dispatch_fast()
    # werkzeug exits the process when it cannot bind: check first.
    refused = cannot_listen(host, port) if port else None
    if refused is not None:
        error = f"cannot listen on {host}:{port} ({refused.strerror})"
        print(json.dumps({"error": error}), file=out, flush=True)
        return 1
    server = MotoHttpServer(host, port)
    server.start()
    # The tables and queues live here: a full collection would walk all of them, so it waits
    # for a quiet second (gc_pauses).
    freeze_long_lived(full_collections=False)
    full_collections = IdleFullCollections(lambda: server.answered)
    full_collections.start()
    bound_host, bound_port = server.address
    print(json.dumps({"url": f"http://{bound_host}:{bound_port}"}), file=out, flush=True)
    wait.read()  # until the parent closes the pipe (or dies)
    full_collections.stop()
    server.stop()
    return 0


def cannot_listen(host: str, port: int) -> OSError | None:
    """Why a server could not listen on `host:port` (None: it can). As the server binds (with
    SO_REUSEADDR): the connections of a stack stopped a moment ago, in TIME-WAIT, do not
    hold the port (until 2026-11-30 they refused it for a minute; an outside audit)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc
    return None


def _serve_plain(host: str, port: int, out: IO[str], wait: IO[str]) -> int:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    bound_host, bound_port = server.get_host_and_port()
    print(json.dumps({"url": f"http://{bound_host}:{bound_port}"}), file=out, flush=True)
    wait.read()
    server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--plain", action="store_true", help="moto's own server, no fixes")
    args = parser.parse_args(argv)
    return serve(args.host, args.port, plain=args.plain)


if __name__ == "__main__":
    sys.exit(main())
