"""Request parameters of the job routes: path ids, paging (`limit`, `cursor`), the list
filters (`status`, `tag`, `name_prefix`) and the `Idempotency-Key` and `If-Match` headers.
Pure: each answers the value or raises the 4xx naming the parameter."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from duetime.domain.errors import NotFound, PreconditionFailed, ValidationError
from duetime.domain.jobs import (
    MAX_NAME_CHARS,
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    TAG_KEY,
    Job,
    JobFilter,
    JobStatus,
)

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
MAX_CURSOR_CHARS = 1024
MAX_IF_MATCH_CHARS = 1024
JOB_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")  # a ULID (duetime.domain.ids.new_job_id)
RUN_ID = re.compile(JOB_ID.pattern + r"-[0-9]{1,16}")  # duetime.domain.ids.run_id
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII
# One entity tag of If-Match (RFC 9110 8.8.3: `"opaque"` or weak `W/"opaque"`; bare digits are
# taken for the quoted version too). Only a job's ETag, its version as written in the ETag,
# can match: If-Match compares strongly (13.1.1), so a weak tag, another tag ("abc") or a
# version written otherwise ("03") never does.
IF_MATCH = re.compile(r'(W/)?"([\x21\x23-\x7e\x80-\U0010ffff]*)"|([0-9]+)')
VERSION = re.compile(r"0|[1-9][0-9]{0,14}")  # as the ETag writes a version (ASCII digits only)
# The header as the OpenAPI document states it (an ECMA-262 pattern that Python reads alike):
# `*`, or a list of such tags whose empty elements are ignored. Opaque tags outside ASCII are
# read but not stated (a client sends none: they never match).
_TAG = r'(?:W/)?"[\x21\x23-\x2b\x2d-\x7e]*"|[0-9]+'
ENTITY_TAGS_PATTERN = rf"^[ \t]*(?:\*|[ \t,]*(?:{_TAG})(?:[ \t]*,[ \t,]*(?:{_TAG}))*[ \t,]*)[ \t]*$"


def if_match(raw: str | None) -> frozenset[int] | None:
    """The versions an update accepts: `If-Match: "3"` (the job's ETag) or a list of tags
    (`"3", "4"`: any of them); None for `*` (any version) or no header."""
    if raw is None or raw.strip() == "*":
        return None
    return _versions(raw, "If-Match", weak=False)


def if_none_match(raw: str | None) -> Callable[[int], bool] | None:
    """Whether `If-None-Match` names a version (`*`: any; weak comparison, RFC 9110 13.1.2:
    `W/"3"` names 3); None without the header."""
    if raw is None:
        return None
    if raw.strip() == "*":
        return lambda _version: True
    return _versions(raw, "If-None-Match", weak=True).__contains__


def precondition(job: Job, if_match_raw: str | None, if_none_match_raw: str | None) -> None:
    """RFC 9110 13.2.2, for a change whose service takes no If-Match (run now, backfill) and
    for If-None-Match on every change: PreconditionFailed when the job as read fails one."""
    wanted = if_match(if_match_raw)
    if wanted is not None and job.version not in wanted:
        raise PreconditionFailed(job.id, wanted, job.version)
    named = if_none_match(if_none_match_raw)
    if named is not None and named(job.version):
        raise PreconditionFailed(job.id, (), job.version, none_match=True)


def _versions(raw: str, field: str, *, weak: bool) -> frozenset[int]:
    """The versions a list of entity tags names; a weak tag names its version only where the
    comparison is weak (If-None-Match), never for If-Match (13.1.1: strong)."""
    if len(raw) > MAX_IF_MATCH_CHARS:  # as the OpenAPI document says
        raise ValidationError(field, f"at most {MAX_IF_MATCH_CHARS} characters")
    versions: set[int] = set()
    # RFC 9110 section 5.6.1: a list's empty elements (`"3", , "4"`) are ignored; one with no
    # element at all is no ETag.
    tags = [tag.strip() for tag in raw.split(",") if tag.strip()] or [""]
    for tag in tags:
        found = IF_MATCH.fullmatch(tag)
        if found is None:
            raise ValidationError(field, 'must be a job\'s ETag: its version in quotes ("3")')
        is_weak, opaque, bare = found.groups()
        digits = bare if opaque is None else opaque
        if (weak or not is_weak) and VERSION.fullmatch(digits):
            versions.add(int(digits))
    return frozenset(versions)


def parse_job_filter(event: Mapping[str, Any]) -> JobFilter | None:
    """`tag=key:value` (repeatable, all must match) and `name_prefix`, read from the raw
    query string: API Gateway joins repeated parameters with commas in
    queryStringParameters, and a tag value may hold a comma."""
    raw = event.get("rawQueryString") or ""
    params = urllib.parse.parse_qs(str(raw), keep_blank_values=True)
    tags: list[tuple[str, str]] = []
    for text in params.get("tag", []):
        key, sep, value = text.partition(":")
        if not sep or not TAG_KEY.fullmatch(key) or len(value) > MAX_TAG_VALUE_CHARS:
            raise ValidationError("tag", "must be key:value, a tag key and its value")
        tags.append((key, value))
    if len(tags) > MAX_TAGS:
        raise ValidationError("tag", f"at most {MAX_TAGS} tags")
    prefixes = params.get("name_prefix", [])
    if len(prefixes) > 1 or any(not p or len(p) > MAX_NAME_CHARS for p in prefixes):
        raise ValidationError("name_prefix", f"one string of 1 to {MAX_NAME_CHARS} characters")
    if not tags and not prefixes:
        return None
    return JobFilter(tuple(tags), prefixes[0] if prefixes else None)


def known_query(names: Iterable[str], allowed: frozenset[str]) -> None:
    """A query parameter the route does not take is a 400 naming it: a typo (`stauts=`) would
    otherwise widen a filter, or be taken for an option the API does not have."""
    for name in sorted(names):
        if name not in allowed:
            raise ValidationError(name, "unknown query parameter")


def once(name: str, raw: str | None) -> str | None:
    """A single-valued query parameter: API Gateway joins a repeated one's values with a comma
    (`limit=5&limit=6` arrives as `5,6`), which none of their values holds."""
    if raw is not None and "," in raw:
        raise ValidationError(name, "given more than once (or as a list): send one value")
    return raw


def parse_limit(raw: str | None) -> int:
    raw = once("limit", raw)
    if raw is None:
        return DEFAULT_LIMIT
    # Leading zeros are taken ("007"); more than three digits besides are out of range
    # unconverted (Python's int() refuses over 4,300 digits).
    digits = raw.lstrip("0")
    if (
        not raw.isascii()
        or not raw.isdigit()
        or len(digits) > 3
        or not 1 <= int(digits or 0) <= MAX_LIMIT
    ):
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    return int(digits)


def parse_status(raw: str | None) -> JobStatus | None:
    raw = once("status", raw)
    if raw is None:
        return None
    for status in JobStatus:
        if status.value == raw:
            return status
    raise ValidationError("status", f"must be one of {'|'.join(s.value for s in JobStatus)}")


def parse_cursor(raw: str | None) -> str | None:
    """The cursor of the page to read; absent or empty (`cursor=`) is the first page, as a
    client that sends back `next_cursor or ""` expects."""
    raw = once("cursor", raw)
    if not raw:
        return None
    if len(raw) > MAX_CURSOR_CHARS or not raw.isascii():
        raise ValidationError("cursor", "not a cursor from a previous page")
    return raw


def idempotency_key(raw: str | None) -> str | None:
    if raw is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(raw):
        raise ValidationError("Idempotency-Key", "must be 1 to 255 visible ASCII characters")
    return raw


def checked_id(job_id: str) -> str:
    """A path id that cannot name a job is a 404 without a read (a run id's says its job)."""
    if not JOB_ID.fullmatch(job_id):
        if RUN_ID.fullmatch(job_id):
            raise NotFound(f"{job_id} is a run id, not a job id: its job is {job_id[:26]}")
        raise NotFound(f"job {job_id[:64]} not found")
    return job_id
