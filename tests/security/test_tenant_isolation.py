"""Tenant isolation: a two-tenant fuzz over every job route.

Tenant A owns jobs in every state, with runs, pagination cursors and an idempotency key.
Hypothesis then plays the other side: tenant B (and look-alike tenants such as `Tenant-A` or
`tenant-a `) calls every route with A's ids, A's cursors and tampered cursors. The properties:

- no read: every answer is a 400 or 404 (or, for a list, a page of the caller's own items),
  never one of A's ids in a successful answer, never A's secrets in any answer, never a 5xx;
- no write: A's items in the jobs and runs tables are exactly what they were.

Driven in-process through the real API Lambda handler on moto (see tests/integration/test_api.py),
every reply also validated against the OpenAPI document.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_api import Api, Reply

TENANT_A = "tenant-a"
SECRET = "a-secret-7f3c91"  # in A's payload, name, target URL and header: must never leak
A_TARGET = {
    "type": "http",
    "url": f"https://{SECRET}.example.com/hook",
    "headers": {"Authorization": f"Bearer {SECRET}"},
}
HANDLER_TARGET = {"type": "handler", "name": "test.record"}
IDEMPOTENCY_KEY = "order-42"
# Look-alikes of A that are other tenants (or no tenant at all: a 401).
OTHER_TENANTS = ["tenant-b", "Tenant-A", "TENANT-A", "tenant-a ", " tenant-a", "tenant-a\u200b"]


@dataclass
class World:
    api: Api
    a_ids: list[str] = field(default_factory=list)
    a_run_ids: list[str] = field(default_factory=list)
    a_job_cursors: list[str] = field(default_factory=list)
    a_run_cursors: list[str] = field(default_factory=list)
    a_body: dict[str, Any] = field(default_factory=dict)
    own: dict[str, list[str]] = field(default_factory=dict)  # other tenants' own job ids
    b_run_job: str = ""

    def a_tables(self) -> Any:
        """A's items, raw, in the jobs table (idempotency records included) and runs table."""
        aws = self.api.engine.aws
        jobs = aws.dynamodb.query(
            TableName=aws.settings.jobs_table,
            KeyConditionExpression="tenant = :t",
            ExpressionAttributeValues={":t": {"S": TENANT_A}},
            ConsistentRead=True,
        )["Items"]
        runs = [
            aws.dynamodb.query(
                TableName=aws.settings.runs_table,
                KeyConditionExpression="job_id = :j",
                ExpressionAttributeValues={":j": {"S": job_id}},
                ConsistentRead=True,
            )["Items"]
            for job_id in self.a_ids
        ]
        return jobs, runs


def seed(api: Api) -> World:
    """A with jobs in every state and runs; B with a job and runs of its own."""
    world = World(api)
    engine = api.engine
    world.a_body = {
        "name": f"job {SECRET}",
        "schedule": {"cron": "0 0 1 1 *"},  # never due during the test: nothing dials out
        "target": A_TARGET,
        "payload": {"secret": SECRET},
    }
    created = api.call(
        "POST", "/jobs", world.a_body, tenant=TENANT_A, headers={"Idempotency-Key": IDEMPOTENCY_KEY}
    )
    assert created.status == 201
    ran = created.json["id"]
    engine.advance(0.01)
    bodies: list[dict[str, Any]] = [
        {"schedule": {"rate_seconds": 60}},  # to pause
        {"schedule": {"delay_seconds": 3600}},  # to cancel
        {"schedule": {"delay_seconds": 0}},  # runs and succeeds
        {"schedule": {"cron": "0 9 * * *"}},
        {"schedule": {"delay_seconds": 7200}},
    ]
    ids = [ran]
    for body in bodies:
        body |= {"target": HANDLER_TARGET, "payload": {"secret": SECRET}, "name": SECRET}
        ids.append(api.create(body, tenant=TENANT_A)["id"])
        engine.advance(0.01)
    assert api.call("POST", f"/jobs/{ids[1]}/pause", tenant=TENANT_A).status == 200
    assert api.call("DELETE", f"/jobs/{ids[2]}", tenant=TENANT_A).status == 200
    # Runs of a job of A's that delivers to a handler, to have run ids and run cursors
    for _ in range(3):
        assert api.call("POST", f"/jobs/{ids[4]}/run", tenant=TENANT_A).status == 202
        engine.advance(0.01)
    engine.drain()
    world.a_ids = ids
    for limit in ("1", "2"):
        world.a_job_cursors += _cursors(api, "/jobs", limit, TENANT_A)
        world.a_run_cursors += _cursors(api, f"/jobs/{ids[4]}/runs", limit, TENANT_A)
    runs = api.call("GET", f"/jobs/{ids[4]}/runs", tenant=TENANT_A).json["items"]
    world.a_run_ids = [run["run_id"] for run in runs]
    assert world.a_job_cursors
    assert world.a_run_cursors
    assert len(world.a_run_ids) >= 3

    b_job = api.create({"schedule": {"rate_seconds": 60}}, tenant="tenant-b")["id"]
    engine.advance(0.01)
    b_other = api.create({"schedule": {"delay_seconds": 3600}}, tenant="tenant-b")["id"]
    for _ in range(2):
        assert api.call("POST", f"/jobs/{b_job}/run", tenant="tenant-b").status == 202
        engine.advance(0.01)
    engine.drain()
    world.own["tenant-b"] = [b_job, b_other]
    world.b_run_job = b_job
    return world


def _cursors(api: Api, path: str, limit: str, tenant: str) -> list[str]:
    found: list[str] = []
    cursor: str | None = None
    while True:
        query = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        reply = api.call("GET", path, tenant=tenant, query=query)
        assert reply.status == 200
        cursor = reply.json["next_cursor"]
        if cursor is None:
            return found
        found.append(cursor)


# --- what tenant B sends ---------------------------------------------------------------------


def _b64(value: bytes, urlsafe: bool = True) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(value).decode()


def _json_cursor(value: object) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


JSON_LEAF = st.none() | st.booleans() | st.integers() | st.text(max_size=30)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def tampered_cursors(world: World) -> st.SearchStrategy[str]:
    """Cursors that point at A's items, or are not cursors at all."""
    a_id = st.sampled_from(world.a_ids)
    a_cursor = st.sampled_from(world.a_job_cursors + world.a_run_cursors)
    return st.one_of(
        a_cursor,  # A's own cursors, as they are
        a_id.map(lambda i: _json_cursor({"id": i})),
        a_id.map(lambda i: _json_cursor({"id": i, "tenant": TENANT_A})),
        a_id.map(lambda i: _json_cursor({"tenant": TENANT_A, "id": i, "job_id": i})),
        st.just(_json_cursor({"tenant": TENANT_A})),
        st.sampled_from(["", "\u0000", "!", "!idem#", "!idem#" + IDEMPOTENCY_KEY, "0", "~"]).map(
            lambda i: _json_cursor({"id": i})
        ),
        st.integers(min_value=-(2**70), max_value=2**70).map(lambda s: _json_cursor({"s": s})),
        a_id.map(lambda i: _json_cursor({"s": 1_795_255_210_000, "job_id": i})),
        JSON_VALUE.map(_json_cursor),
        st.binary(max_size=60).map(_b64),
        a_cursor.map(lambda c: c.rstrip("=")),  # padding stripped
        a_cursor.map(lambda c: c[:-2] + "AA"),  # bytes flipped
        a_cursor.map(lambda c: _b64(base64.urlsafe_b64decode(c), urlsafe=False)),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=80),
    )


def id_variants(world: World) -> st.SearchStrategy[str]:
    """A's ids, and ids that look like them."""
    a_id = st.sampled_from(world.a_ids)
    return st.one_of(
        a_id,
        a_id,  # twice: the exact id matters most
        a_id.map(str.lower),
        a_id.map(lambda i: i + "0"),
        a_id.map(lambda i: i[:-1]),
        a_id.map(lambda i: f"{i}%2F..%2F{i}"),
        st.just("!idem#" + IDEMPOTENCY_KEY),
        st.sampled_from(world.a_run_ids),
    )


BY_ID = [
    ("GET", ""),
    ("DELETE", ""),
    ("POST", "/pause"),
    ("POST", "/resume"),
    ("POST", "/run"),
    ("GET", "/runs"),
]


def check_no_leak(world: World, reply: Reply, own: list[str] | None = None) -> None:
    """Nothing of A's in an answer to someone else: never a 5xx, never A's secret, and in a
    successful answer none of A's ids (an error may echo the id that was asked for). Items the
    caller owns are its own business: a replay of A's body made a job of B's that holds the
    same secret text."""
    assert reply.status < 500, reply.json
    shown = reply.json
    if isinstance(shown, dict) and isinstance(shown.get("items"), list):
        mine = set(own or [])
        shown = {**shown, "items": [i for i in shown["items"] if i.get("id") not in mine]}
    text = json.dumps(shown)
    assert SECRET not in text, reply.json
    if 200 <= reply.status < 300:
        assert not [i for i in world.a_ids + world.a_run_ids if i in text], reply.json


def test_given_two_tenants_when_b_uses_a_ids_and_cursors_then_it_never_reads_or_writes_a(
    api: Api,
) -> None:
    # Given: quotas out of the way (B submits and runs often), and A's and B's data
    api.configure(DUETIME_SUBMISSIONS_PER_SECOND="100000", DUETIME_SUBMISSION_BURST="1000000")
    world = seed(api)
    before = world.a_tables()
    a_view_before = [api.call("GET", f"/jobs/{i}", tenant=TENANT_A).json for i in world.a_ids]

    tenants = st.sampled_from(OTHER_TENANTS)
    cursors = tampered_cursors(world)
    limits = st.none() | st.sampled_from(["1", "2", "100"])
    calls: list[int] = []

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def b_calls(data: st.DataObject) -> None:
        calls.append(1)
        tenant = data.draw(tenants, "tenant")
        own = world.own.setdefault(tenant, [])
        kind = data.draw(st.sampled_from(["by_id", "list_jobs", "list_runs", "replay"]), "kind")

        if kind == "by_id":
            # When B acts on one of A's jobs (or something shaped like one)
            method, suffix = data.draw(st.sampled_from(BY_ID), "route")
            job_id = data.draw(id_variants(world), "id")
            query: dict[str, str] = {}
            if suffix == "/runs" and data.draw(st.booleans(), "with cursor"):
                query["cursor"] = data.draw(cursors, "cursor")
            reply = api.call(method, f"/jobs/{job_id}{suffix}", tenant=tenant, query=query)
            # Then it is not found (or a refused cursor), exactly as for a job that does not exist
            assert reply.status in (400, 401, 404), (method, suffix, reply.status, reply.json)
            if reply.status == 400:
                assert reply.error["field"] == "cursor"

        elif kind == "list_jobs":
            # When B lists with one of A's cursors, or a tampered one
            query = {"cursor": data.draw(cursors, "cursor")}
            limit = data.draw(limits, "limit")
            if limit is not None:
                query["limit"] = limit
            reply = api.call("GET", "/jobs", tenant=tenant, query=query)
            # Then B reads a page of its own jobs, or the cursor is refused
            assert reply.status in (200, 400, 401), reply.json
            if reply.status == 200:
                assert {job["id"] for job in reply.json["items"]} <= set(own)
            if reply.status == 400:
                assert reply.error["field"] == "cursor"

        elif kind == "list_runs":
            # When B pages through the runs of its own job with A's run cursors
            query = {"cursor": data.draw(cursors, "cursor")}
            reply = api.call("GET", f"/jobs/{world.b_run_job}/runs", tenant="tenant-b", query=query)
            assert reply.status in (200, 400), reply.json
            if reply.status == 200:
                assert all(
                    run["run_id"].startswith(world.b_run_job + "-") for run in reply.json["items"]
                )
            if reply.status == 400:
                assert reply.error["field"] == "cursor"

        else:
            # When B replays A's submission with A's Idempotency-Key
            reply = api.call(
                "POST",
                "/jobs",
                world.a_body,
                tenant=tenant,
                headers={"Idempotency-Key": IDEMPOTENCY_KEY},
            )
            # Then B gets a job of its own (keys are per tenant), never A's
            assert reply.status in (201, 401), reply.json
            if reply.status == 201:
                assert reply.json["id"] not in world.a_ids
                if reply.json["id"] not in own:
                    own.append(reply.json["id"])
                return  # B's own job holds B's own copy of the body: not a leak

        check_no_leak(world, reply, own)

    b_calls()
    assert len(calls) >= 100  # the fuzz did run

    # Then A's items are exactly as they were, and so is what A sees
    assert world.a_tables() == before
    after = [api.call("GET", f"/jobs/{i}", tenant=TENANT_A).json for i in world.a_ids]
    assert [_without_next_run(v) for v in after] == [_without_next_run(v) for v in a_view_before]


def _without_next_run(view: dict[str, Any]) -> dict[str, Any]:
    # `next_run_at` of a recurring job moves with the clock, which runs during the test.
    return {k: v for k, v in view.items() if k != "next_run_at"}


# The cursors the fuzz draws from rarely, every time: edited to name the partition, the
# idempotency records that share it, keys DynamoDB refuses, or numbers it cannot store.
EDITED_CURSORS = [
    {"id": ""},
    {"id": "!"},
    {"id": "!idem#" + IDEMPOTENCY_KEY},
    {"id": "\u0000"},
    {"id": "~"},
    {"id": "x" * 700},
    {"tenant": TENANT_A},
    {"s": 10**40},
    {"s": -1},
    {"s": 0},
]


def test_given_edited_cursors_then_each_reads_only_the_callers_items_or_is_a_400(
    api: Api,
) -> None:
    world = seed(api)
    before = world.a_tables()
    a_cursors = [_json_cursor({**c, "tenant": TENANT_A}) for c in EDITED_CURSORS] + [
        _json_cursor(c) for c in EDITED_CURSORS
    ]

    for cursor in a_cursors:
        jobs = api.call("GET", "/jobs", tenant="tenant-b", query={"cursor": cursor})
        runs = api.call(
            "GET", f"/jobs/{world.b_run_job}/runs", tenant="tenant-b", query={"cursor": cursor}
        )

        for reply in (jobs, runs):
            assert reply.status in (200, 400), (cursor, reply.status, reply.json)
            if reply.status == 400:
                assert reply.error["field"] == "cursor"
            check_no_leak(world, reply, world.own["tenant-b"])
        if jobs.status == 200:
            assert {job["id"] for job in jobs.json["items"]} <= set(world.own["tenant-b"])
    assert world.a_tables() == before
