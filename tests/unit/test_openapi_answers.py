"""What the OpenAPI document says of every answer: the headers the API always sends are
declared, and the schema refuses what the API refuses where a pattern can say it."""

from __future__ import annotations

from typing import Any

from duetime.api.openapi import OPENAPI


def resolved(response: dict[str, Any]) -> dict[str, Any]:
    ref = response.get("$ref")
    if ref is None:
        return response
    found: dict[str, Any] = OPENAPI["components"]["responses"][ref.rsplit("/", 1)[-1]]
    return found


def test_every_answer_declares_no_store() -> None:
    # Every answer carries `Cache-Control: no-store` (duetime.api.routing); the document
    # declared it on the successes of the routes that need a token only (a contract audit,
    # round three: errors, /health and /openapi.json did not say so).
    undeclared = [
        f"{method.upper()} {path} {status}"
        for path, operations in OPENAPI["paths"].items()
        for method, operation in operations.items()
        if method in ("get", "post", "patch", "delete")
        for status, response in operation["responses"].items()
        if resolved(response).get("headers", {}).get("Cache-Control", {}).get("required")
        is not True
    ]
    assert undeclared == []


def test_an_empty_cron_is_refused_by_the_schema_as_by_the_api() -> None:
    cron = OPENAPI["components"]["schemas"]["ScheduleCron"]["properties"]["cron"]
    assert cron["minLength"] == 1
