"""What the API reads from a request besides its route: the `cursor` query parameter (empty
is the first page, as the OpenAPI document allows) and the JSON body (a key twice in one
object is refused, naming the key's path, at any depth)."""

from __future__ import annotations

import base64
import json

import pytest

from duetime.api.body import MAX_BODY_BYTES, MAX_JSON_DEPTH, json_body
from duetime.api.openapi import OPENAPI
from duetime.domain.errors import PayloadTooLarge, ValidationError
from tests.integration.test_api import HANDLER_TARGET, Api, at

# --- cursor ----------------------------------------------------------------------------------


def test_an_empty_cursor_is_the_first_page_of_jobs(api: Api) -> None:
    for _ in range(3):
        api.create({"schedule": {"at": at(3600)}})
    first = api.call("GET", "/jobs", query={"limit": "2"})

    empty = api.call("GET", "/jobs", query={"limit": "2", "cursor": ""})

    assert empty.status == 200
    assert empty.json == first.json
    assert len(empty.json["items"]) == 2
    assert empty.json["next_cursor"]


def test_an_empty_cursor_is_the_first_page_of_runs(api: Api) -> None:
    job = api.create({"schedule": {"at": at(3600)}})
    reply = api.call("GET", f"/jobs/{job['id']}/runs", query={"cursor": ""})
    assert (reply.status, reply.json) == (200, {"items": [], "next_cursor": None})


def test_the_document_allows_the_empty_cursor_the_api_accepts() -> None:
    schema = OPENAPI["components"]["parameters"]["Cursor"]["schema"]
    assert schema.get("minLength", 0) == 0
    assert "empty" in OPENAPI["components"]["parameters"]["Cursor"]["description"]


def test_the_max_backoff_default_is_the_documents_and_follows_a_larger_backoff(api: Api) -> None:
    # The document gave 300 as the default; a backoff of 600 stores 600 (found by an audit).
    retry = {"backoff_seconds": 600}
    job = api.create({"schedule": {"at": at(3600)}, "retry": retry})
    assert job["retry"]["max_backoff_seconds"] == 600
    request = OPENAPI["components"]["schemas"]["JobRequest"]["properties"]["retry"]
    field = request["properties"]["max_backoff_seconds"]
    assert "default" not in field
    assert "backoff_seconds when that is larger" in field["description"]


# --- duplicate keys --------------------------------------------------------------------------

JOB = '"target": {"type": "handler", "name": "test.record"}'


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            '{"schedule": {"rate_seconds": 60}, "schedule": {"delay_seconds": 1}, ' + JOB + "}",
            "schedule",
        ),
        (
            '{"schedule": {"delay_seconds": 60, "delay_seconds": 1}, ' + JOB + "}",
            "schedule.delay_seconds",
        ),
        (
            '{"schedule": {"delay_seconds": 60}, "target": {"type": "http", '
            '"url": "https://example.com/hook", "headers": {"X": "a", "X": "b"}}}',
            "target.headers.X",
        ),
        (
            '{"schedule": {"delay_seconds": 60}, ' + JOB + ', "payload": {"a": [1, {"b": '
            '{"c": 1, "c": 2}}]}}',
            "payload.a[1].b.c",
        ),
        # JSON escapes spell the same key: still twice
        (
            '{"schedule": {"delay_seconds": 60}, "na\\u006de": "x", "name": "y", ' + JOB + "}",
            "name",
        ),
        ('{"schedule": {"delay_seconds": 60}, ' + JOB + ', "tags": {"": "a", "": "b"}}', "tags."),
    ],
)
def test_a_key_twice_in_a_submission_is_a_400_naming_its_path_and_nothing_is_stored(
    api: Api, body: str, field: str
) -> None:
    reply = api.call("POST", "/jobs", raw_body=body)

    assert reply.status == 400
    assert reply.json == {
        "error": {"code": "invalid", "message": "appears twice in one object", "field": field}
    }
    assert api.job_items() == []


def test_a_key_twice_in_a_batch_refuses_the_batch_naming_the_item(api: Api) -> None:
    good = {"schedule": {"delay_seconds": 60}, "target": HANDLER_TARGET}
    body = (
        '{"jobs": ['
        + json.dumps(good)
        + ', {"schedule": {"delay_seconds": 60}, "retry": {"max_attempts": 2, "max_attempts": 3}, '
        + JOB
        + "}]}"
    )

    reply = api.call("POST", "/jobs/batch", raw_body=body)

    assert (reply.status, reply.error["field"]) == (400, "jobs[1].retry.max_attempts")
    assert api.job_items() == []


def test_a_key_twice_in_an_update_is_a_400_and_the_job_is_unchanged(api: Api) -> None:
    job = api.create({"schedule": {"at": at(3600)}, "name": "before"})

    reply = api.call("PATCH", f"/jobs/{job['id']}", raw_body='{"name": "a", "name": "b"}')

    assert (reply.status, reply.error["field"]) == (400, "name")
    assert api.call("GET", f"/jobs/{job['id']}").json["name"] == "before"


def test_a_key_twice_in_a_preview_is_a_400(api: Api) -> None:
    body = '{"schedule": {"rate_seconds": 60}, "schedule": {"cron": "* * * * *"}}'
    reply = api.call("POST", "/schedules/preview", raw_body=body)
    assert (reply.status, reply.error["field"]) == (400, "schedule")


def _refusal(body: str) -> tuple[str, str]:
    with pytest.raises(ValidationError) as refused:
        json_body({"body": body})
    return type(refused.value).__name__, refused.value.field


def test_the_first_duplicate_in_document_order_is_named() -> None:
    assert _refusal('{"a": {"b": 1, "b": 2}, "a": 3}') == ("ValidationError", "a")
    assert _refusal('{"x": {"b": 1, "b": 2}, "y": {"c": 1, "c": 2}}') == ("ValidationError", "x.b")
    assert _refusal('[{"k": 1}, {"k": 1, "k": 1}]') == ("ValidationError", "[1].k")


def test_a_duplicate_at_the_deepest_level_allowed_is_named() -> None:
    depth = MAX_JSON_DEPTH - 1
    body = '{"k": ' * depth + '{"z": 1, "z": 2}' + "}" * depth
    assert _refusal(body) == ("ValidationError", ".".join(["k"] * depth + ["z"]))


def test_the_depth_and_size_limits_still_apply_to_bodies_with_duplicates() -> None:
    too_deep = '{"k": ' * MAX_JSON_DEPTH + '{"z": 1, "z": 2}' + "}" * MAX_JSON_DEPTH
    assert _refusal(too_deep) == ("ValidationError", "body")
    padding = "x" * MAX_BODY_BYTES
    with pytest.raises(PayloadTooLarge):
        json_body({"body": f'{{"a": 1, "a": "{padding}"}}'})


def test_distinct_keys_and_equal_keys_in_different_objects_are_fine() -> None:
    body = '{"a": {"id": 1}, "b": {"id": 2}, "c": [{"id": 3}, {"id": 4}], "A": 5}'
    assert json_body({"body": body}) == json.loads(body)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"a": 1}'.encode("utf-16"), "not UTF-8"),  # json.loads guessed UTF-16 and took it
        ('{"a": 1}'.encode("utf-32-le"), "not valid JSON"),  # valid UTF-8: NULs between
        ('{"a": 1}'.encode("utf-8-sig"), "a byte order mark"),
        (b'{"a": "\xe9"}', "not UTF-8"),  # Latin-1
    ],
)
def test_a_body_that_is_not_utf_8_is_a_400(raw: bytes, reason: str) -> None:
    event = {"body": base64.b64encode(raw).decode(), "isBase64Encoded": True}
    with pytest.raises(ValidationError) as refused:
        json_body(event)
    assert refused.value.field == "body"
    assert reason in refused.value.message


def test_a_lone_surrogate_in_a_text_body_is_a_400_not_a_500() -> None:
    with pytest.raises(ValidationError) as refused:
        json_body({"body": '{"a": "\ud800"}'})
    assert "not UTF-8" in refused.value.message


def test_utf_8_text_beyond_ascii_is_read_as_sent() -> None:
    body = '{"name": "réveil ☀ 日本"}'
    assert json_body({"body": body}) == {"name": "réveil ☀ 日本"}
    encoded = base64.b64encode(body.encode()).decode()
    assert json_body({"body": encoded, "isBase64Encoded": True}) == {"name": "réveil ☀ 日本"}
