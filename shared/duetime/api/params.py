"""Request parameters of the job routes beyond the basics of duetime.api.app: the list
filters (`tag`, `name_prefix`) and an update's `If-Match`. Pure."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import MAX_NAME_CHARS, MAX_TAG_VALUE_CHARS, MAX_TAGS, TAG_KEY, JobFilter

IF_MATCH = re.compile(r'"(\d{1,15})"|(\d{1,15})')  # a job's ETag: its version, quoted


def if_match(raw: str | None) -> int | None:
    """The version an update expects: `If-Match: "3"` (the job's ETag); `*` is any."""
    if raw is None or raw.strip() == "*":
        return None
    found = IF_MATCH.fullmatch(raw.strip())
    if found is None:
        raise ValidationError("If-Match", 'must be a job\'s ETag: its version in quotes ("3")')
    return int(found.group(1) or found.group(2))


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
