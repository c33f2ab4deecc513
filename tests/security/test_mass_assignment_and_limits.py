"""Mass assignment and limits, through the real API handler on moto.

- A client sets only what a submission is: every server-owned field (and any other unknown
  field, at any level) is refused with a 400 naming it, and nothing is stored.
- Size limits hold at their exact boundary: 256 KiB of body, 64 KiB of payload, and the
  target's limits; over them, a 413 (or 400) in the JSON error shape.
- Quotas answer 429 with `Retry-After`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from duetime.api.app import MAX_BODY_BYTES
from duetime.domain.jobs import MAX_PAYLOAD_BYTES
from tests.integration.test_api import Api, Reply

HANDLER_TARGET = {"type": "handler", "name": "test.record"}
URL_BASE = "https://x.example/"
VALID = {"schedule": {"delay_seconds": 60}, "target": HANDLER_TARGET}

# Everything the server owns in a job, its runs or its storage, spelled as a client might try.
SERVER_OWNED = [
    "id",
    "job_id",
    "status",
    "tenant",
    "owner",
    "sub",
    "created_at",
    "updated_at",
    "created_ms",
    "updated_ms",
    "next_due",
    "next_due_ms",
    "next_run_at",
    "last_run",
    "generation",
    "expires_at",
    "run_id",
    "runs",
    "ID",
    "Tenant",
    "tenant ",
]


def assert_error_shape(reply: Reply, status: int, code: str, field: str | None) -> None:
    assert reply.status == status, reply.json
    assert reply.headers["Content-Type"] == "application/json"
    assert set(reply.json) == {"error"}
    assert reply.error["code"] == code
    assert isinstance(reply.error["message"], str)
    assert reply.error["message"]
    assert reply.error.get("field") == field


@pytest.mark.parametrize("name", SERVER_OWNED)
def test_given_a_server_owned_field_when_submitted_then_400_names_it_and_nothing_is_stored(
    api: Api, name: str
) -> None:
    reply = api.call("POST", "/jobs", {**VALID, name: "01KAAAAAAAAAAAAAAAAAAAAAAA"})

    assert_error_shape(reply, 400, "invalid", name)
    assert api.job_items() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**VALID, "schedule": {"delay_seconds": 60, "tenant": "b"}}, "schedule.tenant"),
        ({**VALID, "schedule": {"delay_seconds": 60, "next_due": 0}}, "schedule.next_due"),
        ({**VALID, "target": {**HANDLER_TARGET, "tenant": "b"}}, "target.tenant"),
        (
            {**VALID, "target": {"type": "http", "url": "https://x.example", "timeout": 1}},
            "target.timeout",
        ),
        ({**VALID, "retry": {"max_attempts": 2, "attempt": 5}}, "retry.attempt"),
        ({**VALID, "catchup": {"mode": "all", "generation": 3}}, "catchup.generation"),
        ({**VALID, "": 1}, ""),  # an empty key is named too
    ],
)
def test_given_a_nested_unknown_field_when_submitted_then_400_names_its_path(
    api: Api, body: dict[str, Any], field: str
) -> None:
    reply = api.call("POST", "/jobs", body)

    assert_error_shape(reply, 400, "invalid", field)
    assert api.job_items() == []


def test_given_server_owned_fields_in_an_accepted_body_then_the_server_sets_them(
    api: Api,
) -> None:
    # The same body without them is accepted, and what the server set is its own.
    job = api.create(dict(VALID))
    assert job["status"] == "scheduled"
    assert [item["tenant"]["S"] for item in api.job_items()] == ["tenant-a"]


# --- size limits -------------------------------------------------------------------------------


def padded(body: dict[str, Any], size: int) -> str:
    """`body` as JSON padded with trailing whitespace to exactly `size` bytes."""
    text = json.dumps(body)
    assert len(text.encode()) <= size
    return text + " " * (size - len(text.encode()))


def test_a_body_of_exactly_256_kib_is_accepted_and_one_byte_more_is_a_413(api: Api) -> None:
    accepted = api.call("POST", "/jobs", raw_body=padded(VALID, MAX_BODY_BYTES))
    assert accepted.status == 201, accepted.json

    refused = api.call("POST", "/jobs", raw_body=padded(VALID, MAX_BODY_BYTES + 1))
    assert_error_shape(refused, 413, "payload_too_large", "body")
    assert len(api.job_items()) == 1


def test_the_body_limit_counts_decoded_bytes_of_a_base64_body(api: Api) -> None:
    raw = padded(VALID, MAX_BODY_BYTES + 1).encode()

    reply = api.call("POST", "/jobs", raw_body=base64.b64encode(raw).decode(), is_base64=True)

    assert_error_shape(reply, 413, "payload_too_large", "body")


def payload_of(size: int) -> str:
    """A string payload whose compact JSON is exactly `size` bytes (two of them quotes)."""
    return "x" * (size - 2)


def test_a_payload_of_exactly_64_kib_is_accepted_and_one_byte_more_is_a_413(api: Api) -> None:
    accepted = api.call("POST", "/jobs", {**VALID, "payload": payload_of(MAX_PAYLOAD_BYTES)})
    assert accepted.status == 201, accepted.json

    refused = api.call("POST", "/jobs", {**VALID, "payload": payload_of(MAX_PAYLOAD_BYTES + 1)})
    assert_error_shape(refused, 413, "payload_too_large", "payload")
    assert len(api.job_items()) == 1


def test_a_payload_limit_counts_escaped_bytes_so_multibyte_text_cannot_slip_past(
    api: Api,
) -> None:
    # 40,000 characters of 3-byte UTF-8 are 120,000 bytes however they are counted.
    reply = api.call("POST", "/jobs", {**VALID, "payload": "€" * 40_000})

    assert_error_shape(reply, 413, "payload_too_large", "payload")


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "http", "url": URL_BASE + "a" * (2048 - len(URL_BASE))}, None),  # longest
        ({"type": "http", "url": URL_BASE + "a" * (2049 - len(URL_BASE))}, "target.url"),
        (
            {
                "type": "http",
                "url": "https://x.example/",
                "headers": {f"X-H{i}": "v" for i in range(21)},
            },
            "target.headers",
        ),
        (
            {"type": "http", "url": "https://x.example/", "headers": {"X-Big": "v" * 4097}},
            "target.headers.X-Big",
        ),
        (
            {"type": "http", "url": "https://x.example/", "headers": {"X-Split": "a\r\nHost: x"}},
            "target.headers.X-Split",
        ),
    ],
)
def test_target_limits_hold_at_their_boundary(
    api: Api, target: dict[str, Any], field: str | None
) -> None:
    reply = api.call("POST", "/jobs", {**VALID, "target": target})

    if field is None:
        assert reply.status == 201, reply.json
    else:
        assert_error_shape(reply, 400, "invalid", field)


def test_a_name_of_129_characters_is_refused(api: Api) -> None:
    assert api.call("POST", "/jobs", {**VALID, "name": "n" * 128}).status == 201
    reply = api.call("POST", "/jobs", {**VALID, "name": "n" * 129})
    assert_error_shape(reply, 400, "invalid", "name")


# --- quotas ------------------------------------------------------------------------------------


def test_the_submission_rate_is_a_429_with_retry_after_on_both_submitting_routes(
    api: Api,
) -> None:
    api.configure(DUETIME_SUBMISSIONS_PER_SECOND="0.01", DUETIME_SUBMISSION_BURST="2")
    job = api.create({"schedule": {"rate_seconds": 60}})
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202

    for method, path, body in (("POST", "/jobs", VALID), ("POST", f"/jobs/{job['id']}/run", None)):
        reply = api.call(method, path, body)
        assert_error_shape(reply, 429, "quota_exceeded", None)
        assert int(reply.headers["Retry-After"]) >= 1
    assert len(api.job_items()) == 1


@pytest.mark.parametrize(
    ("env", "body", "field"),
    [
        (
            {"DUETIME_MIN_RATE_SECONDS": "60"},
            {"schedule": {"rate_seconds": 59}},
            "schedule.rate_seconds",
        ),
        (
            {"DUETIME_MAX_ACTIVE_RECURRING_JOBS": "1"},
            {"schedule": {"cron": "0 * * * *"}},
            "schedule",
        ),
    ],
)
def test_count_quotas_are_a_429_with_retry_after_naming_the_field(
    api: Api, env: dict[str, str], body: dict[str, Any], field: str
) -> None:
    api.configure(**env)
    api.create({"schedule": {"rate_seconds": 60}})

    reply = api.call("POST", "/jobs", {**body, "target": HANDLER_TARGET})

    assert_error_shape(reply, 429, "quota_exceeded", field)
    assert int(reply.headers["Retry-After"]) >= 1
    assert len(api.job_items()) == 1


@pytest.mark.parametrize("url", ["http://[::1/", "http://[abc]/", "https://x.example:70000/"])
def test_a_url_python_cannot_split_is_a_400_not_a_500(api: Api, url: str) -> None:
    # Found by tests/security/test_job_spec_fuzz.py: these were unhandled ValueErrors.
    reply = api.call("POST", "/jobs", {**VALID, "target": {"type": "http", "url": url}})

    assert_error_shape(reply, 400, "invalid", "target.url")
    assert api.job_items() == []


def test_security_md_lists_exactly_the_fields_a_submission_accepts() -> None:
    import re
    from pathlib import Path

    from duetime.domain import jobs

    text = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    listed = re.search(r"accepts exactly the submission fields \(([^)]*)\)", text)
    assert listed is not None
    assert set(re.findall(r"`([a-z_]+)`", listed.group(1))) == jobs._SPEC_FIELDS
