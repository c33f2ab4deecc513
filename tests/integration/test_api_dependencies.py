"""Issue 14, item 7 through the API handler on moto: `after` schedules (job dependencies), the
upstream's tenant (404), cycles through PATCH (400), the index item in the jobs table and the
run of the dependent with its upstream's run id.

Every reply is validated against the OpenAPI document (tests/integration/test_api.py)."""

from __future__ import annotations

from typing import Any

from duetime.domain.timeutil import rfc3339_ms
from tests.integration.conftest import Engine, engine  # noqa: F401 - fixture
from tests.integration.test_api import Api, api, at  # noqa: F401 - fixture


def after(job_id: str, on: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {"job_id": job_id}
    if on is not None:
        body["on"] = on
    return {"schedule": {"after": body}}


def test_an_after_job_is_created_and_shown_with_its_schedule(api: Api) -> None:  # noqa: F811
    upstream = api.create({"schedule": {"rate_seconds": 3600}})
    job = api.create(after(upstream["id"], "finished"))

    assert job["schedule"] == {"after": {"job_id": upstream["id"], "on": "finished"}}
    assert job["status"] == "scheduled"
    item = api.engine.aws.dynamodb.get_item(
        TableName=api.engine.aws.settings.jobs_table,
        Key={"tenant": {"S": "tenant-a"}, "id": {"S": f"!dependents#{upstream['id']}"}},
        ConsistentRead=True,
    )["Item"]
    assert item["ids"]["SS"] == [job["id"]]
    listed = {j["id"] for j in api.call("GET", "/jobs").json["items"]}
    assert listed == {upstream["id"], job["id"]}  # the index item is not a job
    # `on` defaults to succeeded
    assert api.create(after(upstream["id"]))["schedule"]["after"]["on"] == "succeeded"


def test_an_unknown_or_foreign_upstream_is_a_404(api: Api) -> None:  # noqa: F811
    foreign = api.create({"schedule": {"rate_seconds": 3600}}, tenant="tenant-b")

    for job_id in ("01NOSUCHJOB000000000000000", foreign["id"]):
        reply = api.call(
            "POST", "/jobs", {**after(job_id), "target": {"type": "handler", "name": "h"}}
        )
        assert reply.status == 404, reply.json
        assert reply.json["error"]["code"] == "not_found"
        assert reply.json["error"]["field"] == "schedule.after.job_id"


def test_bad_after_schedules_are_400_naming_the_field(api: Api) -> None:  # noqa: F811
    upstream = api.create({"schedule": {"rate_seconds": 3600}})
    target = {"type": "handler", "name": "h"}
    for schedule, field in [
        ({"after": {"job_id": upstream["id"], "on": "sometimes"}}, "schedule.after.on"),
        ({"after": {"on": "failed"}}, "schedule.after.job_id"),
        ({"after": {"job_id": upstream["id"], "when": "x"}}, "schedule.after.when"),
        ({"after": "x"}, "schedule.after"),
    ]:
        reply = api.call("POST", "/jobs", {"schedule": schedule, "target": target})
        assert reply.status == 400, reply.json
        assert reply.json["error"]["field"] == field


def test_a_cycle_through_patch_is_a_400(api: Api) -> None:  # noqa: F811
    a = api.create({"schedule": {"rate_seconds": 3600}})
    b = api.create(after(a["id"]))
    c = api.create(after(b["id"]))

    for upstream in (c["id"], a["id"]):
        reply = api.call("PATCH", f"/jobs/{a['id']}", after(upstream))
        assert reply.status == 400, reply.json
        assert reply.json["error"]["field"] == "schedule.after.job_id"
    reply = api.call("PATCH", f"/jobs/{b['id']}", after("01NOSUCHJOB000000000000000"))
    assert reply.status == 404, reply.json
    assert reply.json["error"]["field"] == "schedule.after.job_id"
    assert api.call("GET", f"/jobs/{a['id']}").json["schedule"] == {"rate_seconds": 3600}


def test_the_dependent_runs_after_its_upstream_with_the_upstream_run_id(
    api: Api,  # noqa: F811
) -> None:
    upstream = api.create({"schedule": {"at": at(0)}})
    dependent = api.create(after(upstream["id"]))

    api.engine.drain()  # the upstream's run; then its dependent's, sent as it finished

    runs = api.call("GET", f"/jobs/{dependent['id']}/runs").json["items"]
    up = api.call("GET", f"/jobs/{upstream['id']}/runs").json["items"]
    assert [r["status"] for r in runs] == ["succeeded"]
    assert runs[0]["scheduled_for"] == up[0]["scheduled_for"]
    assert runs[0]["run_id"].startswith(dependent["id"] + "-")
    assert rfc3339_ms(int(runs[0]["run_id"].rsplit("-", 1)[1])) == up[0]["scheduled_for"]
    assert api.call("GET", f"/jobs/{dependent['id']}").json["status"] == "scheduled"


def test_the_first_dependent_is_a_change_of_its_upstream_once(api: Api) -> None:  # noqa: F811
    upstream = api.create({"schedule": {"rate_seconds": 3600}})
    assert upstream["version"] == 1
    api.create(after(upstream["id"]))
    api.create(after(upstream["id"], "failed"))

    # The first dependent marked the upstream (its runs read their dependents from then on):
    # one new version, so an If-Match with the version before is refused and changes nothing.
    shown = api.call("GET", f"/jobs/{upstream['id']}")
    assert shown.json["version"] == 2
    assert shown.headers["ETag"] == '"2"'
    stale = api.call(
        "PATCH", f"/jobs/{upstream['id']}", {"name": "renamed"}, headers={"If-Match": '"1"'}
    )
    assert stale.status == 412, stale.json
    assert stale.json["error"]["code"] == "precondition_failed"
    fresh = api.call(
        "PATCH", f"/jobs/{upstream['id']}", {"name": "renamed"}, headers={"If-Match": '"2"'}
    )
    assert fresh.status == 200, fresh.json
    assert fresh.json["version"] == 3


def test_a_job_without_dependents_is_read_alone_and_a_marked_one_with_them(
    api: Api,  # noqa: F811
) -> None:
    lone = api.create({"schedule": {"at": at(0)}})
    upstream = api.create({"schedule": {"at": at(0)}})
    dependent = api.create(after(upstream["id"]))
    read: list[str] = []

    def count(params: dict[str, Any], **_: object) -> None:
        for request in params["RequestItems"].values():
            read.extend(key["id"]["S"] for key in request["Keys"])

    client = api.engine.parts.timers._client
    client.meta.events.register("before-parameter-build.dynamodb.BatchGetItem", count)
    api.engine.drain()

    assert f"!dependents#{upstream['id']}" in read
    assert f"!dependents#{lone['id']}" not in read
    assert {lone["id"], upstream["id"], dependent["id"]} <= set(read)
    runs = api.call("GET", f"/jobs/{dependent['id']}/runs").json["items"]
    assert [r["status"] for r in runs] == ["succeeded"]


def test_patching_a_dependent_marks_an_upstream_left_unmarked(api: Api) -> None:  # noqa: F811
    # deploy.md "Upgrading past the dependents mark": a dependent linked by the previous code
    # left its upstream unmarked; any change of the dependent marks it again.
    upstream = api.create({"schedule": {"rate_seconds": 3600}})
    dependent = api.create(after(upstream["id"]))
    key = {"tenant": {"S": "tenant-a"}, "id": {"S": upstream["id"]}}
    table = api.engine.aws.settings.jobs_table
    api.engine.aws.dynamodb.update_item(
        TableName=table, Key=key, UpdateExpression="SET deps = :f",
        ExpressionAttributeValues={":f": {"BOOL": False}},
    )  # fmt: skip

    reply = api.call("PATCH", f"/jobs/{dependent['id']}", {"name": "renamed"})

    assert reply.status == 200, reply.json
    item = api.engine.aws.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)
    assert item["Item"]["deps"] == {"BOOL": True}


def test_an_upstream_with_the_most_dependents_refuses_another_with_a_429(
    api: Api,  # noqa: F811
    monkeypatch: Any,
) -> None:
    """A job may have MAX_DEPENDENTS jobs after it (every run of it reads their ids and each
    of them): one more, created or PATCHed, is a 429 on the field, and nothing is written."""
    monkeypatch.setattr("duetime.services.dependencies.MAX_DEPENDENTS", 2)
    upstream = api.create({"schedule": {"rate_seconds": 3600}})
    first = api.create(after(upstream["id"]))
    api.create(after(upstream["id"]))
    other = api.create({"schedule": {"delay_seconds": 600}})
    before = {i["id"]["S"] for i in api.job_items()}

    created = api.call(
        "POST", "/jobs", {**after(upstream["id"]), "target": {"type": "handler", "name": "h"}}
    )
    patched = api.call("PATCH", f"/jobs/{other['id']}", after(upstream["id"]))

    for reply in (created, patched):
        assert reply.status == 429, reply.json
        assert reply.json["error"]["code"] == "quota_exceeded"
        assert reply.json["error"]["field"] == "schedule.after.job_id"
        assert int(reply.headers["Retry-After"]) >= 1
    assert {i["id"]["S"] for i in api.job_items()} == before
    assert api.call("GET", f"/jobs/{other['id']}").json["schedule"] == {"delay_seconds": 600}
    # Cancelling one of its dependents makes room.
    api.call("DELETE", f"/jobs/{first['id']}")
    assert api.create(after(upstream["id"]))["schedule"]["after"]["job_id"] == upstream["id"]


def test_two_concurrent_patches_cannot_close_a_loop(api: Api) -> None:  # noqa: F811
    # Found by review: each PATCH checked the chain above its new upstream, then wrote; A after
    # B and B after A at once both passed, and the loop triggered runs for as long as it ran.
    a = api.create({"schedule": {"rate_seconds": 3600}})
    b = api.create({"schedule": {"rate_seconds": 3600}})
    for upstream in (a, b):  # (already marked as having dependents: no write of A or B's item)
        api.create(after(upstream["id"]))
    armed = True

    def meanwhile(**_: Any) -> None:  # B's PATCH lands between A's check and A's writes
        nonlocal armed
        if armed:
            armed = False
            api.engine.parts.service.update("tenant-a", b["id"], after(a["id"]))

    events = api.engine.parts.timers._client.meta.events  # the API's DynamoDB client
    for operation in ("PutItem", "UpdateItem", "TransactWriteItems"):
        events.register(f"before-call.dynamodb.{operation}", meanwhile)

    crossing = api.call("PATCH", f"/jobs/{a['id']}", after(b["id"]))

    assert not armed
    assert crossing.status == 400, crossing.json
    assert crossing.json["error"]["field"] == "schedule.after.job_id"
    assert api.call("GET", f"/jobs/{a['id']}").json["schedule"] == {"rate_seconds": 3600}
    assert api.call("GET", f"/jobs/{b['id']}").json["schedule"] == {
        "after": {"job_id": a["id"], "on": "succeeded"}
    }


def test_a_cancelled_upstream_is_a_409_naming_the_field(api: Api) -> None:  # noqa: F811
    upstream = api.create({"schedule": {"rate_seconds": 3600}})
    kept = api.create(after(upstream["id"]))
    other = api.create(after(api.create({"schedule": {"rate_seconds": 3600}})["id"]))
    assert api.call("DELETE", f"/jobs/{upstream['id']}").status == 200

    target = {"type": "handler", "name": "h"}
    created = api.call("POST", "/jobs", {**after(upstream["id"]), "target": target})
    moved = api.call("PATCH", f"/jobs/{other['id']}", after(upstream["id"]))
    for reply in (created, moved):
        assert reply.status == 409, reply.json
        assert reply.json["error"]["code"] == "conflict"
        assert reply.json["error"]["field"] == "schedule.after.job_id"
        assert upstream["id"] in reply.json["error"]["message"]
    assert len(api.call("GET", "/jobs").json["items"]) == 4
    assert api.call("GET", f"/jobs/{other['id']}").json["schedule"] == other["schedule"]
    # the job that already follows it may still change
    assert api.call("PATCH", f"/jobs/{kept['id']}", {"priority": "high"}).status == 200
