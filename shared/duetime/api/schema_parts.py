"""The building blocks of the OpenAPI component schemas (duetime.api.schemas and
duetime.api.spec_schemas): references, closed objects, enums and the common scalar shapes."""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return {**schema, **extra}


def enum_values(kind: Any) -> list[str]:
    return [member.value for member in kind]


def any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" for c in word)


_INSTANTS = (
    "RFC 3339 with an offset or Z, from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z once "
    "in UTC, without a leap second (:60); answers are UTC with milliseconds."
)
INSTANT = {"type": "string", "format": "date-time", "description": _INSTANTS}
OPTIONAL_INSTANT = {"type": ["string", "null"], "format": "date-time", "description": _INSTANTS}
INTEGER_OR_NULL = {"type": ["integer", "null"]}
SECRET = {"type": "string", "pattern": "^whsec_[A-Za-z0-9+/]{32,88}={0,2}$"}
STRING_OR_NULL = {"type": ["string", "null"]}

# Response headers (OpenAPI header objects).
ETAG_HEADER = {
    "ETag": {
        "required": True,
        "description": 'The job\'s version in quotes ("3"): send it as If-Match to update.',
        "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
    }
}
NO_STORE_HEADER = {
    "Cache-Control": {
        "required": True,
        "description": "no-store: an answer may hold a tenant's data or secrets (always sent).",
        "schema": {"const": "no-store"},
    }
}
