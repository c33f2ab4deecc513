"""The building blocks of the OpenAPI component schemas (duetime.api.schemas and
duetime.api.spec_schemas): references, closed objects, enums and the common scalar shapes."""

from __future__ import annotations

import re
from typing import Any

from duetime.api.params import ENTITY_TAGS_PATTERN, JOB_ID
from duetime.domain.jobs import JobStatus
from duetime.domain.text import UNSAFE_MULTILINE_TEXT, UNSAFE_TEXT


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
    """`word` in any case, as a regex (letters, digits and `-` only)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


def whole(pattern: re.Pattern[str]) -> str:
    """A domain pattern the server matches whole (fullmatch), as the document's pattern (an
    ECMA-262 regex: a named group loses its name)."""
    return "^(?:" + pattern.pattern.replace("(?P<name>", "(") + ")$"


def without(unsafe: re.Pattern[str]) -> str:
    """Text holding none of the characters of `unsafe` (a character class: duetime.domain.text)."""
    return "^[^" + unsafe.pattern[1:-1] + "]*$"


# The free text of a name or a tag's value (a line), and a description's (lines).
LINE = {"type": "string", "pattern": without(UNSAFE_TEXT)}
LINES = {"type": "string", "pattern": without(UNSAFE_MULTILINE_TEXT)}
NOT_BLANK = (
    " Not blank: white space, format characters (U+200B, U+2060, ...) and invisible fillers "
    "(U+3164, U+2800, variation selectors) alone are refused."
)


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

# The operations' parameters (OpenAPI parameter objects), referred to by name.
PARAMETERS: dict[str, dict[str, Any]] = {
    "JobId": {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "A job id: a ULID, so never a literal segment such as `batch`.",
        "schema": {"type": "string", "pattern": f"^{JOB_ID.pattern}$"},
    },
    "Limit": {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
    },
    "Cursor": {
        "name": "cursor",
        "in": "query",
        "description": "`next_cursor` of the previous page; absent or empty: the first page.",
        "schema": {"type": "string", "maxLength": 1024},
    },
    "Status": {
        "name": "status",
        "in": "query",
        "description": "Only jobs with this (effective) status. Applied to each page after "
        "it is read: a page can hold fewer items than `limit`, even none, while "
        "`next_cursor` is set.",
        "schema": {"enum": enum_values(JobStatus)},
    },
    "Tag": {
        "name": "tag",
        "in": "query",
        "description": "key:value: only jobs with this tag. Repeatable: every tag must match "
        "(AND). Like `status`, applied to each page after it is read.",
        "style": "form",
        "explode": True,
        "schema": {
            "type": "array",
            "maxItems": 20,
            "items": {"type": "string", "pattern": "^[A-Za-z0-9_./+@-]{1,64}:[\\s\\S]{0,256}$"},
        },
    },
    "NamePrefix": {
        "name": "name_prefix",
        "in": "query",
        "description": "Only jobs whose name starts with this. Applied to each page after "
        "it is read, like `status`.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 128},
    },
    "IfMatch": {
        "name": "If-Match",
        "in": "header",
        "description": 'The job\'s ETag as read ("3", its version): the update (or cancel, '
        "pause, resume, run, backfill, read) applies only if the job is still at that "
        'version, else 412. A list ("3", "4") accepts any of its versions; a weak tag '
        '(W/"3"), or another tag ("abc"), never matches. Without it, it applies.',
        "schema": {"type": "string", "maxLength": 1024, "pattern": ENTITY_TAGS_PATTERN},
    },
    "IfNoneMatch": {
        "name": "If-None-Match",
        "in": "header",
        "description": 'Entity tags ("3", a list, or *): a read answers 304 without a body, '
        "and a change (update, cancel, pause, resume, run, backfill) 412, if the job is at a "
        'version they name (*: any). Weak tags (W/"3") name their version too.',
        "schema": {"type": "string", "maxLength": 1024, "pattern": ENTITY_TAGS_PATTERN},
    },
    "IdempotencyKey": {
        "name": "Idempotency-Key",
        "in": "header",
        "description": "Repeat the request with the same key (for 24 hours) to get the same "
        "job (or run) back instead of a second one; the same key with another body, or for "
        "another request, is a 409.",
        "schema": {"type": "string", "pattern": "^[\\x21-\\x7e]{1,255}$"},
    },
}
