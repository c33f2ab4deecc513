"""`duetime jobs …`: the user commands, a thin client of the HTTP API (docs/cli.md).

The CLI builds request bodies from flags and leaves validation to the API, so the rules live in
one place: locally, only what argparse can check (types, choices, mutually exclusive flags).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

from duetime.cli import jobs_batch
from duetime.cli.client import (
    API_URL_ENV,
    DEFAULT_API_URL,
    DEFAULT_TIMEOUT_SECONDS,
    TOKEN_ENV,
    ApiClient,
    ApiError,
    Unreachable,
    UsageError,
    client_for,
)
from duetime.cli.format import clean, format_job, format_jobs, format_runs, json_text, with_cursor
from duetime.cli.job_body import NO_PAYLOAD, given_flags, job_body
from duetime.cli.types import (
    header_value,
    json_value,
    key_value,
    number,
    positive_int,
    positive_seconds,
    source_detail_type,
)
from duetime.domain.jobs import CatchupMode, JobStatus, Priority, Runtime
from duetime.domain.overlap import Overlap

# --- the parser ---------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `jobs` and its actions to the main CLI's subcommands."""
    jobs = subparsers.add_parser(
        "jobs",
        help="create, inspect and control jobs through the HTTP API",
        description="Create, inspect and control jobs through the duetime HTTP API.",
    )
    jobs.set_defaults(run=run_jobs)
    actions = jobs.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")
    common = _common_options()

    create = actions.add_parser(
        "create",
        parents=[common],
        help="submit a job (POST /jobs)",
        description="Submit a job. Flags build the body; --body sends one as given; "
        "--from-file submits one job per line (POST /jobs/batch).",
    )
    _add_create_options(create)
    create.add_argument(
        "--from-file",
        metavar="JSONL",
        help="submit the job bodies of this file, one per line (- for stdin), instead of the "
        "flags above; exits 1 if any job was refused",
    )

    update = actions.add_parser(
        "update",
        parents=[common],
        help="update or reschedule a job (PATCH /jobs/ID)",
        description="Change some fields of a scheduled or paused job: only the flags given are "
        "sent. A schedule flag replaces the whole schedule, --header the target's headers, "
        "--tag the job's tags. A new schedule re-arms the job.",
    )
    update.add_argument("job_id", metavar="ID")
    _add_create_options(update, updating=True)

    for name, text in [
        ("get", "show a job (GET /jobs/ID)"),
        ("cancel", "cancel a job (DELETE /jobs/ID)"),
        ("pause", "pause a recurring job (POST /jobs/ID/pause)"),
        ("resume", "resume a paused job (POST /jobs/ID/resume)"),
        ("run", "run a job once now, besides its schedule (POST /jobs/ID/run)"),
    ]:
        action = actions.add_parser(name, parents=[common], help=text, description=text)
        action.add_argument("job_id", metavar="ID")
        if name == "run":
            action.add_argument(
                "--idempotency-key",
                type=header_value,
                metavar="KEY",
                help="a replay with the same key returns the same run instead of a second one",
            )

    listing = actions.add_parser("list", parents=[common], help="list jobs (GET /jobs)")
    listing.add_argument("--status", choices=[s.value for s in JobStatus])
    listing.add_argument(
        "--tag",
        dest="tags",
        action="append",
        type=key_value,
        metavar="K=V",
        help="only jobs with this tag (repeatable: all must match)",
    )
    listing.add_argument("--name-prefix", metavar="TEXT", help="only jobs whose name starts so")
    _add_paging_options(listing, "jobs")

    backfill = actions.add_parser(
        "backfill",
        parents=[common],
        help="run a recurring job's past occurrences that never ran (POST /jobs/ID/backfill)",
        description="Run every occurrence of the job's schedule in [--from, --to) that has no "
        "run record yet (at most 1,000; both instants in the past).",
    )
    backfill.add_argument("job_id", metavar="ID")
    backfill.add_argument("--from", dest="start", required=True, metavar="RFC3339")
    backfill.add_argument("--to", dest="end", required=True, metavar="RFC3339")

    runs = actions.add_parser(
        "runs", parents=[common], help="list a job's runs, newest first (GET /jobs/ID/runs)"
    )
    runs.add_argument("job_id", metavar="ID")
    _add_paging_options(runs, "runs")


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("API options")
    # Defaults are read from the environment when the command runs, not at import.
    group.add_argument(
        "--api-url", help=f"API base URL (default: ${API_URL_ENV} or {DEFAULT_API_URL})"
    )
    group.add_argument("--token", type=header_value, help=f"bearer token (default: ${TOKEN_ENV})")
    group.add_argument(
        "--json",
        dest="json_output",
        action="store_true",
        help="print the API's JSON answer instead of a table",
    )
    group.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"HTTP timeout (default: {DEFAULT_TIMEOUT_SECONDS:g})",
    )
    return common


def _add_paging_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--limit", type=positive_int, help=f"{what} per page")
    parser.add_argument("--cursor", help="continue from a previous page's next_cursor")
    parser.add_argument(
        "--all", dest="all_pages", action="store_true", help="follow next_cursor to the end"
    )


def _add_create_options(parser: argparse.ArgumentParser, *, updating: bool = False) -> None:
    schedule = parser.add_argument_group("schedule (one of --at, --delay, --rate, --cron, --after)")
    kind = schedule.add_mutually_exclusive_group()
    kind.add_argument("--at", metavar="RFC3339", help="once, at an instant")
    kind.add_argument("--delay", type=int, metavar="SECONDS", help="once, after a delay")
    kind.add_argument("--rate", type=int, metavar="SECONDS", help="every N seconds")
    kind.add_argument("--cron", metavar="EXPR", help='a cron expression, e.g. "0 9 * * 1-5"')
    kind.add_argument("--after", metavar="JOB_ID", help="each time a run of another job ends")
    schedule.add_argument("--timezone", metavar="IANA", help="time zone of --cron (default UTC)")
    schedule.add_argument("--start-at", metavar="RFC3339", help="first run (--rate, --cron)")
    schedule.add_argument("--end-at", metavar="RFC3339", help="last run (--rate, --cron)")
    schedule.add_argument(
        "--on",
        choices=("succeeded", "failed", "finished"),
        help="which end of the --after job's run triggers (default succeeded)",
    )

    target = parser.add_argument_group("target (one of these)")
    where = target.add_mutually_exclusive_group()
    where.add_argument("--url", help="an HTTP endpoint")
    where.add_argument("--sqs", metavar="QUEUE_URL", help="an SQS queue")
    where.add_argument("--sns", metavar="TOPIC_ARN", help="an SNS topic")
    where.add_argument(
        "--eventbridge",
        type=source_detail_type,
        metavar="SOURCE:DETAIL_TYPE",
        help="an EventBridge event",
    )
    where.add_argument(
        "--lambda", dest="lambda_arn", metavar="FUNCTION_ARN", help="a Lambda function"
    )
    where.add_argument("--handler", metavar="NAME", help="a Python handler in the worker")
    target.add_argument("--method", help="HTTP method of --url (default POST)")
    target.add_argument(
        "--header",
        dest="headers",
        action="append",
        type=key_value,
        metavar="K=V",
        help="HTTP header of --url (repeatable)",
    )
    target.add_argument("--event-bus", metavar="NAME", help="bus name or ARN of --eventbridge")

    job = parser.add_argument_group("job")
    job.add_argument(
        "--payload",
        type=json_value,
        default=NO_PAYLOAD,
        metavar="JSON|@FILE",
        help="what the target receives (in an update, null resets it)",
    )
    job.add_argument("--name", help="a label for people")
    job.add_argument("--description", help="free text for people (up to 1,024 characters)")
    job.add_argument(
        "--tag",
        dest="tags",
        action="append",
        type=key_value,
        metavar="K=V",
        help="a tag to find the job by (repeatable)"
        + ("; replaces all the job's tags" if updating else ""),
    )
    job.add_argument("--priority", choices=[p.value for p in Priority])
    job.add_argument("--runtime", choices=[r.value for r in Runtime])
    job.add_argument("--max-attempts", type=int, metavar="N", help="retry.max_attempts")
    job.add_argument(
        "--backoff-seconds", type=number, metavar="SECONDS", help="retry.backoff_seconds"
    )
    job.add_argument(
        "--max-backoff-seconds", type=number, metavar="SECONDS", help="retry.max_backoff_seconds"
    )
    job.add_argument("--timeout-seconds", type=int, metavar="SECONDS", help="bound of one attempt")
    job.add_argument(
        "--jitter",
        dest="jitter_seconds",
        type=int,
        metavar="SECONDS",
        help="start each occurrence up to this long after its instant (jitter_seconds, 0-900)",
    )
    job.add_argument(
        "--stage",
        dest="stage_seconds",
        type=int,
        metavar="SECONDS",
        help="hand each run to a worker this long before its instant, claimed and "
        "ready to start on it (stage_seconds, 0-10)",
    )
    modes = [c.value for c in CatchupMode]
    job.add_argument(
        "--catchup", choices=modes, metavar="MODE", help=f"after downtime: {'|'.join(modes)}"
    )
    policies = [o.value for o in Overlap]
    job.add_argument(
        "--overlap",
        choices=policies,
        metavar="POLICY",
        help=f"while a run is active (--rate, --cron): {'|'.join(policies)}",
    )
    if updating:
        job.add_argument(
            "--if-match",
            type=positive_int,
            metavar="VERSION",
            help="update only if the job is still at this version (its ETag); else 412",
        )
    else:
        job.add_argument(
            "--idempotency-key",
            type=header_value,
            metavar="KEY",
            help="a replay with the same key returns the same job",
        )
    job.add_argument(
        "--body",
        type=json_value,
        metavar="JSON|@FILE",
        help="send this body as is (instead of the flags above)",
    )


# --- running ------------------------------------------------------------------------------------


def run_jobs(args: argparse.Namespace) -> int:
    """Run one `duetime jobs` action; returns the exit status. Errors are one line on stderr."""
    try:
        client = client_for(args)
        action = _ACTIONS[args.jobs_command]
        data, render = action(client, args)
        text = json_text(data) if args.json_output else render(data)
        if text:
            print(text)
        return 1 if getattr(args, "from_file", None) is not None and jobs_batch.failed(data) else 0
    except UsageError as exc:
        _fail(str(exc))
        return 2
    except (ApiError, Unreachable) as exc:
        _fail(str(exc))
        return 1
    except BrokenPipeError:
        # `duetime jobs list | head`: stop quietly. Point stdout at /dev/null so the
        # interpreter's final flush does not complain.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


def _fail(message: str) -> None:
    print(f"duetime: {clean(message)}", file=sys.stderr)


# --- actions: (client, args) -> (data, how to render it for humans) ----------------------------

Render = Callable[[Any], str]
Action = Callable[[ApiClient, argparse.Namespace], tuple[Any, Render]]


def _job_path(args: argparse.Namespace, suffix: str = "") -> str:
    return "/jobs/" + urllib.parse.quote(args.job_id, safe="") + suffix


def _create(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    if args.from_file is not None:
        extra = given_flags(args)
        extra += ["--body"] * (args.body is not None)
        extra += ["--idempotency-key"] * (args.idempotency_key is not None)
        if extra:
            raise UsageError(f"--from-file cannot be combined with {', '.join(extra)}")
        return jobs_batch.create_from_file(client, args.from_file), jobs_batch.format_results
    if args.body is not None:
        extra = given_flags(args)
        if extra:
            raise UsageError(f"--body cannot be combined with {', '.join(extra)}")
        body = args.body
    else:
        body = job_body(args)
    return client.call("POST", "/jobs", body=body, headers=_keyed(args)), format_job


def _update(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    if args.body is not None:
        extra = given_flags(args)
        if extra:
            raise UsageError(f"--body cannot be combined with {', '.join(extra)}")
        body = args.body
    else:
        body = job_body(args)
        if not body:
            raise UsageError("nothing to update: give at least one flag")
    headers = {"If-Match": f'"{args.if_match}"'} if args.if_match is not None else None
    return client.call("PATCH", _job_path(args), body=body, headers=headers), format_job


def _get(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("GET", _job_path(args)), format_job


def _cancel(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("DELETE", _job_path(args)), format_job


def _pause(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/pause")), format_job


def _resume(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/resume")), format_job


def _run_now(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/run"), headers=_keyed(args)), format_job


def _keyed(args: argparse.Namespace) -> dict[str, str] | None:
    """The Idempotency-Key header of a create or run-now, if given."""
    return {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None


def _backfill(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    body = {"from": args.start, "to": args.end}
    answer = client.call("POST", _job_path(args, "/backfill"), body=body)
    return answer, lambda data: f"{data.get('occurrences')} occurrence(s) sent"


def _list(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    tags = [f"{key}:{value}" for key, value in args.tags or []]
    page = _pages(
        client, "/jobs", args, status=args.status, tag=tags or None, name_prefix=args.name_prefix
    )
    return page, lambda data: with_cursor(format_jobs(data.get("items") or []), data)


def _runs(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    page = _pages(client, _job_path(args, "/runs"), args)
    return page, lambda data: with_cursor(format_runs(data.get("items") or []), data)


def _pages(
    client: ApiClient, path: str, args: argparse.Namespace, **query: str | list[str] | None
) -> Any:
    """One page, or with --all every page from --cursor on, merged into one."""
    cursor: str | None = args.cursor
    page = client.call("GET", path, query={**query, "limit": args.limit, "cursor": cursor})
    if not args.all_pages or not isinstance(page, dict):
        return page
    items = list(page.get("items") or [])
    seen = {cursor}
    while (cursor := page.get("next_cursor")) is not None:
        if cursor in seen:  # a server bug must not loop us forever
            raise ApiError(200, "bad_response", f"the API repeated cursor {cursor!r}", None)
        seen.add(cursor)
        page = client.call("GET", path, query={**query, "limit": args.limit, "cursor": cursor})
        if not isinstance(page, dict):
            raise ApiError(200, "bad_response", "a page is not a JSON object", None)
        items.extend(page.get("items") or [])
    return {"items": items, "next_cursor": None}


_ACTIONS: dict[str, Action] = {
    "create": _create,
    "update": _update,
    "get": _get,
    "list": _list,
    "cancel": _cancel,
    "pause": _pause,
    "resume": _resume,
    "run": _run_now,
    "backfill": _backfill,
    "runs": _runs,
}
