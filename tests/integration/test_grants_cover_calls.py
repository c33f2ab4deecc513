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
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.overlap import Gate
from duetime.domain.timeutil import rfc3339_ms
from duetime.entrypoints import reconciler
from duetime.local.lambda_runtime import FakeContext
from duetime.services.reconcile import SETTLE_MS
from duetime.settings import Env
from infra.constructs import api as api_grants
from infra.constructs import engine as engine_grants
from infra.constructs import workers as worker_grants
from tests.infra.conftest import ESM_CONSUME
from tests.integration import test_api
from tests.integration.conftest import START, Engine
from tests.integration.test_api import Api

api = test_api.api  # the fixture: the API handler over the moto engine

TENANT = "tenant-a"


# The IAM action an SQS batch operation needs.
SQS_ACTION = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


TRANSACT_ACTION = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


class Calls:
    """DynamoDB operations by table ("jobs", "timers", "runs") and SQS operations by queue kind
    ("lambda queues", "fargate dlqs", ...), recorded while a role is on."""

    def __init__(self, engine: Engine) -> None:
        settings = engine.aws.settings
        self._resources = {
            settings.jobs_table: "jobs",
            settings.timers_table: "timers",
            settings.runs_table: "runs",
        }
        for runtime in Runtime:
            for priority in Priority:
                urls = settings.queue(runtime, priority)
                self._resources |= dict.fromkeys(urls.lanes, f"{runtime.value} queues")
                self._resources[urls.dlq_url] = f"{runtime.value} dlqs"
        self.made: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self._role: str | None = None
        for client in (engine.parts.timers._client, engine.parts.queue._client, engine.aws.sqs):
            client.meta.events.register("before-parameter-build", self._seen)

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
        service, operation = event_name.split(".")[-2:]
        if service == "sqs":
            action = f"sqs:{SQS_ACTION.get(operation, operation)}"
            self.made[self._role][self._resources[params["QueueUrl"]]].add(action)
            return
        names = [params.get("TableName"), *params.get("RequestItems", {})]
        for name in names:
            if name in self._resources:
                self.made[self._role][self._resources[name]].add(f"dynamodb:{operation}")
        # A transaction is authorized item by item, each by its own action.
        for entry in params.get("TransactItems", []):
            for kind, item in entry.items():
                action = f"dynamodb:{TRANSACT_ACTION[kind]}"
                self.made[self._role][self._resources[item["TableName"]]].add(action)


def granted() -> dict[str, dict[str, set[str]]]:
    """What infra grants each role on each table and kind of queue (none where not named): the
    DynamoDB actions are infra's own constants; the queue grants are restated here, and
    tests/infra/test_functions.py checks the synthesized policies say the same."""
    send, visibility = engine_grants.SEND, engine_grants.CHANGE_VISIBILITY
    every_queue = {"lambda queues": {send}, "fargate queues": {send}}
    stats = set(api_grants.API_STATS_QUEUE_ACTIONS)
    return {
        "worker": {
            "jobs": set(engine_grants.WORKER_JOBS_ACTIONS),
            "runs": set(engine_grants.WORKER_RUNS_ACTIONS),
            # its own runtime's queues: retries, visibility, the mapping's consume; its DLQs
            "lambda queues": {send, visibility} | ESM_CONSUME,
            "lambda dlqs": {send},
            "fargate queues": {send},  # a dependent's run
        },
        "fargate task": {
            "jobs": set(worker_grants.TASK_JOBS_ACTIONS),
            "runs": set(worker_grants.TASK_RUNS_ACTIONS),
            "fargate queues": set(worker_grants.TASK_QUEUE_ACTIONS),
            "fargate dlqs": {send},
            "lambda queues": {send},  # a dependent's run
        },
        "sweeper": {
            "jobs": set(engine_grants.SWEEPER_JOBS_ACTIONS),
            "timers": set(engine_grants.SWEEPER_TIMERS_ACTIONS),
        }
        | every_queue,
        "reconciler": {
            "jobs": set(engine_grants.RECONCILER_JOBS_ACTIONS),
            "timers": set(engine_grants.RECONCILER_TIMERS_ACTIONS),
            "runs": set(engine_grants.RECONCILER_RUNS_ACTIONS),
        }
        | every_queue,
        "api": {
            "jobs": set(api_grants.API_JOBS_ACTIONS),
            "timers": set(api_grants.API_TIMERS_ACTIONS),
            "runs": set(api_grants.API_RUNS_ACTIONS),
            "lambda queues": {send} | stats,
            "fargate queues": {send} | stats,
            "lambda dlqs": stats,
            "fargate dlqs": stats,
        },
    }


def assert_granted(calls: Calls) -> None:
    for role, grants in granted().items():
        for resource, made in calls.made[role].items():
            allowed = grants.get(resource, set())
            assert made <= allowed, f"{role} on {resource}: {sorted(made - allowed)}"


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
    # (a dependent may run on the other runtime: its upstream's worker sends its run)
    engine.submit({"schedule": {"after": {"job_id": upstream}}, "runtime": "fargate"})
    on_fargate = engine.submit({"schedule": {"delay_seconds": 0}, "runtime": "fargate"})
    engine.submit({"schedule": {"after": {"job_id": on_fargate}}})
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
        with calls.of("fargate task"):
            engine.drain(Runtime.FARGATE)

    # And the daily reconciler looks over the chains and the one-offs due a while ago
    engine.advance(SETTLE_MS // 1000)
    with calls.of("reconciler"):
        reconciler.make_handler(lambda: engine.parts)({}, FakeContext())

    # Then the paths were taken...
    assert engine.recorder.runs_of(upstream)
    assert engine.recorder.runs_of(on_fargate)
    assert "dynamodb:Scan" in calls.made["reconciler"]["jobs"]
    assert "dynamodb:BatchGetItem" in calls.made["reconciler"]["runs"]
    ended = engine.parts.jobs.get(TENANT, ends)
    assert ended is not None
    assert ended.status.value == "completed"  # by the sweep that handed its last run over
    worker = calls.made["worker"]
    assert {"dynamodb:BatchGetItem", "dynamodb:GetItem"} <= worker["jobs"]  # reads, gate
    assert "dynamodb:GetItem" in worker["runs"]  # the gate's holder
    assert "dynamodb:BatchGetItem" in calls.made["sweeper"]["jobs"]  # the chains' jobs
    # ...and every call was one the role may make (the Fargate task runs the same executor: the
    # worker's table calls are its too)
    for table in ("jobs", "timers", "runs"):
        calls.made["fargate task"][table] |= calls.made["worker"][table]
    # (the fargate queues were drained as a mapping would, which reads each queue's ARN; the
    # Fargate worker receives and deletes itself, without that read)
    calls.made["fargate task"]["fargate queues"].discard("sqs:GetQueueAttributes")
    assert_granted(calls)


def test_the_worker_roles_may_withdraw_a_claim(engine: Engine) -> None:
    # A late claim whose job was cancelled before it, and a retry claim a stopping worker
    # hands back, are withdrawn: a first attempt's record is deleted. Neither worker role was
    # granted DeleteItem, so both failed on AWS (an outside audit of the stack, round three).
    from tests.integration.test_acknowledged_before_claim import (
        CHANGES,
        ChangedBeforeClaim,
        received_half_a_second_early,
        worker,
    )

    calls = Calls(engine)
    job_id, scheduled_ms, delivery = received_half_a_second_early(engine, late_by_ms=300)

    def cancel() -> None:  # the owner's, through the API: not the worker's calls
        with calls.of("api"):
            CHANGES["cancel"](engine, job_id)
        calls._role = "worker"

    runs = ChangedBeforeClaim(engine.parts.runs, cancel)
    with calls.of("worker"):
        result = worker(engine, engine.advance, runs=runs).handle(delivery)
    assert result.detail.startswith("dropped after the claim"), result.detail
    assert engine.parts.runs.get(job_id, scheduled_ms) is None  # its record deleted
    assert "dynamodb:DeleteItem" in calls.made["worker"]["runs"]
    calls.made["fargate task"]["runs"] |= calls.made["worker"]["runs"]  # the same executor
    assert_granted(calls)


def test_the_api_is_granted_every_dynamodb_call_its_routes_make(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (The webhook-secret routes need the KMS key of a signing deployment: their calls, KMS's
    # included, are checked against the grants in test_webhook_secrets.py.)
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
        # (a keyed request refused after its key was recorded frees the key)
        ended = {"rate_seconds": 60, "end_at": rfc3339_ms(created - 60_000)}
        refused = {"schedule": ended, "target": test_api.HANDLER_TARGET}
        replies += [api.call("POST", "/jobs", refused, headers={"Idempotency-Key": "k-2"})]
        rate = api.create({"schedule": {"rate_seconds": 60}})
        dependent = api.create({"schedule": {"after": {"job_id": one_off["id"]}}})
        after = {"job_id": rate["id"], "on": "finished"}
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
            # (a new `after`: written on condition that the chain above is as checked)
            api.call("PATCH", f"/jobs/{dependent['id']}", {"schedule": {"after": after}}),
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
    assert [r.status for r in replies] == [
        201,
        400,
        200,
        200,
        200,
        200,
        200,
        200,
        200,
        202,
        202,
    ] + [200] * 5
    assert "dynamodb:DeleteItem" in calls.made["api"]["jobs"]
    assert "dynamodb:ConditionCheckItem" in calls.made["api"]["jobs"]
    assert "dynamodb:BatchGetItem" in calls.made["api"]["runs"]  # the backfill's look
    # ...and every call was one the API may make
    assert_granted(calls)
