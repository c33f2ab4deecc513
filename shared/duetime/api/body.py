"""The request body as JSON, read once for every route that takes one (duetime.api.app).

Standard JSON only, with the limits every body has: UTF-8 without a byte order mark (RFC
8259 8.1), at most MAX_BODY_BYTES (decoded, for a base64 body) and MAX_JSON_DEPTH levels; no
NaN or Infinity, no number out of a float's range, no lone surrogate escape; and no key twice
in one object. Python's json keeps the last value
of a repeated key where another reader (a proxy, a validator, the client's own library) may
keep the first: the body would mean two things, so it is refused, naming the key's path.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from duetime.domain.errors import PayloadTooLarge, ValidationError

MAX_BODY_BYTES = 256 * 1024
MAX_JSON_DEPTH = 64


def json_body(event: Mapping[str, Any]) -> object:
    """The request body as JSON. Standard JSON only (no NaN/Infinity, no key twice in one
    object), at most MAX_BODY_BYTES and MAX_JSON_DEPTH levels of nesting."""
    body = event.get("body")
    if not body:
        raise ValidationError("body", "required: a JSON object")
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError("body", "not valid base64") from None
    else:
        raw = str(body).encode("utf-8", "surrogatepass")  # a lone surrogate: not UTF-8, below
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge("body", f"at most {MAX_BODY_BYTES} bytes")
    try:  # JSON is UTF-8 (RFC 8259 8.1); json.loads would also guess UTF-16 and UTF-32
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError("body", "not valid JSON (not UTF-8)") from None
    if text.startswith("\ufeff"):
        raise ValidationError("body", "not valid JSON (a byte order mark: send UTF-8 without one)")
    return strict_json(text)


def strict_json(text: str) -> object:
    """JSON as the API reads a body: standard JSON only (no NaN/Infinity, no number beyond a
    float), no key twice in one object (a ValidationError naming its path: json.loads would
    keep the last), at most MAX_JSON_DEPTH levels, Unicode text. The CLI reads the JSON it
    sends with it too, so what the API would refuse is refused before anything is sent."""
    duplicated: list[_DuplicateKey] = []

    def object_of(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) == len(pairs):
            return found
        duplicated.append(marked := _DuplicateKey(found, _first_duplicate(pairs)))
        return marked

    try:
        value = json.loads(
            text,
            object_pairs_hook=object_of,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_double_int,
        )
    except RecursionError:
        raise ValidationError("body", f"nested more than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, huge integers
        raise ValidationError("body", f"not valid JSON ({_first_line(exc)})") from None
    _check_structure(value)
    if duplicated:
        raise ValidationError(_duplicate_path(value), "appears twice in one object")
    return value


class _DuplicateKey(dict[str, Any]):
    """An object of the body in which `key` appears more than once (json keeps the last)."""

    def __init__(self, items: dict[str, Any], key: str) -> None:
        super().__init__(items)
        self.key = key


def no_body(event: Mapping[str, Any]) -> None:
    """A request that takes no body (run now, pause, resume, cancel, rotate): none, or `{}`.
    A field is a 400 naming it: it would do nothing (a run-now's own `payload` would be
    silently ignored)."""
    if not event.get("body"):
        return
    value = json_body(event)
    if not isinstance(value, dict):
        raise ValidationError("body", "this request takes no body (or {})")
    if value:
        raise ValidationError(next(iter(value)), "unknown field: this request takes no body")


def _first_duplicate(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no duplicate key")


def _duplicate_path(value: object) -> str:
    """The path of the first object with a repeated key, in document order (an object before
    what it holds), and that key: `schedule`, `target.headers.X`, `jobs[0].schedule`. Walked
    only once a duplicate was seen, so a good body costs nothing more than the hook's check."""
    stack: list[tuple[object, str | None]] = [(value, None)]  # None: the body itself
    while stack:
        item, path = stack.pop()
        if isinstance(item, _DuplicateKey):
            return item.key if path is None else f"{path}.{item.key}"
        if isinstance(item, dict):
            children = [(v, k if path is None else f"{path}.{k}") for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{path or ''}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))
    raise AssertionError("no object with a duplicate key")


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    """A number a double holds: not one past its range, nor one so small it would be stored as
    0 (`1e-400`: since 2026-11-30, it was taken as 0.0 without a word; a contract audit)."""
    value = float(text)
    mantissa = text.lower().partition("e")[0]
    if not math.isfinite(value) or (value == 0 and mantissa.strip("-+0.")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _double_int(text: str) -> int:
    """An integer a double holds (no more than 309 digits): one past it was stored and
    answered back, Infinity to most readers (since 2026-11-30; a contract audit)."""
    if len(text.lstrip("-")) > 309 or abs(value := int(text)) > sys.float_info.max:
        raise ValueError(f"number {text[:20]}… is out of range")
    return value


def _check_structure(value: object) -> None:
    """At most MAX_JSON_DEPTH levels, and text that is Unicode: JSON's `\\ud800` escapes can
    spell lone surrogates, which no UTF-8 consumer (a target, a log line) can encode."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:  # no recursion: the depth is what is being checked
        item, level = stack.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if isinstance(item, dict):
            for key in item:
                _check_text(key)
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > MAX_JSON_DEPTH:
            raise ValidationError("body", f"nested more than {MAX_JSON_DEPTH} levels")
        stack.extend((child, level + 1) for child in children)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ValidationError("body", "not valid JSON (a lone surrogate escape)") from None


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
