"""Argument types for the `duetime` command line: bad values become argparse messages."""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any
from urllib.parse import urlsplit

from duetime.api.body import strict_json as api_json
from duetime.domain.errors import ValidationError
from duetime.domain.planning import MAX_PREVIEW_OCCURRENCES
from duetime.domain.reach import TenantTargets


def read_text(path: str) -> str:
    """A file's text as UTF-8, or standard input's for `-` (OSError, UnicodeDecodeError)."""
    if path == "-":
        if sys.stdin is None:  # started with it closed (`<&-`)
            raise OSError("standard input is closed")
        return sys.stdin.read()
    # newline="": a lone CR is JSON's whitespace, not the end of a line (as from stdin)
    with open(path, encoding="utf-8", newline="") as file:
        return file.read()


# What the flags take as numbers: ASCII digits only, as the API and the console do (Python's
# int() and float() also take "٩٠٠", "６" and "1_0_0"; until 2026-11-30 so did the CLI).
_WHOLE = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|inf|infinity|nan)", re.I)


def whole(text: str) -> int:
    """A whole number in ASCII digits (argparse's type: ArgumentTypeError otherwise)."""
    if not _WHOLE.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    try:
        return int(text)
    except ValueError:  # Python's int() refuses over 4,300 digits
        raise argparse.ArgumentTypeError(f"{text[:20]!r}… has too many digits") from None


def _ascii_float(text: str) -> float:
    if not _NUMBER.fullmatch(text.strip()):
        raise ValueError(text)
    return float(text)


def version(text: str) -> int:
    """A job's version for --if-match: its number, or its ETag as the API sends it (`"3"`,
    quotes and all; until 2026-11-30 only the number). A weak tag never matches."""
    stripped = text.strip()
    if stripped.startswith("W/"):
        raise argparse.ArgumentTypeError(f"{text!r} is a weak ETag, which never matches")
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"':
        stripped = stripped[1:-1]
    try:
        return positive_int(stripped)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f'{text!r} is not a version (3) or an ETag ("3")'
        ) from None


def positive_int(text: str) -> int:
    try:
        value = whole(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _whole_in(text: str, low: int, high: int, what: str, hint: str) -> int:
    try:
        value = whole(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be from {low} to {high}{hint}")
    return value


def claim_lead_ms(text: str) -> int:
    """Settings.claim_lead_ms: 0 to 2,000 milliseconds."""
    return _whole_in(text, 0, 2_000, "a whole number", " (milliseconds)")


def tenant_target_names(text: str) -> str:
    """Settings.tenant_target_names: a pattern holding `{tenant}` once (TenantTargets)."""
    try:
        return TenantTargets(text.strip()).pattern
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def poll_wait_seconds(text: str) -> int:
    """A long poll's wait: SQS takes 1 to 20 seconds."""
    return _whole_in(text, 1, 20, "a whole number", " (seconds: SQS's longest long poll)")


def positive_float(text: str, *, at_most: float | None = None) -> float:
    try:
        value = _ascii_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < math.inf or (at_most is not None and value > at_most):
        bound = f" and at most {at_most:g}" if at_most is not None else ""
        raise argparse.ArgumentTypeError(f"must be greater than 0{bound}")
    return value


def preview_count(text: str) -> int:
    """How many instants `schedule preview` asks for: what the API answers, 1 to 20."""
    return _whole_in(text, 1, MAX_PREVIEW_OCCURRENCES, "a whole number", "")


def positive_seconds(text: str) -> float:
    """A duration of up to a day."""
    return positive_float(text, at_most=86_400)


def visibility_seconds(text: str) -> int:
    """An SQS visibility timeout: SQS refuses one over 12 hours (every receive would fail)."""
    return _whole_in(text, 1, 43_200, "a whole number", " seconds (SQS's limit: 12 hours)")


def port(text: str) -> int:
    return _whole_in(text, 0, 65_535, "a port number", " (0: any free port)")


def http_url(text: str) -> str:
    """An absolute http(s) URL (an OpenID provider's issuer, say), without a trailing slash."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL")
    return text.strip().rstrip("/")


def number(text: str) -> int | float:
    """A number kept as the user wrote it: `2` is sent as 2, `2.5` as 2.5; never NaN or
    Infinity, which JSON cannot carry (`1e400` and a 5,000-digit number are Infinity)."""
    if _WHOLE.fullmatch(text.strip()) and len(text) <= 4_000:  # int() takes 4,300 digits
        return int(text)
    try:
        value = _ascii_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError("must be a finite number (JSON has no NaN or Infinity)")
    return value


def utf8_text(value: str) -> str:
    """A text flag's value. Bytes that are not UTF-8 on the command line reach Python as lone
    surrogates (`\\udcff`), which no request can carry."""
    if not is_unicode(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not UTF-8 text")
    return value


def is_unicode(value: str) -> bool:
    return not any("\ud800" <= char <= "\udfff" for char in value)


class JsonRefused(ValueError):
    """JSON the API would refuse or read otherwise, in the API's words (strict_json)."""


def strict_json(text: str) -> Any:
    """JSON read as the API will read it (duetime.api.body.strict_json): not JSON, NaN or
    Infinity, a key twice in one object (json.loads keeps the last: the body sent would not be
    the one given), nested over 64 levels: JsonRefused, before anything is sent."""
    try:
        return api_json(text)
    except ValidationError as exc:
        where = "" if exc.field == "body" else f"{exc.field}: "
        raise JsonRefused(f"{where}{exc.message}") from None


def json_value(text: str) -> Any:
    """JSON text, or `@path` to read it from a file (`@-`: standard input)."""
    source = _source(text)
    if text.startswith("@"):
        path = text[1:]
        try:
            text = read_text(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise argparse.ArgumentTypeError(f"cannot read {path}: {exc}") from None
    if not is_unicode(text):
        raise argparse.ArgumentTypeError(f"{source} is not UTF-8 text")
    try:
        return strict_json(text)
    except JsonRefused as exc:
        quoted = source == "JSON" and not text.lstrip().startswith(("{", "[", '"'))
        hint = f" (a string must be quoted: '\"{text}\"')" if quoted else ""
        where = "" if source == "JSON" else f"{source}: "
        raise argparse.ArgumentTypeError(f"{where}{exc}{hint}") from None


def json_object(text: str) -> dict[str, Any]:
    """A JSON object (a request body) as json_value reads it: `--body null` is not no --body."""
    value = json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{_source(text)} is not a JSON object (a job body)")
    return value


def _source(text: str) -> str:
    """Where json_value's text comes from, for its messages."""
    if not text.startswith("@"):
        return "JSON"
    return "standard input" if text == "@-" else text[1:]


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = utf8_text(text).partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not K=V")
    return key.strip(), value


def source_detail_type(text: str) -> tuple[str, str]:
    source, sep, detail_type = utf8_text(text).partition(":")
    if not sep or not source or not detail_type:
        raise argparse.ArgumentTypeError(f"{text!r} is not SOURCE:DETAIL_TYPE")
    return source, detail_type


def header_value(text: str) -> str:
    """A value for an HTTP header (a token, an Idempotency-Key): printable ASCII."""
    value = text.strip()
    problem = header_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def header_problem(value: str) -> str | None:
    """Why `value` cannot be sent in an HTTP header, or None. Non-ASCII text (a pasted curly
    quote) cannot be encoded in one, and control characters would split it."""
    if not value:
        return "must not be empty"
    if not (value.isascii() and value.isprintable()):
        return "must be printable ASCII (no control or non-ASCII characters such as \u201c)"
    return None
