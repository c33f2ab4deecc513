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


INSTANT = {
    "type": "string",
    "format": "date-time",
    "description": "RFC 3339 with an offset or Z; answers are UTC with milliseconds.",
}
OPTIONAL_INSTANT = {"type": ["string", "null"], "format": "date-time"}
INTEGER_OR_NULL = {"type": ["integer", "null"]}
SECRET = {"type": "string", "pattern": "^whsec_[A-Za-z0-9+/]{32,88}={0,2}$"}
STRING_OR_NULL = {"type": ["string", "null"]}
