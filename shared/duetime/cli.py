"""The `duetime` command line."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from duetime.cli_types import port, positive_int, positive_seconds
from duetime.domain.jobs import Priority, Runtime

if TYPE_CHECKING:
    from duetime.local.stack import Figures, LocalStack

DEFAULT_STATE_DIR = ".duetime"  # duetime.local.keys.DEFAULT_STATE_DIR, without importing it


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="duetime", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = commands.add_parser(
        "worker", help="run a long-lived worker over the queues (the Fargate worker)"
    )
    worker.add_argument("--runtime", choices=[r.value for r in Runtime], default="fargate")
    worker.add_argument(
        "--priority",
        action="append",
        choices=[p.value for p in Priority],
        help="queue priorities to serve (repeatable; default: all)",
    )
    worker.add_argument("--concurrency", type=positive_int, default=8)
    worker.add_argument("--wait-seconds", type=positive_int, default=10, help="long-poll wait")
    worker.add_argument("--visibility-seconds", type=positive_int, default=60)
    worker.add_argument("--stop-timeout-seconds", type=positive_int, default=90)
    worker.set_defaults(run=_run_worker)

    local = commands.add_parser(
        "local",
        help="run the whole system on this machine (embedded moto server, no AWS account)",
        description="Run the whole system on this machine: a moto server on loopback and, "
        "around the same Lambda handlers, emulators of API Gateway (JWT), the sweeper's "
        "schedule, the SQS event source mappings and the Fargate worker. Ctrl-C stops it.",
    )
    local.add_argument("--port", type=port, default=8080, help="the API's port (default 8080)")
    local.add_argument(
        "--tick-seconds",
        type=positive_seconds,
        default=60.0,
        help="how often the sweeper runs (default 60, as the EventBridge rule)",
    )
    local.add_argument(
        "--moto-port", type=port, default=0, help="the moto server's port (default: any free)"
    )
    local.add_argument(
        "--no-private-targets",
        action="store_true",
        help="refuse HTTP targets on loopback and private addresses, as on AWS",
    )
    _state_dir_option(local)
    local.set_defaults(run=_run_local)

    token = commands.add_parser(
        "token",
        help="print a dev token for the local stack's API",
        description="Print a JWT for the local gateway, signed with the key under the state "
        "directory (created if needed). Use it as 'Authorization: Bearer <token>'.",
    )
    token.add_argument("--tenant", required=True, help="the tenant (the token's sub claim)")
    token.add_argument(
        "--ttl-seconds", type=positive_int, default=86_400, help="lifetime (default one day)"
    )
    _state_dir_option(token)
    token.set_defaults(run=_run_token)

    _register_jobs_commands(commands)

    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, OSError) as exc:  # configuration problems: a message, not a traceback
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    return code


def _register_jobs_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`duetime jobs …` lives in duetime.cli_jobs when that module is present."""
    if importlib.util.find_spec("duetime.cli_jobs") is None:
        return
    try:
        from duetime import cli_jobs
    except ImportError as exc:  # the other commands still work
        print(f"duetime: the jobs commands are unavailable: {exc}", file=sys.stderr)
        return
    cli_jobs.register(commands)


def _state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(DEFAULT_STATE_DIR),
        help="where the local signing key and logs live (default .duetime)",
    )


def _run_worker(args: argparse.Namespace) -> int:
    from duetime.services.queue_worker import QueueWorker
    from duetime.wiring import components

    parts = components()
    worker = QueueWorker(
        parts.queue,
        parts.executor,
        Runtime(args.runtime),
        priorities=[Priority(p) for p in args.priority] if args.priority else list(Priority),
        concurrency=args.concurrency,
        wait_seconds=args.wait_seconds,
        visibility_seconds=args.visibility_seconds,
        heartbeat_seconds=max(1.0, args.visibility_seconds / 3),
        stop_timeout_seconds=args.stop_timeout_seconds,
    )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.run()
    return 0


def _run_token(args: argparse.Namespace) -> int:
    from duetime.local.keys import issue_token, key_path, load_or_create_key

    key, created = load_or_create_key(args.state_dir)
    try:
        token = issue_token(args.tenant, args.ttl_seconds, key)
    except ValueError as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    if created:
        print(f"duetime: created the local signing key {key_path(args.state_dir)}", file=sys.stderr)
    print(token)
    return 0


def _run_local(args: argparse.Namespace) -> int:
    from duetime.local.stack import LocalOptions, LocalStack

    options = LocalOptions(
        port=args.port,
        tick_seconds=args.tick_seconds,
        moto_port=args.moto_port,
        allow_private_targets=not args.no_private_targets,
        state_dir=args.state_dir,
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():  # a second Ctrl-C: the user does not want to wait
            os.write(2, b"duetime local: forced stop\n")
            os._exit(130)
        stopping.set()

    # Ctrl-C and SIGTERM (from now on, during start-up too) end the wait below, then stop().
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    console = sys.stdout
    args.state_dir.mkdir(parents=True, exist_ok=True)
    log_path = args.state_dir / "functions.log"
    with log_path.open("w", encoding="utf-8", buffering=1) as log:
        printer = _FiguresPrinter(console)
        stack = LocalStack(options, on_figures=printer, log_stream=log)
        console.write("duetime local: starting...\n")
        console.flush()
        stack.start()
        try:
            console.write(_banner(stack, log_path))
            console.flush()
            while not stopping.wait(0.5):
                pass
            console.write("duetime local: stopping...\n")
            console.flush()
        finally:
            stack.stop()
    console.write("duetime local: stopped\n")
    console.flush()
    return 0


def _banner(stack: LocalStack, log_path: Path) -> str:
    from duetime.local.keys import key_path

    options = stack.options
    token = shlex.join(
        [
            _program(),
            "token",
            "--tenant",
            "demo",
            "--state-dir",
            str(options.state_dir.resolve()),
        ]
    )
    url = stack.api_url
    targets = "refused" if not options.allow_private_targets else "allowed"
    lines = [
        "",
        f"  API        {url}   (GET /health and GET /openapi.json need no token)",
        f"  token      {token}",
        "  try it     export DUETIME_TOKEN=$(" + token + ")",
        f'             curl -H "Authorization: Bearer $DUETIME_TOKEN" {url}/jobs',
        f"  moto       {stack.moto_url}   (DynamoDB, SQS: set AWS_ENDPOINT_URL to look inside)",
        f"  sweeper    every {options.tick_seconds:g} s; Lambda worker: 3 queue pollers, "
        "Fargate worker: 1 loop",
        f"  targets    loopback and private HTTP targets {targets}; plain http allowed",
        f"  logs       {log_path.resolve()}",
        *(
            [f"  key        created {key_path(options.state_dir).resolve()} (mode 0600)"]
            if stack.key_created
            else []
        ),
        "",
        "Live figures below (a line when they change); Ctrl-C stops.",
        "",
    ]
    return "\n".join(lines)


def _program() -> str:
    """How the user can run this same `duetime` (it may not be on PATH: scripts/local)."""
    here = Path(sys.argv[0]).resolve()
    if here.name == "duetime":
        on_path = shutil.which("duetime")
        return "duetime" if on_path and Path(on_path).resolve() == here else str(here)
    return "duetime"


class _FiguresPrinter:
    """Writes the live figures as a timestamped line whenever they change (a terminal wraps a
    long line by itself; rewriting one in place would leave wrapped rows behind)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._last = ""
        self._lock = threading.Lock()

    def __call__(self, figures: Figures) -> None:
        line = figures.line()
        with self._lock:
            if line == self._last:
                return
            self._last = line
            self._out.write(f"{time.strftime('%H:%M:%S')}  {line}\n")
            self._out.flush()


if __name__ == "__main__":
    raise SystemExit(main())
