"""The OpenAPI document's rules for a job's free text and its targets' names say what the API
takes: a value the document's pattern allows is taken (but for what a description names:
blank text), and one the API refuses breaks the document's pattern. An outside contract audit
(2026-11-30) found `"name": "a\\u202eb"` and a header value `"é"` schema-valid yet answered
400: a client generated from the document could not know them wrong."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.api.openapi import OPENAPI
from duetime.domain.errors import ValidationError
from duetime.domain.jobs import parse_job_spec
from duetime.domain.text import blank

SCHEMAS = OPENAPI["components"]["schemas"]
HANDLER = {"type": "handler", "name": "duetime.noop"}


def taken(**body: Any) -> bool:
    try:
        parse_job_spec({"schedule": {"delay_seconds": 60}, "target": HANDLER, **body})
    except ValidationError:
        return False
    return True


def http(headers: dict[str, str]) -> dict[str, Any]:
    return {"target": {"type": "http", "url": "https://hooks.example.com/", "headers": headers}}


def events(**fields: str) -> dict[str, Any]:
    target = {"type": "eventbridge", "source": "billing", "detail_type": "due", **fields}
    return {"target": target}


def schema(name: str, *path: str) -> dict[str, Any]:
    found: dict[str, Any] = SCHEMAS[name]
    for key in path:
        found = found[key]
    return found


def allows(field: dict[str, Any], value: str) -> bool:
    """Whether the document's string schema `field` lets `value` through."""
    if not field.get("minLength", 0) <= len(value) <= field.get("maxLength", 1 << 20):
        return False
    if "pattern" in field and re.search(field["pattern"], value) is None:
        return False
    return not ("not" in field and re.search(field["not"]["pattern"], value))


# field: (its schema, the body that carries a value, what the document's description excepts)
FIELDS: dict[str, tuple[dict[str, Any], Callable[[str], dict[str, Any]], Callable[[str], bool]]] = {
    "name": (schema("JobRequest", "properties", "name"), lambda v: {"name": v}, blank),
    "description": (
        schema("JobRequest", "properties", "description"),
        lambda v: {"description": v},
        lambda v: False,
    ),
    "tag value": (
        schema("JobRequest", "properties", "tags", "additionalProperties"),
        lambda v: {"tags": {"k": v}},
        lambda v: False,
    ),
    "header value": (
        schema("HttpTarget", "properties", "headers", "additionalProperties"),
        lambda v: http({"X-A": v}),
        lambda v: False,
    ),
    "header name": (
        schema("HttpTarget", "properties", "headers", "propertyNames"),
        lambda v: http({v: "x"}),
        lambda v: False,
    ),
    "source": (
        schema("EventBridgeTarget", "properties", "source"),
        lambda v: events(source=v),
        lambda v: not v.strip(),
    ),
    "detail_type": (
        schema("EventBridgeTarget", "properties", "detail_type"),
        lambda v: events(detail_type=v),
        lambda v: not v.strip(),
    ),
    "event_bus": (
        schema("EventBridgeTarget", "properties", "event_bus"),
        lambda v: events(event_bus=v),
        lambda v: False,
    ),
    "topic_arn": (
        schema("SnsTarget", "properties", "topic_arn"),
        lambda v: {"target": {"type": "sns", "topic_arn": v}},
        lambda v: len(v.rsplit(":", 1)[1]) > 256,
    ),
    "function_arn": (
        schema("LambdaTarget", "properties", "function_arn"),
        lambda v: {"target": {"type": "lambda", "function_arn": v}},
        lambda v: False,
    ),
}


@pytest.mark.parametrize("field", sorted(FIELDS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_value_the_document_allows_is_taken(field: str, data: st.DataObject) -> None:
    rules, body, excepted = FIELDS[field]
    values = st.from_regex(rules["pattern"], fullmatch=True)
    value = data.draw(values.filter(lambda v: allows(rules, v) and not excepted(v)))
    assert taken(**body(value)), value


REFUSED = {
    "name": ["a\u202eb", "a\u0000b", "a\nb", "a\u2028b", "a\u2066b"],
    "description": ["a\rb", "a\u202ab", "\x7f"],
    "tag value": ["a\nb", "\u202e", "\u2029"],
    "header value": ["é", "a\nb", "a\x7fb"],
    "header name": ["Host", "host", "Content-Length", "Connection", "duetime-x", "Webhook-Id"],
    "source": ["aws.billing", "a\nb", "a\u202eb"],
    "detail_type": ["a\u0085b"],
    "event_bus": ["a b", "arn:aws:events:eu-west-1:123:event-bus/x"],
    "topic_arn": ["arn:x:sns:y", "arn:aws:sns:eu-west-1:123456789012:a b"],
    "function_arn": ["arn::lambda:", "arn:aws:lambda:eu-west-1:123456789012:f"],
}


@pytest.mark.parametrize(("field", "value"), [(f, v) for f, vs in REFUSED.items() for v in vs])
def test_a_value_the_api_refuses_breaks_the_document(field: str, value: str) -> None:
    rules, body, _ = FIELDS[field]
    assert not taken(**body(value))
    assert not allows(rules, value)


@pytest.mark.parametrize(
    ("url", "pattern_of"),
    [
        ("https://user:secret@hooks.example.com/", "HttpTarget"),
        ("https://hooks.example.com/a b", "HttpTarget"),
        ("https://hooks.example.com/é", "HttpTarget"),
        ("ftp://hooks.example.com/", "HttpTarget"),
        ("https://sqs.eu-west-1.amazonaws.com/123456789012/q?x=1", "SqsTarget"),
        ("https://example.com/", "SqsTarget"),
        ("https://sqs.eu-west-1.amazonaws.com/123456789012/a.b", "SqsTarget"),
        (f"https://sqs.eu-west-1.amazonaws.com/123456789012/{'q' * 80}.fifo", "SqsTarget"),
    ],
)
def test_a_url_the_api_refuses_breaks_the_document(url: str, pattern_of: str) -> None:
    key = "url" if pattern_of == "HttpTarget" else "queue_url"
    kind = "http" if pattern_of == "HttpTarget" else "sqs"
    assert not taken(target={"type": kind, key: url})
    assert not allows(schema(pattern_of, "properties", key), url)


def test_a_batch_item_s_schedule_is_no_after_schedule() -> None:
    kinds = SCHEMAS["JobBatchItem"]["properties"]["schedule"]["oneOf"]
    assert {"$ref": "#/components/schemas/ScheduleAfter"} not in kinds
    assert len(kinds) == 4
