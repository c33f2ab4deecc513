"""`duetime jobs …`: the user commands, a thin client of the HTTP API (docs/cli.md).

The CLI builds request bodies from flags and leaves validation to the API, so the rules live in
one place: locally, only what argparse can check (types, choices, mutually exclusive flags).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
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
from duetime.cli.format import (
    format_job,
    format_jobs,
    format_runs,
    json_text,
    with_cursor,
    write_out,
)
from duetime.cli.job_body import add_body_options, given_flags, job_body, whole_in_an_update
from duetime.cli.types import (
    header_value,
    key_value,
    positive_int,
    positive_seconds,
    utf8_text,
    version,
)
from duetime.domain.jobs import JobStatus
from duetime.domain.text import clean

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
    add_body_options(create)
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
    update.add_argument("job_id", type=utf8_text, metavar="ID")
    add_body_options(update, updating=True)

    for name, text in [
        ("get", "show a job (GET /jobs/ID)"),
        ("cancel", "cancel a job (DELETE /jobs/ID)"),
        ("pause", "pause a recurring job (POST /jobs/ID/pause)"),
        ("resume", "resume a paused job (POST /jobs/ID/resume)"),
        ("run", "run a job once now, besides its schedule (POST /jobs/ID/run)"),
    ]:
        action = actions.add_parser(name, parents=[common], help=text, description=text)
        action.add_argument("job_id", type=utf8_text, metavar="ID")
        if name != "get":
            action.add_argument(
                "--if-match",
                type=version,
                metavar="VERSION",
                help=f'{name} only if the job is still at this version (3, or its ETag "3"); '
                "else 412",
            )
        if name == "run":
            action.add_argument(
                "--idempotency-key",
                type=header_value,
                metavar="KEY",
                help="a replay with the same key returns the same run instead of a second one",
            )

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list jobs (GET /jobs)",
        description="list jobs, newest first",
    )
    listing.add_argument("--status", choices=[s.value for s in JobStatus])
    listing.add_argument(
        "--tag",
        dest="tags",
        action="append",
        type=key_value,
        metavar="K=V",
        help="only jobs with this tag (repeatable: all must match)",
    )
    listing.add_argument(
        "--name-prefix", type=utf8_text, metavar="TEXT", help="only jobs whose name starts so"
    )
    _add_paging_options(listing, "jobs")

    backfill = actions.add_parser(
        "backfill",
        parents=[common],
        help="run a recurring job's past occurrences that never ran (POST /jobs/ID/backfill)",
        description="Run every occurrence of the job's schedule in [--from, --to) that has no "
        "run record yet (at most 1,000; both instants in the past).",
    )
    backfill.add_argument("job_id", type=utf8_text, metavar="ID")
    backfill.add_argument(
        "--from",
        dest="start",
        type=utf8_text,
        required=True,
        metavar="RFC3339",
        help="the range's start, inclusive",
    )
    backfill.add_argument(
        "--to",
        dest="end",
        type=utf8_text,
        required=True,
        metavar="RFC3339",
        help="the range's end, exclusive (not after now)",
    )
    backfill.add_argument(
        "--if-match",
        type=version,
        metavar="VERSION",
        help='backfill only if the job is still at this version (3, or its ETag "3"); else 412',
    )

    runs = actions.add_parser(
        "runs", parents=[common], help="list a job's runs, newest first (GET /jobs/ID/runs)"
    )
    runs.add_argument("job_id", type=utf8_text, metavar="ID")
    _add_paging_options(runs, "runs")


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("API options")
    # Defaults are read from the environment when the command runs, not at import.
    group.add_argument(
        "--api-url",
        type=utf8_text,
        metavar="URL",
        help=f"API base URL (default: ${API_URL_ENV} or {DEFAULT_API_URL})",
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
    parser.add_argument("--limit", type=positive_int, metavar="N", help=f"{what} per page")
    parser.add_argument(
        "--cursor", type=utf8_text, metavar="C", help="continue from a previous page's next_cursor"
    )
    parser.add_argument(
        "--all", dest="all_pages", action="store_true", help="follow next_cursor to the end"
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
            write_out(text)  # a closed or full stdout is main's to report
        return jobs_batch.exit_status(data) if getattr(args, "from_file", None) is not None else 0
    except UsageError as exc:
        _fail(str(exc))
        return 2
    except (ApiError, Unreachable) as exc:
        _fail(str(exc))
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
        whole_in_an_update(args)
        body = job_body(args)
        if not body:
            raise UsageError("nothing to update: give at least one flag")
    return client.call("PATCH", _job_path(args), body=body, headers=_matching(args)), format_job


def _get(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("GET", _job_path(args)), format_job


def _cancel(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("DELETE", _job_path(args), headers=_matching(args)), format_job


def _pause(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/pause"), headers=_matching(args)), format_job


def _resume(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/resume"), headers=_matching(args)), format_job


def _run_now(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    headers = (_keyed(args) or {}) | (_matching(args) or {})
    return client.call("POST", _job_path(args, "/run"), headers=headers or None), format_job


def _keyed(args: argparse.Namespace) -> dict[str, str] | None:
    """The Idempotency-Key header of a create or run-now, if given."""
    return {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None


def _matching(args: argparse.Namespace) -> dict[str, str] | None:
    """The If-Match header of a change (--if-match), if given."""
    return {"If-Match": f'"{args.if_match}"'} if args.if_match is not None else None


def _backfill(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    body = {"from": args.start, "to": args.end}
    answer = client.call("POST", _job_path(args, "/backfill"), body=body, headers=_matching(args))
    count = answer.get("occurrences") if isinstance(answer, dict) else None
    if isinstance(count, bool) or not isinstance(count, int):
        raise ApiError(200, "bad_response", "the API answered no count of occurrences", None)
    return answer, lambda data: f"{count} occurrence(s) sent"


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
    first = {**query, "limit": args.limit, "cursor": cursor}
    if not args.all_pages:
        return _page(client.call("GET", path, query=first))
    page = _patient_page(client, path, first)
    items = list(page.get("items") or [])
    seen = {cursor}
    while (cursor := page.get("next_cursor")) is not None:
        if cursor in seen:  # a server bug must not loop us forever
            raise ApiError(200, "bad_response", f"the API repeated cursor {cursor!r}", None)
        seen.add(cursor)
        page = _patient_page(client, path, {**query, "limit": args.limit, "cursor": cursor})
        items.extend(page.get("items") or [])
    return {"items": items, "next_cursor": None}


def _patient_page(
    client: ApiClient, path: str, query: dict[str, str | int | list[str] | None]
) -> dict[str, Any]:
    """A page of --all, a `429` waited out (its Retry-After, 1 s without one, up to
    jobs_batch.MAX_RETRY_AFTER_S) up to RATE_RETRIES times, as --from-file does: until
    2026-12-01 the first `429` dropped every page read, exit 1 (an outside CLI audit)."""
    for _ in range(jobs_batch.RATE_RETRIES):
        try:
            return _page(client.call("GET", path, query=query))
        except ApiError as exc:
            wait = jobs_batch.wait_seconds(exc.retry_after)
            if exc.status != 429 or math.isinf(wait):  # (a longer wait: the error, as it is)
                raise
            jobs_batch.say_waiting(wait, clean(str(exc)))
            time.sleep(wait)
    return _page(client.call("GET", path, query=query))  # the last try: its 429 is the error


def _page(answer: Any) -> dict[str, Any]:
    """A page as the API answers it: `{"items": [...], "next_cursor": "…" or null}`."""
    if (
        not isinstance(answer, dict)
        or not isinstance(answer.get("items") or [], list)
        or not isinstance(answer.get("next_cursor"), str | None)
    ):
        raise ApiError(200, "bad_response", "the API answered something that is not a page", None)
    return answer


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
