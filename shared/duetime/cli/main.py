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

from duetime.cli import dlq, jobs, timers
from duetime.cli.types import port, positive_int, positive_seconds
from duetime.domain.jobs import Priority, Runtime

if TYPE_CHECKING:
    from duetime.history.archive import HistoryBucket
    from duetime.local.stack import Figures, LocalStack

DEFAULT_STATE_DIR = ".duetime"  # duetime.local.keys.DEFAULT_STATE_DIR, without importing it
EXAMPLE_HISTORY_QUERY = "SELECT status, count(*) AS runs FROM runs GROUP BY status"
# What the `local` extra installs (pyproject.toml) that these commands import: the runtime (the
# Lambda asset, the Fargate image) goes without it.
LOCAL_STACK_MODULES = ("moto", "flask")  # moto[server]
LOCAL_QUERY_MODULES = ("duckdb",)


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
        default=5,
        help="concurrent pollers per lambda queue (default 5, where Lambda's SQS event source "
        "mapping starts)",
    )
    local.add_argument(
        "--no-private-targets",
        action="store_true",
        help="refuse HTTP targets on loopback and private addresses, as on AWS",
    )
    local.add_argument(
        "--hot-ttl-seconds",
        type=positive_int,
        default=None,
        help="how long run records stay in the runs table before they expire to the history "
        "archive (default 30 days; e.g. 10 to watch runs reach `duetime history query`)",
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

    jobs.register(commands)
    _register_history_commands(commands)
    dlq.register(commands)
    timers.register(commands)

    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, OSError) as exc:  # configuration problems: a message, not a traceback
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    return code


def _register_history_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    history = commands.add_parser(
        "history",
        help="query and compact the execution history (Parquet in S3)",
        description="Execution history: runs archived from the runs table when they expire. "
        "See docs/history.md.",
    )
    actions = history.add_subparsers(dest="action", required=True, metavar="ACTION")

    query = actions.add_parser(
        "query",
        help="run SQL on the history table `runs` (DuckDB locally, or Athena)",
        description="Run SQL on the history table `runs`: locally with DuckDB over the Parquet "
        "objects (the local stack's, found through --state-dir, or --bucket), or on Athena "
        "with --athena (the default when DUETIME_ATHENA_WORKGROUP is set).",
    )
    query.add_argument("sql", help='the query, e.g. "SELECT status, count(*) FROM runs GROUP BY 1"')
    engine = query.add_mutually_exclusive_group()
    engine.add_argument("--athena", action="store_true", help="run on Athena")
    engine.add_argument("--local", action="store_true", help="run on DuckDB here")
    output = query.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a JSON array of objects")
    output.add_argument("--csv", action="store_true", help="print CSV with a header row")
    query.add_argument("--workgroup", help="Athena workgroup (default $DUETIME_ATHENA_WORKGROUP)")
    query.add_argument("--database", help="Glue database (default $DUETIME_GLUE_DATABASE)")
    query.add_argument(
        "--timeout-seconds",
        type=positive_seconds,
        default=600.0,
        help="how long to wait for Athena (default 600)",
    )
    _history_location_options(query)
    query.set_defaults(run=_run_history_query)

    compact = actions.add_parser(
        "compact",
        help="merge one day's small Parquet objects into few large ones",
        description="Rewrite the partition dt=DAY of the archive into few large objects, "
        "without losing or duplicating rows. Safe to re-run (also after a crash).",
    )
    compact.add_argument("--dt", required=True, help="the day, YYYY-MM-DD (UTC)")
    _history_location_options(compact)
    compact.set_defaults(run=_run_history_compact)


def _history_location_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bucket",
        help="the history bucket (default $DUETIME_HISTORY_BUCKET, else the local stack's)",
    )
    parser.add_argument(
        "--endpoint-url", help="an S3 endpoint (default $AWS_ENDPOINT_URL, else the local stack's)"
    )
    _state_dir_option(parser)


def _history_bucket(args: argparse.Namespace) -> HistoryBucket:
    """The archive: --bucket or $DUETIME_HISTORY_BUCKET on the configured AWS account (or
    $AWS_ENDPOINT_URL), else the local stack started with the same --state-dir."""
    import boto3

    from duetime.config import Env
    from duetime.history.archive import HistoryBucket
    from duetime.local.stack import read_local_endpoint

    name = args.bucket or os.environ.get(Env.HISTORY_BUCKET, "")
    endpoint = args.endpoint_url
    if name:
        session = boto3.Session()
    else:
        local = read_local_endpoint(args.state_dir)
        if local is None:
            raise RuntimeError(
                "no history bucket: start `duetime local` (from this directory, or pass its "
                "--state-dir), pass --bucket or set DUETIME_HISTORY_BUCKET"
            )
        name, endpoint = local.history_bucket, endpoint or local.endpoint_url
        session = boto3.Session(
            aws_access_key_id="duetime-local",
            aws_secret_access_key="duetime-local",  # noqa: S106 - moto takes any
            region_name=local.region,
        )
    return HistoryBucket(session.client("s3", endpoint_url=endpoint), name)


def _run_history_query(args: argparse.Namespace) -> int:
    from duetime.config import Env
    from duetime.history.query import AthenaEngine, LocalEngine, render

    workgroup = args.workgroup or os.environ.get(Env.ATHENA_WORKGROUP, "")
    engine: AthenaEngine | LocalEngine
    if args.athena or (workgroup and not args.local):
        import boto3

        database = args.database or os.environ.get(Env.GLUE_DATABASE, "")
        if not workgroup or not database:
            raise RuntimeError(
                "Athena needs a workgroup and a database: --workgroup/--database or "
                "DUETIME_ATHENA_WORKGROUP/DUETIME_GLUE_DATABASE (the stack's outputs)"
            )
        engine = AthenaEngine(
            boto3.Session().client("athena"),
            workgroup,
            database,
            timeout_seconds=args.timeout_seconds,
        )
    else:
        if _missing_local_extra("duetime history query (DuckDB)", LOCAL_QUERY_MODULES):
            return 2
        engine = LocalEngine(_history_bucket(args))
    result = engine.query(args.sql)
    sys.stdout.write(render(result, "json" if args.json else "csv" if args.csv else "table"))
    return 0


def _run_history_compact(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from duetime.history.compaction import compact_partition

    bucket = _history_bucket(args)
    try:
        report = compact_partition(bucket, args.dt)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None
    except (BotoCoreError, ClientError) as exc:
        raise RuntimeError(f"s3://{bucket.name}: {exc}") from None
    print(report.summary())
    return 0


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


def _missing_local_extra(command: str, modules: Sequence[str]) -> bool:
    """Whether a module of the `local` extra is missing (then says how to install it)."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"{command} needs the local extra: pip install 'duetime[local]' "
            f"({', '.join(missing)} not installed)",
            file=sys.stderr,
        )
    return bool(missing)


def _run_local(args: argparse.Namespace) -> int:
    if _missing_local_extra("duetime local", LOCAL_STACK_MODULES):
        return 2
    from duetime.local.stack import LocalOptions, LocalStack

    options = LocalOptions(
        port=args.port,
        tick_seconds=args.tick_seconds,
        moto_port=args.moto_port,
        lambda_pollers=args.lambda_pollers,
        allow_private_targets=not args.no_private_targets,
        state_dir=args.state_dir,
        hot_ttl_seconds=args.hot_ttl_seconds,
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
        f"  token      {token}",
        "  try it     export DUETIME_TOKEN=$(" + token + ")",
        f'             curl -H "Authorization: Bearer $DUETIME_TOKEN" {url}/jobs',
        f"  moto       {stack.moto_url}   (DynamoDB, SQS, S3: set AWS_ENDPOINT_URL to look inside)",
        f"  sweeper    every {options.tick_seconds:g} s, {stack.settings.timer_shards} shards at "
        "once; reconciler hourly; Lambda worker: 3 queue pollers, Fargate worker: 1 loop",
        f"  targets    loopback and private HTTP targets {targets}; plain http allowed",
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
