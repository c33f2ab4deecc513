"""`duetime jobs …`: the user commands, a thin client of the HTTP API (docs/cli.md).

The CLI builds request bodies from flags and leaves validation to the API, so the rules live in
one place: locally, only what argparse can check (types, choices, mutually exclusive flags).
HTTP is `urllib.request` on purpose: no dependency for a handful of JSON calls.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from duetime import __version__
from duetime.cli.types import positive_float, positive_int
from duetime.domain.jobs import CatchupMode, JobStatus, Priority, Runtime

API_URL_ENV = "DUETIME_API_URL"
TOKEN_ENV = "DUETIME_TOKEN"  # noqa: S105 (the variable's name, not a secret)
DEFAULT_API_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_SECONDS = 30.0

# Human output is cut here (a run's error can hold 64 KiB of a target's answer, a payload as
# much); --json shows everything.
MAX_CELL_CHARS = 60
MAX_VALUE_CHARS = 200


class UsageError(Exception):
    """The command cannot be sent as given (exit 2)."""


class Unreachable(Exception):
    """No HTTP answer from the API (exit 1)."""


class ApiError(Exception):
    """The API answered with an error (exit 1)."""

    def __init__(self, status: int, code: str, message: str, field: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.message}"
        return f"{text} (field: {self.field})" if self.field else text


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
        description="Submit a job. Flags build the body; --body sends one as given.",
    )
    _add_create_options(create)

    for name, text in [
        ("get", "show a job (GET /jobs/ID)"),
        ("cancel", "cancel a job (DELETE /jobs/ID)"),
        ("pause", "pause a recurring job (POST /jobs/ID/pause)"),
        ("resume", "resume a paused job (POST /jobs/ID/resume)"),
        ("run", "run a job once now, besides its schedule (POST /jobs/ID/run)"),
    ]:
        action = actions.add_parser(name, parents=[common], help=text, description=text)
        action.add_argument("job_id", metavar="ID")

    listing = actions.add_parser("list", parents=[common], help="list jobs (GET /jobs)")
    listing.add_argument("--status", choices=[s.value for s in JobStatus])
    _add_paging_options(listing, "jobs")

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
    group.add_argument("--token", type=_header_value, help=f"bearer token (default: ${TOKEN_ENV})")
    group.add_argument(
        "--json",
        dest="json_output",
        action="store_true",
        help="print the API's JSON answer instead of a table",
    )
    group.add_argument(
        "--timeout",
        type=positive_float,
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


def _add_create_options(parser: argparse.ArgumentParser) -> None:
    schedule = parser.add_argument_group("schedule (one of --at, --delay, --rate, --cron)")
    kind = schedule.add_mutually_exclusive_group()
    kind.add_argument("--at", metavar="RFC3339", help="once, at an instant")
    kind.add_argument("--delay", type=int, metavar="SECONDS", help="once, after a delay")
    kind.add_argument("--rate", type=int, metavar="SECONDS", help="every N seconds")
    kind.add_argument("--cron", metavar="EXPR", help='a cron expression, e.g. "0 9 * * 1-5"')
    schedule.add_argument("--timezone", metavar="IANA", help="time zone of --cron (default UTC)")
    schedule.add_argument("--start-at", metavar="RFC3339", help="first run (--rate, --cron)")
    schedule.add_argument("--end-at", metavar="RFC3339", help="last run (--rate, --cron)")

    target = parser.add_argument_group("target (one of these)")
    where = target.add_mutually_exclusive_group()
    where.add_argument("--url", help="an HTTP endpoint")
    where.add_argument("--sqs", metavar="QUEUE_URL", help="an SQS queue")
    where.add_argument("--sns", metavar="TOPIC_ARN", help="an SNS topic")
    where.add_argument(
        "--eventbridge",
        type=_source_detail_type,
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
        type=_key_value,
        metavar="K=V",
        help="HTTP header of --url (repeatable)",
    )
    target.add_argument("--event-bus", metavar="NAME", help="bus name or ARN of --eventbridge")

    job = parser.add_argument_group("job")
    job.add_argument(
        "--payload", type=_json_value, metavar="JSON|@FILE", help="what the target receives"
    )
    job.add_argument("--name", help="a label for people")
    job.add_argument("--priority", choices=[p.value for p in Priority])
    job.add_argument("--runtime", choices=[r.value for r in Runtime])
    job.add_argument("--max-attempts", type=int, metavar="N", help="retry.max_attempts")
    job.add_argument(
        "--backoff-seconds", type=_number, metavar="SECONDS", help="retry.backoff_seconds"
    )
    job.add_argument(
        "--max-backoff-seconds", type=_number, metavar="SECONDS", help="retry.max_backoff_seconds"
    )
    job.add_argument("--timeout-seconds", type=int, metavar="SECONDS", help="bound of one attempt")
    modes = [c.value for c in CatchupMode]
    job.add_argument(
        "--catchup", choices=modes, metavar="MODE", help=f"after downtime: {'|'.join(modes)}"
    )
    job.add_argument(
        "--idempotency-key",
        type=_header_value,
        metavar="KEY",
        help="a replay with the same key returns the same job",
    )
    job.add_argument(
        "--body",
        type=_json_value,
        metavar="JSON|@FILE",
        help="send this body as is (instead of the flags above)",
    )


# --- argparse types -----------------------------------------------------------------------------


def _number(text: str) -> int | float:
    """A number kept as the user wrote it: `2` is sent as 2, `2.5` as 2.5."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _json_value(text: str) -> Any:
    """JSON text, or `@path` to read it from a file (`@-`: standard input)."""
    source = "JSON"
    if text.startswith("@"):
        path = text[1:]
        source = "standard input" if path == "-" else path
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as file:
                    text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise argparse.ArgumentTypeError(f"cannot read {path}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        quoted = source == "JSON" and not text.lstrip().startswith(("{", "[", '"'))
        hint = f" (a string must be quoted: '\"{text}\"')" if quoted else ""
        raise argparse.ArgumentTypeError(f"{source} is not valid JSON: {exc}{hint}") from None


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not K=V")
    return key.strip(), value


def _source_detail_type(text: str) -> tuple[str, str]:
    source, sep, detail_type = text.partition(":")
    if not sep or not source or not detail_type:
        raise argparse.ArgumentTypeError(f"{text!r} is not SOURCE:DETAIL_TYPE")
    return source, detail_type


def _header_value(text: str) -> str:
    value = text.strip()
    if not value or any(_is_control(char) for char in value):
        raise argparse.ArgumentTypeError("must be non-empty, without control characters")
    return value


# --- running ------------------------------------------------------------------------------------


def run_jobs(args: argparse.Namespace) -> int:
    """Run one `duetime jobs` action; returns the exit status. Errors are one line on stderr."""
    try:
        client = client_for(args)
        action = _ACTIONS[args.jobs_command]
        data, render = action(client, args)
        text = _json_text(data) if args.json_output else render(data)
        if text:
            print(text)
        return 0
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
    print(f"duetime: {_clean(message)}", file=sys.stderr)


def client_for(args: argparse.Namespace) -> ApiClient:
    base_url = (args.api_url or os.environ.get(API_URL_ENV) or DEFAULT_API_URL).rstrip("/")
    try:
        parts = urllib.parse.urlsplit(base_url)
    except ValueError:
        parts = urllib.parse.urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"the API URL must be http:// or https://, not {base_url!r}")
    token = args.token
    if token is None:
        token = os.environ.get(TOKEN_ENV, "").strip()
        if any(_is_control(char) for char in token):
            raise UsageError(f"{TOKEN_ENV} holds control characters")
    if not token:
        raise UsageError(
            f"no API token: pass --token or set {TOKEN_ENV} "
            '(for the local stack: export DUETIME_TOKEN="$(duetime token --tenant me)")'
        )
    return ApiClient(base_url, token, args.timeout)


@dataclass(frozen=True)
class ApiClient:
    """JSON over HTTP with a bearer token. Raises ApiError or Unreachable."""

    base_url: str
    token: str
    timeout: float

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | None] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        url = self.base_url + path
        params = {key: str(value) for key, value in (query or {}).items() if value is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        # The scheme was checked in client_for: http(s) only, never file:.
        request = urllib.request.Request(url, method=method)  # noqa: S310
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", f"duetime-cli/{__version__}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        if body is not None:
            request.add_header("Content-Type", "application/json")
            request.data = json.dumps(body, separators=(",", ":")).encode()
        try:
            opener = urllib.request.build_opener(_RefuseRedirects)
            with opener.open(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            try:
                error_body = exc.read()
            except (OSError, HTTPException):
                error_body = b""
            finally:
                exc.close()
            raise _api_error(exc.code, exc.reason, error_body) from None
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except (OSError, HTTPException) as exc:  # timeouts and resets after connecting
            raise self._unreachable(exc) from None
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(
                status, "bad_response", "the API answered with something not JSON", None
            ) from None

    def _unreachable(self, reason: object) -> Unreachable:
        if isinstance(reason, ConnectionRefusedError):
            return Unreachable(
                f'cannot reach the API at {self.base_url} — is "duetime local" running?'
            )
        if isinstance(reason, TimeoutError):
            return Unreachable(f"no answer from the API at {self.base_url} in {self.timeout:g} s")
        return Unreachable(f"cannot reach the API at {self.base_url}: {reason}")


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """The API never redirects, and urllib would carry the bearer token to wherever a redirect
    points: a 3xx is reported as an error instead."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> None:
        return None


def _api_error(status: int, reason: object, raw: bytes) -> ApiError:
    """The error from the API's `{"error": {"code", "message", "field"}}`, or the best we have
    when something in between (a proxy, a gateway) answered instead."""
    try:
        error = json.loads(raw)["error"]
        code, message = str(error["code"]), str(error["message"])
        field = error.get("field")
        return ApiError(status, code, message, str(field) if field else None)
    except (ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError):
        text = raw.decode("utf-8", "replace").strip()
        return ApiError(status, "http_error", _cut(" ".join(text.split())) or str(reason), None)


# --- actions: (client, args) -> (data, how to render it for humans) ----------------------------

Render = Callable[[Any], str]
Action = Callable[[ApiClient, argparse.Namespace], tuple[Any, Render]]


def _job_path(args: argparse.Namespace, suffix: str = "") -> str:
    return "/jobs/" + urllib.parse.quote(args.job_id, safe="") + suffix


def _create(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    if args.body is not None:
        extra = [flag for flag, dest in _BODY_FLAGS if getattr(args, dest) is not None]
        if extra:
            raise UsageError(f"--body cannot be combined with {', '.join(extra)}")
        body = args.body
    else:
        body = job_body(args)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    return client.call("POST", "/jobs", body=body, headers=headers), format_job


def _get(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("GET", _job_path(args)), format_job


def _cancel(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("DELETE", _job_path(args)), format_job


def _pause(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/pause")), format_job


def _resume(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/resume")), format_job


def _run_now(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    return client.call("POST", _job_path(args, "/run")), format_job


def _list(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    page = _pages(client, "/jobs", args, status=args.status)
    return page, lambda data: _with_cursor(format_jobs(data.get("items") or []), data)


def _runs(client: ApiClient, args: argparse.Namespace) -> tuple[Any, Render]:
    page = _pages(client, _job_path(args, "/runs"), args)
    return page, lambda data: _with_cursor(format_runs(data.get("items") or []), data)


def _pages(client: ApiClient, path: str, args: argparse.Namespace, **query: str | None) -> Any:
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
    "get": _get,
    "list": _list,
    "cancel": _cancel,
    "pause": _pause,
    "resume": _resume,
    "run": _run_now,
    "runs": _runs,
}

# Flags that build the body, as (flag, dest): none of them may be combined with --body.
_BODY_FLAGS = [
    ("--at", "at"),
    ("--delay", "delay"),
    ("--rate", "rate"),
    ("--cron", "cron"),
    ("--timezone", "timezone"),
    ("--start-at", "start_at"),
    ("--end-at", "end_at"),
    ("--url", "url"),
    ("--sqs", "sqs"),
    ("--sns", "sns"),
    ("--eventbridge", "eventbridge"),
    ("--lambda", "lambda_arn"),
    ("--handler", "handler"),
    ("--method", "method"),
    ("--header", "headers"),
    ("--event-bus", "event_bus"),
    ("--payload", "payload"),
    ("--name", "name"),
    ("--priority", "priority"),
    ("--runtime", "runtime"),
    ("--max-attempts", "max_attempts"),
    ("--backoff-seconds", "backoff_seconds"),
    ("--max-backoff-seconds", "max_backoff_seconds"),
    ("--timeout-seconds", "timeout_seconds"),
    ("--catchup", "catchup"),
]


def job_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /jobs body for the create flags. Flags go in as given, even in combinations the
    API refuses (`--timezone` with `--rate`): its answer names the field."""
    schedule: dict[str, Any] = {}
    for key, value in [
        ("at", args.at),
        ("delay_seconds", args.delay),
        ("rate_seconds", args.rate),
        ("cron", args.cron),
        ("timezone", args.timezone),
        ("start_at", args.start_at),
        ("end_at", args.end_at),
    ]:
        if value is not None:
            schedule[key] = value

    target: dict[str, Any] = {}
    if args.url is not None:
        target = {"type": "http", "url": args.url}
    elif args.sqs is not None:
        target = {"type": "sqs", "queue_url": args.sqs}
    elif args.sns is not None:
        target = {"type": "sns", "topic_arn": args.sns}
    elif args.eventbridge is not None:
        source, detail_type = args.eventbridge
        target = {"type": "eventbridge", "source": source, "detail_type": detail_type}
    elif args.lambda_arn is not None:
        target = {"type": "lambda", "function_arn": args.lambda_arn}
    elif args.handler is not None:
        target = {"type": "handler", "name": args.handler}
    if args.method is not None:
        target["method"] = args.method
    if args.headers:
        target["headers"] = dict(args.headers)
    if args.event_bus is not None:
        target["event_bus"] = args.event_bus

    body: dict[str, Any] = {"schedule": schedule, "target": target}
    if args.payload is not None:
        body["payload"] = args.payload
    for key in ("name", "priority", "runtime", "timeout_seconds", "catchup"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    retry = {
        key: getattr(args, key)
        for key in ("max_attempts", "backoff_seconds", "max_backoff_seconds")
        if getattr(args, key) is not None
    }
    if retry:
        body["retry"] = retry
    return body


# --- human output -------------------------------------------------------------------------------


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def format_duration(seconds: object) -> str:
    """`30s`, `5m`, `2h`, `1d`: the largest unit that divides exactly."""
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        return f"{seconds}s"
    for size, unit in [(86_400, "d"), (3_600, "h"), (60, "m")]:
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def schedule_summary(schedule: object) -> str:
    """One line: `cron 0 9 * * * Europe/Berlin`, `at 2026-…`, `every 30s`, `in 10s`."""
    if not isinstance(schedule, Mapping):
        return _scalar(schedule)
    if "cron" in schedule:
        text = f"cron {schedule['cron']}"
        if schedule.get("timezone"):
            text += f" {schedule['timezone']}"
    elif "rate_seconds" in schedule:
        text = f"every {format_duration(schedule['rate_seconds'])}"
    elif "at" in schedule:
        return f"at {schedule['at']}"
    elif "delay_seconds" in schedule:
        return f"in {format_duration(schedule['delay_seconds'])}"
    else:
        return _scalar(schedule)
    if schedule.get("start_at"):
        text += f" from {schedule['start_at']}"
    if schedule.get("end_at"):
        text += f" until {schedule['end_at']}"
    return text


def target_summary(target: object) -> str:
    if not isinstance(target, Mapping):
        return _scalar(target)
    kind = target.get("type")
    if kind == "http":
        return f"http {target.get('method') or 'POST'} {target.get('url')}"
    if kind == "eventbridge":
        bus = target.get("event_bus") or "default"
        return f"eventbridge {target.get('source')}:{target.get('detail_type')} on {bus}"
    for key in ("queue_url", "topic_arn", "function_arn", "name"):
        if key in target:
            return f"{kind} {target[key]}"
    return _scalar(target)


def _last_run_status(job: Mapping[str, Any]) -> str:
    last = job.get("last_run")
    if isinstance(last, Mapping):
        return _scalar(last.get("status"))
    return _scalar(last)


def format_jobs(items: Sequence[Any]) -> str:
    if not items:
        return "no jobs"
    rows = [
        [
            _scalar(job.get("id")),
            _scalar(job.get("name")),
            _scalar(job.get("status")),
            schedule_summary(job.get("schedule")),
            _scalar(job.get("next_run_at")),
            _last_run_status(job),
        ]
        for job in items
        if isinstance(job, Mapping)
    ]
    return format_table(["ID", "NAME", "STATUS", "SCHEDULE", "NEXT RUN", "LAST RUN"], rows)


def format_runs(items: Sequence[Any]) -> str:
    if not items:
        return "no runs"
    rows = [
        [
            _scalar(run.get("run_id")),
            _scalar(run.get("scheduled_for")),
            _scalar(run.get("status")),
            _scalar(run.get("attempts")),
            _scalar(run.get("lateness_ms")),
            _scalar(run.get("error")),
        ]
        for run in items
        if isinstance(run, Mapping)
    ]
    headers = ["RUN ID", "SCHEDULED FOR", "STATUS", "ATTEMPTS", "LATENESS MS", "ERROR"]
    return format_table(headers, rows, right=frozenset({3, 4}))


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()
) -> str:
    """Columns padded to their widest cell, two spaces apart; `right` aligns numbers."""
    table = [list(headers), *[[_cut(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    lines = []
    for row in table:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# The order of a job's fields in `get`; anything else the API sends follows.
_JOB_FIELDS = [
    "id",
    "name",
    "status",
    "schedule",
    "target",
    "payload",
    "priority",
    "runtime",
    "retry",
    "timeout_seconds",
    "catchup",
    "next_run_at",
    "last_run",
    "created_at",
    "updated_at",
]


def format_job(job: Any) -> str:
    """A job (or any other object the API answers with) as a `key: value` block."""
    if not isinstance(job, Mapping):
        return _json_text(job) if job is not None else ""
    lines: list[tuple[str, str]] = []
    keys = [k for k in _JOB_FIELDS if k in job] + [k for k in job if k not in _JOB_FIELDS]
    for key in keys:
        value = job[key]
        if key == "schedule":
            text = schedule_summary(value)
        elif key == "target":
            text = target_summary(value)
        elif key == "retry" and isinstance(value, Mapping):
            text = (
                f"{value.get('max_attempts')} attempts, backoff "
                f"{value.get('backoff_seconds')}s, at most {value.get('max_backoff_seconds')}s"
            )
        elif key == "catchup" and isinstance(value, Mapping):
            text = f"{value.get('mode')} (window {format_duration(value.get('window_seconds'))})"
        elif key == "last_run" and isinstance(value, Mapping):
            text = " ".join(
                _scalar(part)
                for part in (value.get("status"), value.get("scheduled_for"))
                if part is not None
            )
            if value.get("attempts") is not None:
                text += f", {value['attempts']} attempt(s)"
            if value.get("error"):
                text += f": {_cut(_scalar(value['error']))}"
        elif key == "timeout_seconds":
            text = format_duration(value)
        else:
            text = _scalar(value)
        lines.append((key, _cut(_clean(text), MAX_VALUE_CHARS)))
    width = max((len(key) for key, _ in lines), default=0) + 1
    return "\n".join(f"{key + ':':<{width}} {text}".rstrip() for key, text in lines)


def _with_cursor(table: str, page: Any) -> str:
    cursor = page.get("next_cursor") if isinstance(page, Mapping) else None
    if not cursor:
        return table
    return f"{table}\n\nmore: --cursor {_clean(str(cursor))}  (or --all for every page)"


def _scalar(value: object) -> str:
    """A value in one cell: `-` for nothing, strings as they are, the rest as compact JSON."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        return _clean(value)
    return _clean(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


def _clean(text: str) -> str:
    """Text from the API made safe for a terminal: what a target answered ends up in a run's
    error, and escape sequences in it must not drive the terminal. Line breaks become spaces."""
    if not any(_is_control(char) for char in text):
        return text
    return "".join(
        " " if char in "\t\n\r" else (f"\\u{ord(char):04x}" if _is_control(char) else char)
        for char in text
    )


def _cut(text: str, limit: int = MAX_CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
