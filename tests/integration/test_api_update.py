"""Issue 14, items 4 and 1 through the API handler on moto: description and tags, the list
filters, and PATCH /jobs/{id} (versions, ETag/If-Match, re-arming on a new schedule).

Every reply is validated against the OpenAPI document (tests/integration/test_api.py)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.timeutil import rfc3339_ms
from duetime.entrypoints import api as api_handler
from duetime.local.lambda_runtime import FakeContext
from tests.integration.conftest import Engine, engine  # noqa: F401 - fixture
from tests.integration.test_api import (
    JOB_ID_SHAPED,
    Api,
    Reply,
    api,  # noqa: F401 - fixture
    at,
    check_against_openapi,
    http_event,
    to_ms_of,
)

# --- item 4: description and tags ------------------------------------------------------------


def list_jobs(api: Api, pairs: list[tuple[str, str]]) -> Reply:  # noqa: F811
    """GET /jobs with repeated parameters, as API Gateway passes them: the raw query string
    as sent, and queryStringParameters with repeated values joined by commas."""
    joined: dict[str, str] = {}
    for key, value in pairs:
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    claims = {"sub": "tenant-a"}
    event = http_event("GET", "/jobs", query=joined or None, claims=claims)
    event["rawQueryString"] = urlencode(pairs)
    response = api_handler.handler(event, FakeContext())
    reply = Reply(response["statusCode"], response["headers"], json.loads(response["body"]))
    check_against_openapi("GET", "/jobs", reply)
    return reply


def all_pages(api: Api, pairs: list[tuple[str, str]], limit: int) -> tuple[list[str], int]:  # noqa: F811
    """The ids listed by following next_cursor, and how many pages it took."""
    ids: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = [*pairs, ("limit", str(limit))] + ([("cursor", cursor)] if cursor else [])
        reply = list_jobs(api, query)
        assert reply.status == 200, reply.json
        pages += 1
        assert len(reply.json["items"]) <= limit
        ids += [job["id"] for job in reply.json["items"]]
        cursor = reply.json["next_cursor"]
        if cursor is None:
            return ids, pages


def test_description_and_tags_are_stored_and_shown(api: Api) -> None:  # noqa: F811
    job = api.create(
        {
            "schedule": {"rate_seconds": 60},
            "description": "closes the books",
            "tags": {"team": "payments", "env": "prod"},
        }
    )
    assert (job["description"], job["tags"]) == (
        "closes the books",
        {"team": "payments", "env": "prod"},
    )
    fetched = api.call("GET", f"/jobs/{job['id']}").json
    assert (fetched["description"], fetched["tags"]) == (job["description"], job["tags"])
    item = next(i for i in api.job_items() if i["id"]["S"] == job["id"])
    spec = json.loads(item["spec"]["S"])
    assert (spec["description"], spec["tags"]) == (job["description"], job["tags"])
    plain = api.create({"schedule": {"rate_seconds": 60}})
    assert (plain["description"], plain["tags"]) == (None, {})


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"description": "d" * 1025}, "description"),
        ({"tags": {f"k{i}": "v" for i in range(21)}}, "tags"),
        ({"tags": {"k" * 65: "v"}}, "tags." + "k" * 65),
        ({"tags": {"team": "v" * 257}}, "tags.team"),
        ({"tags": {"team:x": "v"}}, "tags.team:x"),
    ],
)
def test_over_the_limits_a_submission_is_a_400_naming_the_field(
    api: Api,  # noqa: F811
    extra: dict[str, Any],
    field: str,
) -> None:
    reply = api.call(
        "POST",
        "/jobs",
        {
            "schedule": {"rate_seconds": 60},
            "target": {"type": "handler", "name": "test.record"},
            **extra,
        },
    )
    assert (reply.status, reply.error["code"], reply.error["field"]) == (400, "invalid", field)


def test_list_filters_by_every_tag_and_the_name_prefix_across_pages(api: Api) -> None:  # noqa: F811
    def make(name: str, **tags: str) -> str:
        job = api.create({"schedule": {"rate_seconds": 60}, "name": name, "tags": tags})
        api.engine.advance(0.01)  # ids in creation order
        return str(job["id"])

    pay_prod = make("nightly-close", team="payments", env="prod")
    make("nightly-sync", team="payments", env="dev")
    make("hourly", team="core", env="prod")
    pay_prod_2 = make("weekly-report", team="payments", env="prod")
    make("nightly-other", team="core")
    pay_prod_3 = make("nightly-archive", team="payments", env="prod", extra="x")

    both = [("tag", "team:payments"), ("tag", "env:prod")]
    ids, pages = all_pages(api, both, limit=2)
    assert ids == [pay_prod_3, pay_prod_2, pay_prod]  # newest first, AND across tags
    assert pages == 3  # each page reads 2 jobs and keeps the matching ones
    ids, _ = all_pages(api, [*both, ("name_prefix", "nightly-")], limit=50)
    assert ids == [pay_prod_3, pay_prod]
    ids, _ = all_pages(api, [("name_prefix", "nightly-")], limit=50)
    assert len(ids) == 4
    ids, _ = all_pages(api, [("tag", "team:nobody")], limit=50)
    assert ids == []
    # Combined with the status filter.
    api.call("POST", f"/jobs/{pay_prod}/pause")
    ids, _ = all_pages(api, [*both, ("status", "paused")], limit=50)
    assert ids == [pay_prod]


def test_a_tag_value_may_hold_a_comma_and_a_colon(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}, "tags": {"where": "eu-west-1,a:b"}})
    api.create({"schedule": {"rate_seconds": 60}, "tags": {"where": "eu-west-1"}})
    reply = list_jobs(api, [("tag", "where:eu-west-1,a:b")])
    assert [j["id"] for j in reply.json["items"]] == [job["id"]]


@pytest.mark.parametrize(
    ("pairs", "field"),
    [
        ([("tag", "no-colon")], "tag"),
        ([("tag", ":value")], "tag"),
        ([("tag", "k" * 65 + ":v")], "tag"),
        ([("tag", "k:" + "v" * 257)], "tag"),
        ([("tag", f"k{i}:v") for i in range(21)], "tag"),
        ([("name_prefix", "")], "name_prefix"),
        ([("name_prefix", "n" * 129)], "name_prefix"),
        ([("name_prefix", "a"), ("name_prefix", "b")], "name_prefix"),
    ],
)
def test_bad_filters_are_a_400_naming_them(
    api: Api,  # noqa: F811
    pairs: list[tuple[str, str]],
    field: str,
) -> None:
    reply = list_jobs(api, pairs)
    assert (reply.status, reply.error["field"]) == (400, field), reply.json


# --- item 1: versions, ETag and If-Match ----------------------------------------------------


def test_every_change_of_the_job_moves_its_version_and_etag_on(api: Api) -> None:  # noqa: F811
    created = api.call(
        "POST",
        "/jobs",
        {"schedule": {"rate_seconds": 60}, "target": {"type": "handler", "name": "test.record"}},
    )
    job_id = created.json["id"]
    assert (created.json["version"], created.headers["ETag"]) == (1, '"1"')
    steps = [
        ("PATCH", "", {"name": "renamed"}),
        ("POST", "/pause", None),
        ("POST", "/resume", None),
        ("DELETE", "", None),
    ]
    for version, (method, suffix, body) in enumerate(steps, start=2):
        reply = api.call(method, f"/jobs/{job_id}{suffix}", body)
        assert reply.status == 200, reply.json
        assert (reply.json["version"], reply.headers["ETag"]) == (version, f'"{version}"')
        fetched = api.call("GET", f"/jobs/{job_id}")
        assert (fetched.json["version"], fetched.headers["ETag"]) == (version, f'"{version}"')
    # Idempotent requests that change nothing leave it.
    assert api.call("DELETE", f"/jobs/{job_id}").json["version"] == 5


def test_an_update_returns_the_job_and_stores_it(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}, "name": "before", "tags": {"a": "1"}})
    reply = api.call(
        "PATCH",
        f"/jobs/{job['id']}",
        {
            "name": "after",
            "description": "now described",
            "tags": {"b": "2"},
            "retry": {"max_attempts": 5},
        },
    )
    assert reply.status == 200, reply.json
    assert (reply.json["name"], reply.json["description"], reply.json["tags"]) == (
        "after",
        "now described",
        {"b": "2"},
    )
    assert reply.json["retry"]["max_attempts"] == 5
    assert reply.json["schedule"] == job["schedule"]
    assert reply.json["version"] == 2
    fetched = api.call("GET", f"/jobs/{job['id']}").json
    assert {k: v for k, v in fetched.items() if k != "next_run_at"} == {
        k: v for k, v in reply.json.items() if k != "next_run_at"
    }
    item = next(i for i in api.job_items() if i["id"]["S"] == job["id"])
    assert (item["ver"]["N"], item["gen"]["N"]) == ("2", "0")  # no re-arm: the same chain


def test_if_match_with_a_stale_version_is_a_412_and_changes_nothing(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}, "name": "first"})
    ok = api.call("PATCH", f"/jobs/{job['id']}", {"name": "second"}, headers={"If-Match": '"1"'})
    assert (ok.status, ok.json["version"]) == (200, 2)

    stale = api.call("PATCH", f"/jobs/{job['id']}", {"name": "third"}, headers={"If-Match": '"1"'})

    assert (stale.status, stale.error["code"]) == (412, "precondition_failed")
    fetched = api.call("GET", f"/jobs/{job['id']}").json
    assert (fetched["name"], fetched["version"]) == ("second", 2)
    # Without If-Match (or with *) the update applies.
    assert (
        api.call("PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers={"If-Match": "*"}).json[
            "version"
        ]
        == 3
    )
    assert api.call("PATCH", f"/jobs/{job['id']}", {"name": "y"}).json["version"] == 4


@pytest.mark.parametrize(
    ("method", "action", "status"),
    [
        ("DELETE", "", "cancelled"),
        ("POST", "/pause", "paused"),
        ("POST", "/resume", "scheduled"),
    ],
)
def test_a_status_change_honours_if_match_like_an_update(
    api: Api,  # noqa: F811
    method: str,
    action: str,
    status: str,
) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})
    path = f"/jobs/{job['id']}"
    if action == "/resume":
        api.call("POST", f"{path}/pause")  # version 2
    version = api.call("GET", path).json["version"]
    api.call("PATCH", path, {"name": "changed meanwhile"})  # version + 1

    stale = api.call(method, path + action, headers={"If-Match": f'"{version}"'})
    assert (stale.status, stale.error["code"]) == (412, "precondition_failed")
    assert api.call("GET", path).json["version"] == version + 1  # nothing changed
    bad = api.call(method, path + action, headers={"If-Match": "one"})
    assert (bad.status, bad.error["field"]) == (400, "If-Match")

    done = api.call(method, path + action, headers={"If-Match": f'"{version + 1}"'})
    assert (done.status, done.json["status"]) == (200, status)
    assert done.headers["ETag"] == f'"{version + 2}"'


def test_a_read_honours_if_match(api: Api) -> None:  # noqa: F811
    # RFC 9110 13.1.1: an origin server MUST evaluate If-Match (it was ignored on GET and HEAD:
    # a stale version answered 200, found by a contract audit).
    job = api.create({"schedule": {"rate_seconds": 60}})
    path = f"/jobs/{job['id']}"
    api.call("PATCH", path, {"name": "changed meanwhile"})  # version 2

    stale = api.call("GET", path, headers={"If-Match": '"1"'})
    assert (stale.status, stale.error["code"]) == (412, "precondition_failed")
    current = api.call("GET", path, headers={"If-Match": '"1", "2"'})
    assert (current.status, current.headers["ETag"]) == (200, '"2"')
    assert api.call("GET", path, headers={"If-Match": "*"}).status == 200
    assert api.call("GET", path, headers={"If-Match": "one"}).error["field"] == "If-Match"
    unknown = api.call("GET", f"/jobs/{'0' * 26}", headers={"If-Match": '"1"'})
    assert unknown.status == 404  # a condition on a job that does not exist

    def head(if_match: str) -> int:
        event = http_event("HEAD", path, headers={"If-Match": if_match}, claims={"sub": "tenant-a"})
        answer = api_handler.handler(event, FakeContext())
        assert not answer.get("body")
        return int(answer["statusCode"])

    assert (head('"1"'), head('"2"')) == (412, 200)  # HEAD answers as GET would


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_read_whose_if_none_match_names_the_version_is_a_304(api: Api, method: str) -> None:  # noqa: F811
    # RFC 9110 13.1.2 (it was ignored: found by a contract audit, round two).
    job = api.create({"schedule": {"rate_seconds": 60}})
    path = f"/jobs/{job['id']}"

    def read(if_none_match: str) -> dict[str, Any]:
        event = http_event(
            method, path, headers={"If-None-Match": if_none_match}, claims={"sub": "tenant-a"}
        )
        answer: dict[str, Any] = api_handler.handler(event, FakeContext())
        return answer

    for tag in ('"1"', 'W/"1"', '"7", "1"', "*"):
        answer = read(tag)
        assert answer["statusCode"] == 304, tag
        assert not answer.get("body")
        assert answer["headers"]["ETag"] == '"1"'
        assert answer["headers"]["Cache-Control"] == "no-store"
        # RFC 9110 8.6: no Content-Length unless it is the 200's (HEAD set 0: found by review)
        assert "Content-Length" not in answer["headers"]
    assert read('"2"')["statusCode"] == 200
    assert read("two")["statusCode"] == 400


@pytest.mark.parametrize(
    ("method", "action", "body"),
    [
        ("PATCH", "", {"name": "x"}),
        ("DELETE", "", None),
        ("POST", "/pause", None),
        ("POST", "/run", None),
    ],
)
def test_a_change_whose_if_none_match_names_the_version_is_a_412(
    api: Api,  # noqa: F811
    method: str,
    action: str,
    body: dict[str, Any] | None,
) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})
    path = f"/jobs/{job['id']}{action}"

    for tag in ('"1"', "*", 'W/"1"'):
        refused = api.call(method, path, body, headers={"If-None-Match": tag})
        assert (refused.status, refused.error["code"]) == (412, "precondition_failed"), tag
        assert "which If-None-Match names" in refused.error["message"]
    assert api.call("GET", f"/jobs/{job['id']}").json["version"] == 1  # nothing changed
    done = api.call(method, path, body, headers={"If-None-Match": '"5"'})
    assert done.status in (200, 202)


@pytest.mark.parametrize("action", ["/run", "/backfill"])
def test_run_now_and_backfill_honour_if_match(api: Api, action: str) -> None:  # noqa: F811
    # A stale If-Match was ignored: a run started (found by a contract audit, round two).
    job = api.create({"schedule": {"rate_seconds": 60}})
    api.call("PATCH", f"/jobs/{job['id']}", {"name": "changed meanwhile"})  # version 2
    body = {"from": at(-120), "to": at(0)} if action == "/backfill" else None
    sent = api.engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL)

    stale = api.call("POST", f"/jobs/{job['id']}{action}", body, headers={"If-Match": '"1"'})

    assert (stale.status, stale.error["code"]) == (412, "precondition_failed")
    assert api.engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == sent
    current = api.call("POST", f"/jobs/{job['id']}{action}", body, headers={"If-Match": '"2"'})
    assert current.status == 202, current.json


@pytest.mark.parametrize(
    ("method", "action"),
    [
        ("GET", ""),
        ("PATCH", ""),
        ("DELETE", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/run"),
    ],
)
def test_a_malformed_if_match_is_a_400_whatever_if_none_match_says(
    api: Api,  # noqa: F811
    method: str,
    action: str,
) -> None:
    # RFC 9110 13.2.2 evaluates If-Match first: DELETE, pause and resume answered a 412 for
    # the If-None-Match beside it (a contract audit, round three).
    job = api.create({"schedule": {"rate_seconds": 60}})
    body = {"name": "x"} if method == "PATCH" else None
    headers = {"If-Match": "abc", "If-None-Match": "*"}
    reply = api.call(method, f"/jobs/{job['id']}{action}", body, headers=headers)
    assert (reply.status, reply.error["field"]) == (400, "If-Match")


def test_a_keyed_run_now_repeated_after_a_change_answers_its_run_not_a_412(
    api: Api,  # noqa: F811
) -> None:
    # Its preconditions gate the first request; a repeat with the key answers that request's
    # run: it was a 412 "read it again and retry", and a client doing so ran the job twice
    # (a contract audit, round three).
    job = api.create({"schedule": {"rate_seconds": 60}})
    path = f"/jobs/{job['id']}/run"
    keyed = {"Idempotency-Key": "run-once", "If-Match": '"1"'}
    first = api.call("POST", path, headers=keyed)
    assert first.status == 202, first.json
    api.call("PATCH", f"/jobs/{job['id']}", {"name": "changed meanwhile"})  # version 2

    replay = api.call("POST", path, headers=keyed)

    assert (replay.status, replay.json) == (202, first.json)
    stale = api.call("POST", path, headers={"Idempotency-Key": "another", "If-Match": '"1"'})
    assert (stale.status, stale.error["code"]) == (412, "precondition_failed")
    again = api.call("POST", path, headers={"Idempotency-Key": "another", "If-Match": '"2"'})
    assert again.status == 202  # the refused request did not keep its key
    assert again.json["run_id"] != first.json["run_id"]


@pytest.mark.parametrize(
    "header",
    # (and longer than the OpenAPI document's 1,024: found by a contract audit, it was a 412)
    ["one", '"1', "", " , ", '"1", one', '"a"b"', '"\x7f"', '"9", ' * 205 + '"9"'],
)
def test_a_malformed_if_match_is_a_400(api: Api, header: str) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers={"If-Match": header})
    assert (reply.status, reply.error["field"]) == (400, "If-Match")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "paused"}, "status"),
        ({"version": 9}, "version"),
        ({"id": JOB_ID_SHAPED}, "id"),
        ({"tenant": "tenant-b"}, "tenant"),
        ({"unknown": 1}, "unknown"),
        ({"schedule": {"cron": "61 * * * *"}}, "schedule.cron"),
        ({"schedule": {"at": "2026-11-21T12:00:00Z", "rate_seconds": 5}}, "schedule"),
        ({"description": "d" * 1025}, "description"),
        ({"target": {"type": "http"}}, "target.url"),
    ],
)
def test_a_bad_update_is_a_400_naming_the_field_and_changes_nothing(
    api: Api,  # noqa: F811
    body: dict[str, Any],
    field: str,
) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})
    reply = api.call("PATCH", f"/jobs/{job['id']}", body)
    assert (reply.status, reply.error["code"], reply.error.get("field")) == (400, "invalid", field)
    assert api.call("GET", f"/jobs/{job['id']}").json["version"] == 1


def test_an_empty_or_non_object_body_is_a_400(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}})
    for raw in ("", "[]", "null", "{"):
        reply = api.call("PATCH", f"/jobs/{job['id']}", raw_body=raw)
        assert (reply.status, reply.error["field"]) == (400, "body"), raw


def test_an_update_that_changes_nothing_keeps_the_version(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}, "name": "same"})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"name": "same"})
    assert (reply.status, reply.json["version"], reply.headers["ETag"]) == (200, 1, '"1"')
    assert api.call("PATCH", f"/jobs/{job['id']}", {}).json["version"] == 1


def test_a_cancelled_or_finished_job_cannot_be_updated(api: Api) -> None:  # noqa: F811
    done = api.create({"schedule": {"delay_seconds": 0}})
    api.engine.drain()
    assert api.call("GET", f"/jobs/{done['id']}").json["status"] == "succeeded"
    reply = api.call("PATCH", f"/jobs/{done['id']}", {"name": "late"})
    assert (reply.status, reply.error["code"]) == (409, "conflict")

    cancelled = api.create({"schedule": {"rate_seconds": 60}})
    api.call("DELETE", f"/jobs/{cancelled['id']}")
    reply = api.call("PATCH", f"/jobs/{cancelled['id']}", {"schedule": {"rate_seconds": 120}})
    assert (reply.status, reply.error["code"]) == (409, "conflict")
    assert api.item_status(cancelled["id"]) == "cancelled"


def test_a_job_past_its_last_occurrence_is_a_409_for_a_change_and_a_400_on_a_past_end(
    api: Api,  # noqa: F811
) -> None:
    # Found by an audit: PATCH {"jitter_seconds": 5} on a recurring job with no occurrence
    # left before its end_at (its last one handed over, the job not yet completed) was a 400
    # naming `schedule`, a field the body did not have.
    end = rfc3339_ms(wall_ms() + 1_000_000)
    job = api.create({"schedule": {"rate_seconds": 30, "end_at": end}})
    api.engine.advance(995)  # past its last occurrence, no sweep since: not completed yet
    assert api.call("GET", f"/jobs/{job['id']}").json["status"] == "scheduled"

    reply = api.call("PATCH", f"/jobs/{job['id']}", {"jitter_seconds": 5})
    assert (reply.status, reply.error["code"]) == (409, "conflict"), reply.json
    assert "past its last occurrence" in reply.error["message"]
    earlier = rfc3339_ms(wall_ms() - 30_000)
    moved = api.call(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"rate_seconds": 30, "end_at": earlier}}
    )
    assert (moved.status, moved.error["field"]) == (400, "schedule.end_at"), moved.json
    assert "in the past" in moved.error["message"]
    assert api.call("GET", f"/jobs/{job['id']}").json["version"] == 1


def test_an_update_that_changes_nothing_past_the_last_occurrence_answers_the_completed_job(
    api: Api,  # noqa: F811
) -> None:
    # Found by review: it completed the job (it arms it again, as a resume does) but answered
    # 200 with the job as it was, `scheduled`, and its old ETag.
    end = rfc3339_ms(wall_ms() + 1_000_000)
    job = api.create({"schedule": {"rate_seconds": 30, "end_at": end}})
    api.engine.advance(995)

    reply = api.call("PATCH", f"/jobs/{job['id']}", {})
    shown = api.call("GET", f"/jobs/{job['id']}")

    assert (reply.status, reply.json["status"]) == (200, "completed"), reply.json
    assert reply.headers["ETag"] == shown.headers["ETag"]
    assert shown.json["status"] == "completed"


def test_another_tenant_s_job_is_a_404(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"rate_seconds": 60}})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"name": "mine"}, tenant="tenant-b")
    assert (reply.status, reply.error["code"]) == (404, "not_found")
    assert api.call("GET", f"/jobs/{job['id']}").json["name"] is None


# --- item 1: re-arming --------------------------------------------------------------------------


def test_rescheduling_a_one_off_drops_the_old_instant_and_runs_at_the_new_one(api: Api) -> None:  # noqa: F811
    # Given a one-off 60 s ahead, its message already in SQS (before the sweep horizon)
    job = api.create({"schedule": {"at": at(60)}})
    assert api.engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 1

    # When it is moved to +150 s
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"at": at(150)}})
    assert (reply.status, reply.json["next_run_at"]) == (200, at(150))

    # Then the old instant passes without a run, and the new one runs once
    api.engine.advance(70)
    api.engine.drain()
    assert api.engine.recorder.runs_of(job["id"]) == []
    api.engine.advance(90)
    api.engine.tick()
    api.engine.drain()
    assert api.engine.recorder.runs_of(job["id"]) == [to_ms_of(at(150))]
    assert api.call("GET", f"/jobs/{job['id']}").json["status"] == "succeeded"


def test_rescheduling_a_recurring_job_follows_the_new_schedule_only(api: Api) -> None:  # noqa: F811
    # Given a job every 60 s from +60 s
    job = api.create({"schedule": {"rate_seconds": 60, "start_at": at(60)}})
    # When it becomes every 120 s from +90 s, before its first occurrence
    reply = api.call(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"rate_seconds": 120, "start_at": at(90)}}
    )
    assert (reply.status, reply.json["next_run_at"], reply.json["version"]) == (200, at(90), 2)
    item = next(i for i in api.job_items() if i["id"]["S"] == job["id"])
    assert item["gen"]["N"] == "1"  # re-armed: the old chain is stale

    # Then only the new schedule's occurrences run
    api.engine.run_minutes(6)
    runs = api.engine.recorder.runs_of(job["id"])
    assert len(runs) >= 2
    assert runs == [to_ms_of(at(90)) + k * 120_000 for k in range(len(runs))]


def test_a_new_payload_applies_to_runs_not_claimed_yet(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"at": at(30)}, "payload": {"v": 1}})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"payload": {"v": 2}})
    assert reply.status == 200
    api.engine.advance(31)
    api.engine.drain()
    calls = [c for c in api.engine.recorder.calls if c.job_id == job["id"]]
    assert [c.payload for c in calls] == [{"v": 2}]


@pytest.mark.parametrize(
    ("before", "after"),
    [(1, True), (0, False), (1, 1.0), (2.0, 2), ({"on": 1}, {"on": True}), ([1, 0], [True, 0.0])],
)
def test_a_payload_python_calls_equal_is_a_change(api: Api, before: Any, after: Any) -> None:  # noqa: F811
    # JSON's `true` is not `1`, nor its `2.0` `2`: until 2026-12-01 such a PATCH answered 200
    # with the old payload and version (an outside contract audit).
    job = api.create({"schedule": {"at": at(30)}, "payload": before})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"payload": after})

    assert reply.status == 200
    assert reply.headers["ETag"] == '"2"'
    assert json.dumps(reply.json["payload"]) == json.dumps(after)
    assert json.dumps(api.call("GET", f"/jobs/{job['id']}").json["payload"]) == json.dumps(after)
    api.engine.advance(31)
    api.engine.drain()
    calls = [c for c in api.engine.recorder.calls if c.job_id == job["id"]]
    assert [json.dumps(c.payload) for c in calls] == [json.dumps(after)]


def test_rescheduling_a_paused_job_keeps_it_paused_and_resume_follows_the_new_schedule(
    api: Api,  # noqa: F811
) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})
    api.call("POST", f"/jobs/{job['id']}/pause")
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"cron": "*/5 * * * *"}})
    assert (reply.status, reply.json["status"], reply.json["next_run_at"]) == (200, "paused", None)
    api.engine.run_minutes(2)
    assert api.engine.recorder.runs_of(job["id"]) == []
    resumed = api.call("POST", f"/jobs/{job['id']}/resume").json
    assert resumed["status"] == "scheduled"
    assert to_ms_of(resumed["next_run_at"]) % 300_000 == 0  # on the cron's 5 minutes


def test_a_one_off_can_become_recurring_and_back(api: Api) -> None:  # noqa: F811
    job = api.create({"schedule": {"at": at(3600)}})
    recurring = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"rate_seconds": 60}})
    assert recurring.status == 200
    # A rate without start_at keeps the job's anchor: its creation, every 60 s.
    assert recurring.json["next_run_at"] == rfc3339_ms(to_ms_of(job["created_at"]) + 60_000)
    api.engine.run_minutes(2)
    assert len(api.engine.recorder.runs_of(job["id"])) >= 1
    once = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"delay_seconds": 30}})
    assert once.status == 200, once.json
    before = len(api.engine.recorder.runs_of(job["id"]))
    api.engine.run_minutes(3)
    assert len(api.engine.recorder.runs_of(job["id"])) == before + 1
    assert api.call("GET", f"/jobs/{job['id']}").json["status"] == "succeeded"


def test_a_paused_job_cannot_become_a_one_off(api: Api) -> None:  # noqa: F811
    # Only recurring jobs pause: a paused one-off would be a state no other route makes.
    job = api.create({"schedule": {"rate_seconds": 60}})
    api.call("POST", f"/jobs/{job['id']}/pause")
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"delay_seconds": 60}})
    assert (reply.status, reply.error["code"]) == (409, "conflict")
    fetched = api.call("GET", f"/jobs/{job['id']}").json
    assert (fetched["schedule"], fetched["version"]) == (job["schedule"], 2)


def test_a_recurring_job_with_an_overlap_policy_can_become_a_one_off(api: Api) -> None:  # noqa: F811
    # Found by review: the merged body kept `overlap: skip`, which a one-off refuses, so the
    # PATCH failed on a field the client had not sent.
    job = api.create({"schedule": {"rate_seconds": 60}, "overlap": "skip"})
    once = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": {"delay_seconds": 60}})
    assert once.status == 200, once.json
    assert (once.json["overlap"], once.json["schedule"]) == ("allow", {"delay_seconds": 60})
    # Sent with the schedule, a policy a one-off cannot have is still refused, naming it.
    again = api.create({"schedule": {"rate_seconds": 60}, "overlap": "skip"})
    both = {"schedule": {"delay_seconds": 60}, "overlap": "skip"}
    refused = api.call("PATCH", f"/jobs/{again['id']}", both)
    assert (refused.status, refused.error["field"]) == (400, "overlap")


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ('"1", "2"', 200),  # a list: any of its versions
        ('"5","1"', 200),
        ('W/"1"', 412),  # a weak tag never matches: If-Match compares strongly
        ('W/"1", "7"', 412),
        ('W/"1", "1"', 200),
        ('"1",,', 200),  # a list's empty elements are ignored (RFC 9110, section 5.6.1)
        ('"01"', 412),  # not the ETag "1": strong comparison is character by character
        ('"-1"', 412),  # entity tags, never a job's: they never match
        ('"abc"', 412),
        ('"1000000000000000000001"', 412),
        ('""', 412),
        ("1", 200),  # a bare version is taken as its ETag
        (', "7" , ,"1"', 200),
    ],
)
def test_if_match_takes_a_list_of_tags_and_never_matches_a_weak_one(
    api: Api,  # noqa: F811
    header: str,
    status: int,
) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers={"If-Match": header})
    assert reply.status == status
    name = api.call("GET", f"/jobs/{job['id']}").json["name"]
    assert name == ("x" if status == 200 else job["name"])
    if status == 412:
        assert reply.error["code"] == "precondition_failed"
