"""The DynamoDB actions each engine role is granted (infra/constructs/engine.py, workers.py) cover
what its code calls. moto allows every call, so a call the role may not make passes every
other test here and fails in AWS: this records the calls the worker and the sweeper make on
moto, by table, through the paths that touch the most (a run, a retry, a dead letter, the
overlap gate with a holder, dependents, a chain planned ahead, a chain that ends, the
reconciler's look over the chains, every API route), and compares them with the grants.
tests/infra/test_deployed_offline.py checks every function's calls in one job's life against
the synthesized policies."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from duetime.clock import wall_ms
from duetime.domain.overlap import Gate
from duetime.domain.timeutil import rfc3339_ms
from duetime.entrypoints import reconciler
from duetime.local.lambda_runtime import FakeContext
from duetime.settings import Env
from infra.constructs import api as api_grants
from infra.constructs import engine as engine_grants
from infra.constructs import workers as worker_grants
from tests.integration import test_api
from tests.integration.conftest import START, Engine
from tests.integration.test_api import Api

api = test_api.api  # the fixture: the API handler over the moto engine

TENANT = "tenant-a"


class Calls:
    """DynamoDB operations by table ("jobs", "timers", "runs"), recorded while a role is on."""

    def __init__(self, engine: Engine) -> None:
        settings = engine.aws.settings
        self._tables = {
            settings.jobs_table: "jobs",
            settings.timers_table: "timers",
            settings.runs_table: "runs",
        }
        self.made: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self._role: str | None = None
        engine.parts.timers._client.meta.events.register("before-parameter-build", self._seen)

    @contextmanager
    def of(self, role: str) -> Iterator[None]:
        self._role = role
        try:
            yield
        finally:
            self._role = None

    def _seen(self, event_name: str, params: dict[str, Any], **_: Any) -> None:
        if self._role is None:
            return
        operation = event_name.rsplit(".", maxsplit=1)[-1]
        names = [params.get("TableName"), *params.get("RequestItems", {})]
        names += [item["TableName"] for t in params.get("TransactItems", []) for item in t.values()]
        for name in names:
            if name in self._tables:
                self.made[self._role][self._tables[name]].add(f"dynamodb:{operation}")


def granted() -> dict[str, dict[str, set[str]]]:
    """What infra grants each role on each table."""
    return {
        "worker": {
            "jobs": set(engine_grants.WORKER_JOBS_ACTIONS),
            "runs": set(engine_grants.WORKER_RUNS_ACTIONS),
            "timers": set(),
        },
        "fargate task": {
            "jobs": set(worker_grants.TASK_JOBS_ACTIONS),
            "runs": set(worker_grants.TASK_RUNS_ACTIONS),
            "timers": set(),
        },
        "sweeper": {
            "jobs": set(engine_grants.SWEEPER_JOBS_ACTIONS),
            "timers": set(engine_grants.SWEEPER_TIMERS_ACTIONS),
            "runs": set(),
        },
        "reconciler": {
            "jobs": set(engine_grants.RECONCILER_JOBS_ACTIONS),
            "timers": set(engine_grants.RECONCILER_TIMERS_ACTIONS),
            "runs": set(),
        },
        "api": {
            "jobs": set(api_grants.API_JOBS_ACTIONS),
            "timers": set(api_grants.API_TIMERS_ACTIONS),
            "runs": set(api_grants.API_RUNS_ACTIONS),
        },
    }


def assert_granted(calls: Calls) -> None:
    for role, grants in granted().items():
        for table, made in calls.made[role].items():
            assert made <= grants[table], f"{role} on {table}: {sorted(made - grants[table])}"


def test_the_engine_roles_are_granted_every_dynamodb_call_their_code_makes(
    engine: Engine,
) -> None:
    calls = Calls(engine)
    now = START.timestamp() * 1000
    # Given jobs that take the worker and the sweeper through their paths: a one-off, one that
    # fails for good (its retry, then the dead letter), an upstream with a dependent, a
    # per-minute chain planned ahead, a chain that ends after one occurrence, and a rate job
    # whose overlap gate another occurrence holds
    engine.submit({"schedule": {"delay_seconds": 0}})
    engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "handler", "name": "duetime.fail"},
            "retry": {"max_attempts": 2, "backoff_seconds": 0},
        }
    )
    upstream = engine.submit({"schedule": {"delay_seconds": 0}})
    engine.submit({"schedule": {"after": {"job_id": upstream}}})
    engine.submit({"schedule": {"cron": "* * * * *"}})
    ends = engine.submit(
        {"schedule": {"rate_seconds": 180, "end_at": rfc3339_ms(int(now) + 200_000)}},
    )
    gated = engine.submit({"schedule": {"rate_seconds": 60}, "overlap": "buffer_one"})
    engine.parts.jobs.put_gate(TENANT, gated, Gate(int(now) - 5_000, int(now)), 10**10)

    # When the sweeper and the workers run for a few minutes
    for _ in range(4):
        with calls.of("sweeper"):
            engine.tick()
        engine.advance(60)
        with calls.of("worker"):
            engine.drain()

    # And the daily reconciler looks over the chains
    with calls.of("reconciler"):
        reconciler.make_handler(lambda: engine.parts)({}, FakeContext())

    # Then the paths were taken...
    assert engine.recorder.runs_of(upstream)
    assert "dynamodb:Scan" in calls.made["reconciler"]["jobs"]
    ended = engine.parts.jobs.get(TENANT, ends)
    assert ended is not None
    assert ended.status.value == "completed"  # by the sweep that handed its last run over
    worker = calls.made["worker"]
    assert {"dynamodb:BatchGetItem", "dynamodb:GetItem"} <= worker["jobs"]  # reads, gate
    assert "dynamodb:GetItem" in worker["runs"]  # the gate's holder
    assert "dynamodb:BatchGetItem" in calls.made["sweeper"]["jobs"]  # the chains' jobs
    # ...and every call was one the role may make (the Fargate task runs the same executor)
    calls.made["fargate task"] = calls.made["worker"]
    assert_granted(calls)


def test_the_api_is_granted_every_dynamodb_call_its_routes_make(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (The webhook-secret routes need the KMS key of a signing deployment: their calls are
    # the worker's secret reads and writes, on the jobs table, GetItem and PutItem.)
    for name in (Env.OPERATOR_CLAIM, Env.OPERATOR_SCOPE):
        monkeypatch.delenv(name, raising=False)
    calls = Calls(api.engine)
    created = wall_ms()
    later = rfc3339_ms(created + 600_000)
    with calls.of("api"):
        # Given every route that writes or reads the tables, the quotas' counters included
        one_off = api.create({"schedule": {"delay_seconds": 0}})
        keyed = {"schedule": {"at": later}, "target": test_api.HANDLER_TARGET}
        replies = [api.call("POST", "/jobs", keyed, headers={"Idempotency-Key": "k-1"})]
        rate = api.create({"schedule": {"rate_seconds": 60}})
        dependent = api.create({"schedule": {"after": {"job_id": one_off["id"]}}})
        batch = [
            {"schedule": {"at": later}, "target": test_api.HANDLER_TARGET},
            {"schedule": {"delay_seconds": 0}, "target": test_api.HANDLER_TARGET},
            {"schedule": {"at": later}, "target": test_api.HANDLER_TARGET, "idempotency_key": "b"},
        ]
        replies += [api.call("POST", "/jobs/batch", {"jobs": batch})]
        replies += [
            api.call("GET", "/jobs"),
            api.call("GET", f"/jobs/{rate['id']}"),
            api.call("PATCH", f"/jobs/{rate['id']}", {"schedule": {"rate_seconds": 120}}),
            api.call("POST", f"/jobs/{rate['id']}/pause"),
            api.call("POST", f"/jobs/{rate['id']}/resume"),
            api.call("POST", f"/jobs/{rate['id']}/run"),
        ]
        api.engine.advance(300)  # occurrences in the past, for a backfill
        past = {"from": rfc3339_ms(created), "to": rfc3339_ms(wall_ms())}
        replies += [
            api.call("POST", f"/jobs/{rate['id']}/backfill", past),
            api.call("GET", f"/jobs/{rate['id']}/runs"),
            api.call("POST", "/schedules/preview", {"schedule": {"cron": "* * * * *"}}),
            api.call("DELETE", f"/jobs/{dependent['id']}"),
            api.call("DELETE", f"/jobs/{rate['id']}"),
            api.call("GET", "/admin/stats", claims={"sub": "ops", "scope": "duetime/operator"}),
        ]
    # Then each answered as it should...
    assert [r.status for r in replies] == [201, 200, 200, 200, 200, 200, 200, 202, 202] + [200] * 5
    assert "dynamodb:BatchGetItem" in calls.made["api"]["runs"]  # the backfill's look
    # ...and every call was one the API may make
    assert_granted(calls)
