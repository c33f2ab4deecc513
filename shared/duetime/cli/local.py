"""`duetime local` and `duetime token`: the whole system on this machine, and a dev token for
its API."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from botocore.exceptions import BotoCoreError

from duetime.cli.client import DEFAULT_API_URL
from duetime.cli.format import write_out
from duetime.cli.options import (
    LOCAL_STACK_MODULES,
    exit_now,
    missing_local_extra,
    state_dir_option,
    stop_signals,
)
from duetime.cli.types import (
    claim_lead_ms,
    http_url,
    port,
    positive_int,
    positive_seconds,
    tenant_target_names,
    whole,
)
from duetime.local.lambda_runtime import LAMBDA_MAX_POLLERS
from duetime.settings import Env

if TYPE_CHECKING:
    from duetime.local.figures import Figures
    from duetime.local.stack import LocalOptions, LocalStack
    from duetime.settings import ApiSettings

EXAMPLE_HISTORY_QUERY = "SELECT status, count(*) AS runs FROM runs GROUP BY status"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `local` and `token` to the main CLI's subcommands."""
    local = subparsers.add_parser(
        "local",
        help="run the whole system on this machine (a moto server, no AWS account)",
        description="Run the whole system on this machine: a moto server on loopback (in a "
        "process of its own) and, "
        "around the same Lambda handlers, emulators of API Gateway (JWT), the sweeper's "
        "schedule, the SQS event source mappings and the Fargate worker. Ctrl-C stops it.",
    )
    local.add_argument("--port", type=port, default=8080, help="the API's port (default 8080)")
    local.add_argument(
        "--tick-seconds",
        type=positive_seconds,
        default=60.0,
        help="how often the shards are swept (default 60, as the EventBridge rule)",
    )
    local.add_argument(
        "--moto-port", type=port, default=0, help="the moto server's port (default: any free)"
    )
    local.add_argument(
        "--lambda-pollers",
        type=positive_int,
        default=LAMBDA_MAX_POLLERS,
        help="the most concurrent pollers per lambda queue (default %(default)s, the normal "
        "priority mapping's maximum concurrency; an idle queue has one, five start at once "
        "when messages wait, then one more every 0.2 s as Lambda scales)",
    )
    local.add_argument(
        "--lanes",
        type=whole,
        choices=range(1, 10),
        default=1,
        metavar="N",
        help="queues (lanes) per runtime and priority, 1..9, as the construct's `queue_lanes` "
        "(default 1)",
    )
    local.add_argument(
        "--claim-lead-ms",
        type=claim_lead_ms,
        default=1000,
        metavar="MS",
        help="how long before its instant a worker may claim a run, 0..2000 (default 1000; "
        "0: on the instant); a change acknowledged later no longer stops that occurrence",
    )
    local.add_argument(
        "--no-private-targets",
        action="store_true",
        help="refuse HTTP targets on loopback and private addresses, as on AWS",
    )
    local.add_argument(
        "--tenant-target-names",
        type=tenant_target_names,
        default=os.environ.get(Env.TENANT_TARGET_NAMES, ""),  # (argparse checks it too)
        metavar="PATTERN",
        help="the AWS resources a tenant's jobs may name, by name: e.g. '{tenant}-*' (default: "
        f"{Env.TENANT_TARGET_NAMES}, else any; docs/security.md)",
    )
    local.add_argument(
        "--hot-ttl-seconds",
        type=positive_int,
        default=None,
        help="how long run records stay in the runs table before they expire to the history "
        "archive (default 30 days; e.g. 10 to watch runs reach `duetime history query`)",
    )
    local.add_argument(
        "--console-client-id",
        metavar="ID",
        help="the web console signs in with OpenID Connect (authorization code + PKCE) as this "
        f"client (default: {Env.CONSOLE_CLIENT_ID}; without one, a pasted token)",
    )
    local.add_argument(
        "--console-issuer",
        type=http_url,
        metavar="URL",
        help="the OpenID provider the console signs in at (its discovery document is "
        f"URL/.well-known/openid-configuration; default: {Env.CONSOLE_ISSUER})",
    )
    local.add_argument(
        "--console-scopes",
        metavar="SCOPES",
        help=f"the scopes the console asks for (default: {Env.CONSOLE_SCOPES}, else 'openid')",
    )
    state_dir_option(local)
    local.set_defaults(run=_run_local)

    token = subparsers.add_parser(
        "token",
        help="print a dev token for the local stack's API",
        description="Print a JWT for the local gateway, signed with the key under the state "
        "directory (created if needed). Use it as 'Authorization: Bearer <token>'.",
    )
    token.add_argument("--tenant", required=True, help="the tenant (the token's sub claim)")
    token.add_argument(
        "--ttl-seconds", type=positive_int, default=86_400, help="lifetime (default one day)"
    )
    token.add_argument(
        "--scope",
        dest="scopes",
        action="append",
        default=[],
        metavar="SCOPE",
        help="a scope the token carries in its scope claim (repeatable), e.g. duetime/operator",
    )
    state_dir_option(token)
    token.set_defaults(run=_run_token)


def _run_token(args: argparse.Namespace) -> int:
    from duetime.local.keys import issue_token, key_path, load_or_create_key

    key, created = load_or_create_key(args.state_dir)
    try:
        token = issue_token(args.tenant, args.ttl_seconds, key, scopes=_scopes(args.scopes))
    except ValueError as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    if created:
        print(f"duetime: created the local signing key {key_path(args.state_dir)}", file=sys.stderr)
    write_out(token)
    return 0


def _scopes(given: list[str]) -> tuple[str, ...]:
    """The scope claim is space-separated: a scope is one visible word."""
    for scope in given:
        if not scope or not scope.isprintable() or not scope.isascii() or " " in scope:
            raise ValueError(f"a scope is one word of visible ASCII characters, not {scope!r}")
    return tuple(dict.fromkeys(given))


def _run_local(args: argparse.Namespace) -> int:
    if missing_local_extra("duetime local", LOCAL_STACK_MODULES):
        return 2
    from duetime.local.stack import LocalOptions

    try:
        api = _api_settings(args)
    except ValueError as exc:
        print(f"duetime local: {exc}", file=sys.stderr)
        return 2
    options = LocalOptions(
        port=args.port,
        tick_seconds=args.tick_seconds,
        moto_port=args.moto_port,
        lambda_pollers=args.lambda_pollers,
        lanes=args.lanes,
        claim_lead_ms=args.claim_lead_ms,
        allow_private_targets=not args.no_private_targets,
        state_dir=args.state_dir,
        hot_ttl_seconds=args.hot_ttl_seconds,
        tenant_target_names=args.tenant_target_names,
        api=api,
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():  # a second Ctrl-C: the user does not want to wait
            os.write(2, b"duetime local: forced stop\n")
            os._exit(130)
        stopping.set()

    # Ctrl-C and SIGTERM (from now on, during start-up too) end the stack's wait, then stop().
    with stop_signals(on_signal):
        return _serve(args, options, stopping)


def _serve(args: argparse.Namespace, options: LocalOptions, stopping: threading.Event) -> int:
    from duetime.local.keys import ensure_state_dir
    from duetime.local.stack import JOIN_TIMEOUT_SECONDS, LocalStack

    console = sys.stdout
    ensure_state_dir(args.state_dir)  # (a KeyFileError is a message of the CLI)
    # One stack a state directory: a second rewrote the first's log and took its local.json,
    # then removed it on its stop (until 2026-11-30; found by an outside audit). Held until
    # the process ends (the lock goes with it, however it ends).
    import fcntl  # POSIX: the local stack runs on Linux and macOS

    log_path = args.state_dir / "functions.log"
    try:
        lock = (args.state_dir / "local.lock").open("w")
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        log = log_path.open("w", encoding="utf-8", buffering=1)
    except BlockingIOError:
        print(
            f"duetime local: another duetime local uses {args.state_dir}: stop it, or "
            "choose another --state-dir",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:  # a read-only state directory (a raw errno until 2026-11-30)
        print(f"duetime local: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    with log:
        printer = _FiguresPrinter(console)
        stack = LocalStack(options, on_figures=printer, log_stream=log)
        console.write("duetime local: starting...\n")
        console.flush()
        try:
            stack.start()
        except BotoCoreError as exc:  # moto went away while starting (not a traceback)
            print(f"duetime local: the emulator stopped answering: {exc}", file=sys.stderr)
            return 1
        try:
            console.write(_banner(stack, log_path))
            console.flush()
            while not stopping.wait(0.5) and stack.broken is None:
                pass
            if stack.broken is not None:
                print(f"duetime local: {stack.broken}; stopping", file=sys.stderr)
            console.write(
                f"duetime local: stopping... waiting up to {JOIN_TIMEOUT_SECONDS:.0f} s for runs"
                " in flight (Ctrl-C again to leave now)\n"
            )
            console.flush()
        finally:
            stack.stop()
    if stack.unfinished:
        count = len(stack.unfinished)
        console.write(
            f"duetime local: {count} worker{'s' * (count > 1)} did not finish within"
            f" {JOIN_TIMEOUT_SECONDS:.0f} s ({', '.join(stack.unfinished)}): their runs in"
            " flight are abandoned with the stack's state\n"
        )
    console.write("duetime local: stopped\n")
    # Now, not when the targets of runs still in flight return (since 2026-11-30).
    exit_now(0 if stack.broken is None else 1)


def _api_settings(args: argparse.Namespace) -> ApiSettings:
    """The API function's settings from the environment, with the console's sign-in as the
    --console-* options say (each overrides its variable)."""
    from dataclasses import replace

    from duetime.settings import ApiSettings

    try:
        settings = ApiSettings.from_env()
    except RuntimeError as exc:  # e.g. a client id in the environment without an issuer
        raise ValueError(str(exc)) from None
    console = settings.console
    console = replace(
        console,
        client_id=(args.console_client_id or "").strip() or console.client_id,
        issuer=args.console_issuer or console.issuer,
        scopes=" ".join((args.console_scopes or "").split()) or console.scopes,
    )
    if console.client_id and not console.issuer:
        raise ValueError("--console-client-id needs --console-issuer (the OpenID provider's URL)")
    return replace(settings, console=console)


def _console_line(stack: LocalStack) -> str:
    url = f"{stack.api_url}/console/"
    console = stack.options.api.console if stack.options.api else None
    if console is not None and console.client_id:
        how = f"signs in with OpenID Connect at {console.issuer}, client {console.client_id}"
        return f"  console    {url}   (the web console: {how})"
    return f"  console    {url}   (the web console: sign in with the token below)"


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
    history = shlex.join(
        [
            _program(),
            "history",
            "query",
            "--state-dir",
            str(options.state_dir.resolve()),
            EXAMPLE_HISTORY_QUERY,
        ]
    )
    ttl = stack.settings.run_ttl_seconds
    hot = (
        f"{ttl} s after they are due (--hot-ttl-seconds)"
        if options.hot_ttl_seconds
        else f"when they expire ({ttl // 86_400} days; --hot-ttl-seconds shortens it)"
    )
    targets = "refused" if not options.allow_private_targets else "allowed"
    lines = [
        "",
        f"  API        {url}   (GET /health and GET /openapi.json need no token)",
        _console_line(stack),
        f"  token      {token}",
        "  try it     export DUETIME_TOKEN=$(" + token + ")",
        # `duetime jobs` goes to http://127.0.0.1:8080 unless told: on another port it found
        # no stack (until 2026-11-30 the banner did not say; an outside audit).
        *([] if url == DEFAULT_API_URL else [f"             export DUETIME_API_URL={url}"]),
        f'             curl -H "Authorization: Bearer $DUETIME_TOKEN" {url}/jobs',
        f"  moto       {stack.moto_url}   (DynamoDB, SQS, S3: set AWS_ENDPOINT_URL to look inside)",
        f"  sweeper    every {options.tick_seconds:g} s, {stack.settings.timer_shards} shards at "
        f"once; reconciler hourly; Lambda worker: {3 * options.lanes} queues, "
        f"1-{options.lambda_pollers} pollers "
        "each; Fargate worker: 1 loop",
        f"  targets    loopback and private HTTP targets {targets}; plain http allowed",
        *(
            [f"             AWS resources by tenant: named {names!r} (--tenant-target-names)"]
            if (names := stack.settings.tenant_target_names)
            else []
        ),
        f"  history    runs move to s3://{stack.settings.history_bucket}/history/ {hot}; query:",
        f"             {history}",
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
