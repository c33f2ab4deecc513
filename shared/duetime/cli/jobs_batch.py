"""`duetime jobs create --from-file jobs.jsonl`: many jobs through POST /jobs/batch.

One job body per line (a POST /jobs body, which may carry its own `idempotency_key`); blank
lines are skipped; `-` reads stdin. The file is read whole first: a line that is not a JSON
object stops the command before anything is sent, naming its line number. The bodies go in
requests of MAX_PER_REQUEST; each item's result is printed with its line number, and the exit
status is 1 when any item was refused.
"""

from __future__ import annotations

import json
from typing import Any

from duetime.cli.client import ApiClient, ApiError, UsageError
from duetime.cli.format import clean
from duetime.cli.types import read_text

MAX_PER_REQUEST = 100  # the API's limit per batch


def read_bodies(path: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, job body) for each non-blank line of the file."""
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    bodies: list[tuple[int, dict[str, Any]]] = []
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


def create_from_file(client: ApiClient, path: str) -> dict[str, Any]:
    """Send the file's bodies; `{"items": [...]}`, each item the API's with its `line`."""
    bodies = read_bodies(path)
    items: list[dict[str, Any]] = []
    for start in range(0, len(bodies), MAX_PER_REQUEST):
        chunk = bodies[start : start + MAX_PER_REQUEST]
        answer = client.call("POST", "/jobs/batch", body={"jobs": [body for _, body in chunk]})
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
        lines.append(clean(f"line {item.get('line')}: {status} {text}"))
    return "\n".join(lines)


def failed(data: Any) -> bool:
    return any(item.get("status") != 201 for item in data.get("items") or [])
