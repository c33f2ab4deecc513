"""How the commands show the API's answers to people: tables, `key: value` blocks and JSON.

Human output is cut (a run's error can hold 64 KiB of a target's answer, a payload as much);
`--json` shows everything. Text from the API is made safe for a terminal first.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from duetime.domain.text import clean

MAX_CELL_CHARS = 60
MAX_VALUE_CHARS = 200


class OutputError(Exception):
    """Standard output cannot be written (a full disk); a closed one (`| head`) stays a
    BrokenPipeError, which main ends quietly."""


def write_out(text: str, end: str = "\n") -> None:
    """Print a command's output, written through to its file so that a failed write shows
    here, not at exit. Written to the file descriptor, every count checked: Python's buffered
    writer took a partial write followed by an error (a full disk, a file-size limit) for a
    success, and a large output without a line end was cut short, exit 0 (an outside CLI
    audit)."""
    if sys.stdout is None:  # started with it closed (`>&-`): print() would drop it silently
        raise OutputError("cannot write the output: standard output is closed")
    try:
        try:
            fd = sys.stdout.fileno()
        except (AttributeError, ValueError, io.UnsupportedOperation):  # no file (a capture)
            print(text, end=end, flush=True)
            return
        sys.stdout.flush()  # what print() left in its buffers, first
        data = _encoded(text + end, sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict")
        left = memoryview(data)  # (a slice of it copies nothing: a pipe takes 64 KiB a write)
        while left:
            left = left[os.write(fd, left) :]
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write the output: {exc}") from None


_ESCAPE = "duetime-json-escape"


def _encoded(text: str, encoding: str, errors: str) -> bytes:
    """`text` in stdout's encoding; a character it cannot hold as JSON's `\\uXXXX` (a job
    named `café` on an ASCII or Latin-1 stdout died with a traceback until 2026-12-01; an
    outside CLI audit). Such a character is only ever inside a JSON string, so `--json`
    stays JSON, meaning the same."""
    try:
        return text.encode(encoding, errors)
    except UnicodeEncodeError:
        codecs.register_error(_ESCAPE, _json_escape)  # (registering again replaces it)
        return text.encode(encoding, _ESCAPE)


def _json_escape(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    units = error.object[error.start : error.end].encode("utf-16-be", "surrogatepass")
    escaped = "".join(
        f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)
    )
    return escaped, error.end


def json_text(data: Any) -> str:
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
    """One line: `cron 0 9 * * * Europe/Berlin`, `at 2026-…`, `every 30s`, `in 10s`,
    `after 01J… succeeded`."""
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
    elif isinstance(schedule.get("after"), Mapping):
        after = schedule["after"]
        return f"after {after.get('job_id')} {after.get('on') or 'succeeded'}"
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
    """Columns padded to their widest cell, two spaces apart; `right` aligns numbers. Every
    cell is made safe for a terminal (`clean`): until 2026-11-30 `jobs list`'s SCHEDULE column
    wrote what an API answered as it was, escape sequences included (a security audit)."""
    table = [list(headers), *[[cut(clean(cell)) for cell in row] for row in rows]]
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
    "description",
    "tags",
    "status",
    "version",
    "schedule",
    "target",
    "payload",
    "priority",
    "runtime",
    "retry",
    "timeout_seconds",
    "catchup",
    "overlap",
    "jitter_seconds",
    "stage_seconds",
    "next_run_at",
    "last_run",
    "created_at",
    "updated_at",
]


def format_job(job: Any) -> str:
    """A job (or any other object the API answers with) as a `key: value` block."""
    if not isinstance(job, Mapping):
        return json_text(job) if job is not None else ""
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
                text += f": {cut(_scalar(value['error']))}"
        elif key == "tags" and isinstance(value, Mapping):
            text = ", ".join(f"{k}={v}" for k, v in value.items())
        elif key == "timeout_seconds":
            text = format_duration(value)
        else:
            text = _scalar(value)
        lines.append((clean(str(key)), cut(clean(text), MAX_VALUE_CHARS)))  # keys too
    width = max((len(key) for key, _ in lines), default=0) + 1
    return "\n".join(f"{key + ':':<{width}} {text}".rstrip() for key, text in lines)


def with_cursor(table: str, page: Any) -> str:
    cursor = page.get("next_cursor") if isinstance(page, Mapping) else None
    if not cursor:
        return table
    return f"{table}\n\nmore: --cursor {clean(str(cursor))}  (or --all for every page)"


def _scalar(value: object) -> str:
    """A value in one cell: `-` for nothing, strings as they are, the rest as compact JSON."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        return clean(value)
    return clean(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def cut(text: str, limit: int = MAX_CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
