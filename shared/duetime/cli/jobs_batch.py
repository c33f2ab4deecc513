"""`duetime jobs create --from-file jobs.jsonl`: many jobs through POST /jobs/batch.

One job body per line (a POST /jobs body, which may carry its own `idempotency_key`); blank
lines are skipped; `-` reads stdin. The file is read whole first: a line that is not a JSON
object stops the command before anything is sent, naming its line number. The bodies go in
requests of at most MAX_PER_REQUEST jobs and MAX_BODY_BYTES (the API's limits); each item's
result is printed with its line number, and the exit status is 1 when any item was refused.
A request that fails as a whole (an error, no answer) stops the sending: its lines and the
later ones are reported as such, after the results already received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from duetime.api.body import MAX_BODY_BYTES
from duetime.cli.client import ApiClient, ApiError, Unreachable, UsageError
from duetime.cli.format import clean
from duetime.cli.types import read_text

MAX_PER_REQUEST = 100  # the API's limit per batch
_ENVELOPE = len('{"jobs":[]}')

Line = tuple[int, dict[str, Any]]


def read_bodies(path: str) -> list[Line]:
    """(line number, job body) for each non-blank line of the file."""
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    bodies: list[Line] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            body = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not valid JSON ({exc})") from None
        if not isinstance(body, dict):
            raise UsageError(f"{path}:{number}: not a JSON object (a job body)")
        bodies.append((number, body))
    if not bodies:
        raise UsageError(f"{path}: no job bodies (one JSON object per line)")
    return bodies


def requests_of(bodies: list[Line]) -> Iterator[list[Line]]:
    """The bodies in requests of at most MAX_PER_REQUEST and MAX_BODY_BYTES of JSON (as the
    client encodes it); a body too large for any request goes alone, for the API to refuse."""
    chunk: list[Line] = []
    size = _ENVELOPE
    for line in bodies:
        grows = len(json.dumps(line[1], separators=(",", ":")).encode()) + (1 if chunk else 0)
        if chunk and (len(chunk) == MAX_PER_REQUEST or size + grows > MAX_BODY_BYTES):
            yield chunk
            chunk, size = [], _ENVELOPE
            grows -= 1
        chunk.append(line)
        size += grows
    if chunk:
        yield chunk


def create_from_file(client: ApiClient, path: str) -> dict[str, Any]:
    """Send the file's bodies; `{"items": [...]}`, each item the API's with its `line`."""
    bodies = read_bodies(path)
    items: list[dict[str, Any]] = []
    for chunk in requests_of(bodies):
        try:
            answer = client.call("POST", "/jobs/batch", body={"jobs": [body for _, body in chunk]})
        except (ApiError, Unreachable) as exc:
            return {"items": items + _not_created(bodies[len(items) :], chunk, exc)}
        results = answer.get("items") if isinstance(answer, dict) else None
        if (
            not isinstance(results, list)
            or len(results) != len(chunk)
            or not all(isinstance(result, dict) for result in results)
        ):
            raise ApiError(200, "bad_response", "the API did not answer an item per job", None)
        items += [
            {"line": number, **result} for (number, _), result in zip(chunk, results, strict=True)
        ]
    return {"items": items}


def _not_created(rest: list[Line], failed: list[Line], exc: Exception) -> list[dict[str, Any]]:
    """The items of the lines from a request that failed as a whole on: its own, with the
    request's error (after no answer, its jobs may exist: a line's `idempotency_key` makes a
    re-send safe), then those never sent."""
    status: int | None = None
    error = {"code": "no_answer", "message": f"{exc}; these jobs may or may not exist"}
    if isinstance(exc, ApiError):
        status = exc.status
        error = {"code": exc.code, "message": f"the request failed: {exc.message}"}
        error |= {"field": exc.field} if exc.field else {}
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


def failed(data: Any) -> bool:
    return any(item.get("status") != 201 for item in data.get("items") or [])
