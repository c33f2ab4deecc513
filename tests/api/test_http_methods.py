"""HTTP methods on every path of the API (docs/api.md, "Routes"), through the real Lambda
handler: a method a path does not have is a 405 whose `Allow` lists exactly the methods it
has; a literal path (`/jobs/batch`) is never read as a job `{id}`; HEAD is answered wherever
GET is, with the GET's status and headers and no body."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest

from duetime.api.app import ROUTES
from duetime.api.routing import allowed_methods, shadowed, without_body
from duetime.entrypoints import api as api_handler
from duetime.local.lambda_runtime import FakeContext
from tests.integration.test_api import JOB_ID_SHAPED, Api, at, http_event

TENANT_CLAIMS = {"sub": "tenant-a", "iss": "https://issuer.example.com", "aud": "duetime"}
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND")

# What each path serves: the contract of docs/api.md, written out rather than derived from
# ROUTES, so that a routing mistake cannot hide in both.
SERVED = {
    "/health": "GET, HEAD",
    "/openapi.json": "GET, HEAD",
    "/jobs": "GET, HEAD, POST",
    "/jobs/batch": "POST",
    "/jobs/{id}": "DELETE, GET, HEAD, PATCH",
    "/jobs/{id}/pause": "POST",
    "/jobs/{id}/resume": "POST",
    "/jobs/{id}/run": "POST",
    "/jobs/{id}/backfill": "POST",
    "/jobs/{id}/runs": "GET, HEAD",
    "/schedules/preview": "POST",
    "/admin/stats": "GET, HEAD",
    "/webhook-secret": "GET, HEAD",
    "/webhook-secret/rotate": "POST",
}


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def send(method: str, path: str, *, claims: dict[str, str] | None = TENANT_CLAIMS) -> Raw:
    """Any method, as API Gateway hands it to the function; the body as bytes."""
    answer = api_handler.handler(http_event(method, path, claims=claims), FakeContext())
    raw = answer.get("body") or ""
    body = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode()
    return Raw(answer["statusCode"], dict(answer.get("headers") or {}), body)


def test_every_path_answers_a_method_it_does_not_have_with_405_and_its_exact_methods(
    api: Api,
) -> None:
    assert {path for _, path in ROUTES} == set(SERVED)
    wrong: list[str] = []
    for template, allow in SERVED.items():
        path = template.replace("{id}", JOB_ID_SHAPED)
        for method in METHODS:
            if method in allow.split(", "):
                continue
            reply = send(method, path)
            if (reply.status, reply.headers.get("Allow")) != (405, allow):
                wrong.append(
                    f"{method} {template}: {reply.status} Allow={reply.headers.get('Allow')}"
                )
            elif method != "HEAD":
                assert reply.json()["error"]["code"] == "method_not_allowed"
                assert reply.headers["Content-Type"] == "application/json"
    assert wrong == []


@pytest.mark.parametrize("method", ["GET", "HEAD", "PATCH", "DELETE", "PUT", "OPTIONS"])
def test_jobs_batch_is_not_a_job_id_every_method_but_post_is_a_405(api: Api, method: str) -> None:
    reply = send(method, "/jobs/batch")

    assert reply.status == 405
    assert reply.headers["Allow"] == "POST"
    if method == "HEAD":
        assert reply.body == b""
    else:
        assert reply.json() == {
            "error": {
                "code": "method_not_allowed",
                "message": f"{method} is not allowed on /jobs/batch",
            }
        }


def test_post_jobs_batch_still_reaches_the_batch_route(api: Api) -> None:
    reply = api.call("POST", "/jobs/batch", {"jobs": []})
    assert (reply.status, reply.error["field"]) == (400, "jobs")


def test_a_literal_segment_under_a_job_is_still_a_job_that_does_not_exist(api: Api) -> None:
    reply = api.call("GET", "/jobs/batch/runs")
    assert (reply.status, reply.error["code"]) == (404, "not_found")


def test_literal_paths_are_never_read_as_a_template_id() -> None:
    routes = (
        ("GET", "/things/{id}"),
        ("DELETE", "/things/{id}"),
        ("POST", "/things/search"),
        ("GET", "/things/{id}/parts"),
        ("GET", "/things/all/parts"),
        ("POST", "/things"),
    )
    assert shadowed(routes) == {"/things/search": ["DELETE", "GET", "HEAD"]}
    assert allowed_methods(routes, "/things/search") == ["POST"]
    assert allowed_methods(routes, "/things/all/parts") == ["GET", "HEAD"]
    assert allowed_methods(routes, "/things/x1") == ["DELETE", "GET", "HEAD"]
    assert allowed_methods(routes, "/nothing") == []
    assert shadowed(ROUTES) == {"/jobs/batch": ["DELETE", "GET", "HEAD", "PATCH"]}


# --- HEAD ----------------------------------------------------------------------------------------


def _same_answer_without_body(path: str, claims: dict[str, str] | None = TENANT_CLAIMS) -> Raw:
    got = send("GET", path, claims=claims)
    head = send("HEAD", path, claims=claims)
    assert head.status == got.status, path
    assert head.body == b"", path
    assert head.headers.pop("Content-Length") == str(len(got.body)), path
    assert head.headers == got.headers, path
    return head


def test_head_is_answered_as_get_on_every_get_route(api: Api) -> None:
    job = api.create({"schedule": {"at": at(3600)}})
    answers = {
        template: _same_answer_without_body(template.replace("{id}", job["id"]))
        for template, allow in SERVED.items()
        # The engine on moto has no KMS key for webhook secrets (a 500 either way).
        if "GET" in allow and template != "/webhook-secret"
    }
    assert {path: head.status for path, head in answers.items()} == {
        "/health": 200,
        "/openapi.json": 200,
        "/jobs": 200,
        "/jobs/{id}": 200,
        "/jobs/{id}/runs": 200,
        "/admin/stats": 403,  # not an operator: HEAD is refused as GET is
    }
    assert answers["/jobs/{id}"].headers["ETag"] == f'"{job["version"]}"'
    assert answers["/admin/stats"].headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("path", ["/console", "/console/", "/console/app.js", "/console/logo.svg"])
def test_head_is_answered_as_get_on_the_console_files(api: Api, path: str) -> None:
    head = _same_answer_without_body(path, claims=None)
    assert head.status == 200
    assert "Content-Security-Policy" in head.headers


def test_head_of_what_get_refuses_is_the_same_refusal_without_body(api: Api) -> None:
    missing_job = _same_answer_without_body(f"/jobs/{JOB_ID_SHAPED}")
    assert missing_job.status == 404
    assert _same_answer_without_body("/jobs", claims={}).status == 401  # no tenant claim
    no_route = send("HEAD", "/nothing-here")
    assert (no_route.status, no_route.body) == (404, b"")
    assert int(no_route.headers["Content-Length"]) > 0


def test_a_binary_answer_without_body_keeps_the_length_of_its_decoded_bytes() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    answer = {
        "statusCode": 200,
        "headers": {"Content-Type": "image/png", "content-length": "999"},
        "body": base64.b64encode(png).decode(),
        "isBase64Encoded": True,
    }
    assert without_body(answer) == {
        "statusCode": 200,
        "headers": {"Content-Type": "image/png", "Content-Length": str(len(png))},
        "body": "",
        "isBase64Encoded": False,
    }


@pytest.mark.parametrize("path", ["//jobs", "//health", "///jobs", "/jobs/"])
def test_a_path_that_is_no_route_is_a_404_even_one_a_slash_away(api: Api, path: str) -> None:
    # The API's side; the local gateway passed `//jobs` on as `/jobs` (found by a contract
    # audit): tests/unit/test_gateway_http.py checks that it passes paths as sent.
    reply = send("GET", path)

    assert (reply.status, reply.json()["error"]["code"]) == (404, "not_found")


@pytest.mark.parametrize("method", ["delete", "Delete", "get", "head"])
def test_a_method_in_another_case_is_a_405_and_changes_nothing(api: Api, method: str) -> None:
    # RFC 9110 §9.1: a method's name is case-sensitive. Until 2026-12-01 the resolver
    # upper-cased it, and `delete /jobs/{id}` cancelled the job (an outside contract audit).
    job = api.create({"schedule": {"rate_seconds": 60}})

    answer = send(method, f"/jobs/{job['id']}")

    assert answer.status == 405
    assert answer.headers["Allow"] == SERVED["/jobs/{id}"]
    assert answer.json()["error"]["message"].startswith(f"{method} is not allowed")
    assert api.item_status(job["id"]) == "scheduled"
