"""`duetime jobs create --from-file jobs.jsonl`: many jobs through POST /jobs/batch.

One job body per line (a POST /jobs body, which may carry its own `idempotency_key`); blank
lines are skipped; `-` reads stdin. The file is read whole first: a line that is not a JSON
object stops the command before anything is sent, naming its line number. The bodies go in
requests of at most MAX_PER_REQUEST jobs and MAX_BODY_BYTES (the API's limits); each item's
result is printed with its line number, and the exit status is 1 when any item was refused.
A request that fails as a whole (an error, no answer, an answer not in the API's shape, Ctrl-C)
stops the sending: its lines and the later ones are reported as such, after the results already
received, so that no created job's id is lost. Ctrl-C while the refused lines wait for the
submission rate ends those lines as not created, the others as answered.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterator
from typing import Any

from duetime.api.body import MAX_BODY_BYTES
from duetime.cli.client import ApiClient, ApiError, Unreachable, UsageError
from duetime.cli.types import JsonRefused, read_text, strict_json
from duetime.domain.text import clean

MAX_PER_REQUEST = 100  # the API's limit per batch
# How often the jobs the submission rate refused are sent again (each after its Retry-After).
RATE_RETRIES = 5
# The longest wait the CLI takes from an answer: the submission rate's own are a few seconds;
# a tenant's debt (a large backfill) can ask for hours, and those lines are reported refused.
MAX_RETRY_AFTER_S = 300.0
_ENVELOPE = len('{"jobs":[]}')
INTERRUPTED = "interrupted"  # the error code of the lines of a request Ctrl-C stopped
MAYBE = "these jobs may or may not exist"

Line = tuple[int, dict[str, Any]]


def read_bodies(path: str) -> list[Line]:
    """(line number, job body) for each non-blank line of the file."""
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    bodies: list[Line] = []
    # JSONL lines end at "\n" only: splitlines() also cuts at U+2028 and the like, which a
    # JSON string may hold as they are.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            body = strict_json(line)
        except JsonRefused as exc:  # not JSON, NaN, a repeated key: as the API would say
            raise UsageError(f"{path}:{number}: {exc}") from None
        if not isinstance(body, dict):
            raise UsageError(f"{path}:{number}: not a JSON object (a job body)")
        bodies.append((number, body))
    if not bodies:
        raise UsageError(f"{path}: no job bodies (one JSON object per line)")
    return bodies


def _size(body: dict[str, Any]) -> int:
    """A body's bytes as the client encodes it."""
    return len(json.dumps(body, separators=(",", ":")).encode())


def requests_of(bodies: list[Line]) -> Iterator[list[Line]]:
    """The bodies in requests of at most MAX_PER_REQUEST and MAX_BODY_BYTES of JSON (as the
    client encodes it); a body too large for any request goes alone (and is refused here)."""
    chunk: list[Line] = []
    size = _ENVELOPE
    for line in bodies:
        grows = _size(line[1]) + (1 if chunk else 0)
        if chunk and (len(chunk) == MAX_PER_REQUEST or size + grows > MAX_BODY_BYTES):
            yield chunk
            chunk, size = [], _ENVELOPE
            grows -= 1
        chunk.append(line)
        size += grows
    if chunk:
        yield chunk


def create_from_file(client: ApiClient, path: str) -> dict[str, Any]:
    """Send the file's bodies; `{"items": [...]}`, each item the API's with its `line`. The
    jobs the submission rate refused (`429`, no field: a file past the tenant's burst) are
    sent again, once their `retry_after_seconds` have passed, up to RATE_RETRIES times (until
    2026-11-30 they were refused, and sending the file again made a second copy of every line
    without an `idempotency_key`; an outside CLI audit)."""
    bodies = read_bodies(path)
    by_line = dict(bodies)
    items: list[dict[str, Any]] = []
    # The lines of the request on its way, only while it is (during a wait for the rate it
    # named the request answered, and Ctrl-C then reported the jobs it had created as "may or
    # may not exist", their ids dropped; until 2026-12-01, an outside CLI audit).
    sending: list[Line] = []
    waiting: list[int] = []  # the items (indexes) refused by the rate, waiting to go again
    try:
        for chunk in requests_of(bodies):
            if _ENVELOPE + _size(chunk[0][1]) > MAX_BODY_BYTES:  # no request can carry it
                items.append(_too_large(chunk[0]))
                continue
            sending = chunk
            answer = client.call("POST", "/jobs/batch", body={"jobs": [body for _, body in chunk]})
            items += _results(answer, chunk)
            sending = []
            for _ in range(RATE_RETRIES):
                waiting = [
                    i for i in range(len(items) - len(chunk), len(items)) if _slowed(items[i])
                ]
                wait = max((_retry_after(items[i]) for i in waiting), default=0)
                if not waiting or wait > MAX_RETRY_AFTER_S:  # (a debt: reported, not waited)
                    break
                say_waiting(wait, f"the submission rate refused {len(waiting)} line(s)")
                time.sleep(wait)
                sending = [(items[i]["line"], by_line[items[i]["line"]]) for i in waiting]
                answer = client.call("POST", "/jobs/batch", body={"jobs": [b for _, b in sending]})
                for i, result in zip(waiting, _results(answer, sending), strict=True):
                    items[i] = result
                sending = []
            waiting = []
    except (ApiError, Unreachable, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and not sending:  # during a wait for the rate
            for i in waiting:
                if _slowed(items[i]):  # (not yet sent again: it was refused, not created)
                    items[i] = _interrupted_waiting(items[i])
        failed = {number for number, _ in sending}
        kept = [item for item in items if item["line"] not in failed]
        done = {item["line"] for item in kept}
        rest = [line for line in bodies if line[0] not in done]
        ended = kept + _not_created(rest, sending, exc)
        return {"items": sorted(ended, key=lambda item: item["line"])}
    return {"items": items}


def _retry_after(item: dict[str, Any]) -> float:
    return wait_seconds(item.get("retry_after_seconds"))


def wait_seconds(wait: object) -> float:
    """The seconds an answer asks to wait, 1 for anything but a number from 1 (until 2026-11-30
    a value that was not a whole number, or negative, died with a traceback and lost the
    report of the lines created, and a huge one slept for years: an outside security audit).
    Over MAX_RETRY_AFTER_S (a backfill's debt) math.inf: reported refused, not waited."""
    if isinstance(wait, str):  # a Retry-After header: delta-seconds (a date waits 1 s)
        text = wait.strip()
        digits = text.isascii() and text.isdigit()
        wait = (int(text) if len(text) < 16 else math.inf) if digits else None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 1:
        return 1
    return float(wait) if wait <= MAX_RETRY_AFTER_S else math.inf  # (an int past float's)


def say_waiting(seconds: float, why: str) -> None:
    """A wait is said on stderr: silent, it looked hung (up to 300 s; an outside CLI audit)."""
    print(f"duetime: {why}: waiting {seconds:g} s to try again", file=sys.stderr, flush=True)


def _interrupted_waiting(item: dict[str, Any]) -> dict[str, Any]:
    """A line refused by the rate whose wait Ctrl-C stopped: not created, and said so."""
    message = "interrupted while waiting for the submission rate: not created (send it again)"
    return {
        "line": item["line"],
        "status": item.get("status"),
        "error": {"code": INTERRUPTED, "message": message},
    }


def _slowed(item: dict[str, Any]) -> bool:
    """A job the tenant's submission rate refused (its count quotas name a field)."""
    error = item.get("error") or {}
    return (
        item.get("status") == 429
        and error.get("code") == "quota_exceeded"
        and not error.get("field")
    )


def _too_large(line: Line) -> dict[str, Any]:
    """The item of a line no request can carry, refused here as the API refuses a body over
    its limit; the other lines go on (until 2026-11-30 it was sent alone, and the API's 413
    stopped every later line; found by an outside audit)."""
    number, body = line
    message = f"a job body of {_size(body)} bytes: a request takes at most {MAX_BODY_BYTES}"
    error = {"code": "payload_too_large", "message": message, "field": "body"}
    return {"line": number, "status": 413, "error": error}


def _results(answer: Any, chunk: list[Line]) -> list[dict[str, Any]]:
    """The API's item for each line of the request, with its `line`."""
    results = answer.get("items") if isinstance(answer, dict) else None
    if (
        not isinstance(results, list)
        or len(results) != len(chunk)
        or not all(_is_item(result) for result in results)
    ):
        problem = "the API answered something that is not an item per job"
        raise ApiError(200, "bad_response", problem, None)
    return [{"line": number, **result} for (number, _), result in zip(chunk, results, strict=True)]


def _is_item(result: Any) -> bool:
    """`{"status", "job"}` or `{"status", "error"}`, as format_results reads it."""
    return isinstance(result, dict) and all(
        isinstance(result.get(key) or {}, dict) for key in ("job", "error")
    )


def _not_created(rest: list[Line], failed: list[Line], exc: BaseException) -> list[dict[str, Any]]:
    """The items of the lines from a request that failed as a whole on: its own, with the
    request's error (after no answer, or one not in the API's shape, its jobs may exist: a
    line's `idempotency_key` makes a re-send safe), then those never sent."""
    status: int | None = None
    if isinstance(exc, ApiError):
        status = exc.status
        maybe = f"; {MAYBE}" if status < 300 else ""  # a 2xx not in the API's shape
        error = {"code": exc.code, "message": f"the request failed: {exc.message}{maybe}"}
        error |= {"field": exc.field} if exc.field else {}
    elif isinstance(exc, KeyboardInterrupt):
        error = {"code": INTERRUPTED, "message": f"interrupted before the answer; {MAYBE}"}
    else:
        error = {"code": "no_answer", "message": f"{exc}; {MAYBE}"}
    sent = {number for number, _ in failed}
    unsent = {"code": "not_sent", "message": "not sent: an earlier request failed"}
    return [
        {"line": number, "status": status, "error": error}
        if number in sent
        else {"line": number, "status": None, "error": unsent}
        for number, _ in rest
    ]


def format_results(data: Any) -> str:
    """One line per item: `line 3: 201 <id> <name>` or `line 4: 400 invalid field: message`."""
    lines = []
    for item in data.get("items") or []:
        status = item.get("status")
        if status == 201:
            job = item.get("job") or {}
            text = " ".join(str(job.get(k)) for k in ("id", "status", "name") if job.get(k))
        else:
            error = item.get("error") or {}
            where = f"{error['field']}: " if error.get("field") else ""
            text = f"{error.get('code')} {where}{error.get('message')}"
        shown = "-" if status is None else status  # no answer for it
        lines.append(clean(f"line {item.get('line')}: {shown} {text}"))
    return "\n".join(lines)


def exit_status(data: Any) -> int:
    """130 when Ctrl-C stopped the sending, 1 when any job was not created, else 0."""
    items = data.get("items") or []
    if any((item.get("error") or {}).get("code") == INTERRUPTED for item in items):
        return 130
    return 1 if any(item.get("status") != 201 for item in items) else 0
