"""`duetime history query|compact`: the execution history (Parquet in S3, docs/history.md),
queried with DuckDB here or on Athena."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from duetime.cli.format import write_out
from duetime.cli.options import (
    LOCAL_QUERY_MODULES,
    aws_setup,
    missing_local_extra,
    state_dir_option,
)
from duetime.cli.types import http_url, positive_seconds

if TYPE_CHECKING:
    from duetime.history.archive import HistoryBucket


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `history` and its actions to the main CLI's subcommands."""
    history = subparsers.add_parser(
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
        "with --athena (the default when DUETIME_ATHENA_WORKGROUP is set, unless --bucket or "
        "--endpoint-url names the archive to read here).",
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
        help="how long to wait for Athena (default 600; a local query is not timed)",
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
        "--endpoint-url",
        type=http_url,
        help="an S3 endpoint (default $AWS_ENDPOINT_URL, else the local stack's)",
    )
    state_dir_option(parser)


def _history_bucket(args: argparse.Namespace) -> HistoryBucket:
    """The archive: --bucket or $DUETIME_HISTORY_BUCKET on the configured AWS account (or
    $AWS_ENDPOINT_URL), else the local stack started with the same --state-dir."""
    import boto3

    from duetime.history.archive import HistoryBucket
    from duetime.local.endpoint import read_local_endpoint
    from duetime.settings import Env

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
    with aws_setup():
        return HistoryBucket(session.client("s3", endpoint_url=endpoint), name)


def _run_history_query(args: argparse.Namespace) -> int:
    from duetime.history.query import AthenaEngine, LocalEngine, render
    from duetime.settings import Env

    workgroup = args.workgroup or os.environ.get(Env.ATHENA_WORKGROUP, "")
    # A bucket or endpoint named here is the local engine's (with a workgroup set, they were
    # ignored without a word and the query went to Athena; until 2026-11-30).
    located = args.bucket is not None or args.endpoint_url is not None
    if args.athena and located:
        raise RuntimeError("--bucket and --endpoint-url are the local engine's: not with --athena")
    engine: AthenaEngine | LocalEngine
    if args.athena or (workgroup and not args.local and not located):
        import boto3

        database = args.database or os.environ.get(Env.GLUE_DATABASE, "")
        if not workgroup or not database:
            raise RuntimeError(
                "Athena needs a workgroup and a database: --workgroup/--database or "
                "DUETIME_ATHENA_WORKGROUP/DUETIME_GLUE_DATABASE (the stack's outputs)"
            )
        with aws_setup():
            athena = boto3.Session().client("athena")
        engine = AthenaEngine(
            athena,
            workgroup,
            database,
            timeout_seconds=args.timeout_seconds,
        )
    else:
        if missing_local_extra("duetime history query (DuckDB)", LOCAL_QUERY_MODULES):
            return 2
        engine = LocalEngine(_history_bucket(args))
    try:
        result = engine.query(args.sql)
        text = render(result, "json" if args.json else "csv" if args.csv else "table")
    except (OverflowError, ValueError) as exc:  # a value Python's datetime cannot hold
        raise RuntimeError(_unreadable(exc)) from None
    write_out(text, end="")
    return 0


def _unreadable(exc: Exception) -> str:
    """The message of a result Python cannot read: DuckDB's instants range wider than
    Python's (years 1 to 9999, microseconds), and `to_timestamp(<ms>)`, `'infinity'` or a
    TIMESTAMP_NS died with a traceback, in every format, until 2026-12-01 (an outside CLI
    audit). Its first sentence (pyarrow's goes on to advise installing pandas)."""
    reason = str(exc).split(". ", 1)[0].rstrip(".")
    return (
        f"a value of the result cannot be shown ({reason}): a date or time outside the years "
        "1-9999, infinite or in nanoseconds can be cast to text, CAST(x AS VARCHAR)"
    )


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
    write_out(report.summary())
    return 0
