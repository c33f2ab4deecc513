"""schemathesis stateful testing against the local stack, with a second tenant watching.

schemathesis 4 infers the links between operations from the OpenAPI document (a `Job` has an
`id`; `/jobs/{id}` routes take one), so its state machine chains real calls: create a job, then
read, update, pause, resume, run, cancel it, list its runs, with generated data at each step. Every
answer is checked against the document (no 5xx, documented status, content type, headers and
body; a created job can be read back). After each step that answers with a job, a second tenant
asks for that job by id and must get a 404, and must not find it in its list. Submitted jobs
run the built-in no-op handler (whatever target was generated): the local stack would
otherwise deliver to generated URLs.

The run must reach the routes of NEW_ROUTES on real jobs (an answer other than 404: a link to a
created job was followed) and see an update succeed; a round that misses one is followed by
another, at most ROUNDS, and a route still missed then gets generated requests of its own on a
job created for them. Bounded to about half a minute a round: few scenarios of few steps.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import time
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ensure_resource_availability,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from duetime.api.openapi import OPENAPI
from duetime.domain.errors import ValidationError
from duetime.domain.jobs import parse_job_spec, updated_spec
from duetime.local.keys import issue_token, load_or_create_key
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.slow

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    # Not `use_after_free`: DELETE cancels a job, which stays readable with status
    # `cancelled` (docs/api.md), so a 200 after a DELETE is the contract, not a bug.
    ensure_resource_availability,
]
NOOP_TARGET = {"type": "handler", "name": "duetime.noop"}
# Rounds at most (the loop stops once every route of NEW_ROUTES was reached): one round misses a
# route about a time in four, and a round cut short by FlakyStrategyDefinition reaches fewer.
# Eight rounds all missed PATCH once in CI (2026-11-29): a route the rounds miss then gets
# DIRECTED_EXAMPLES generated requests of its own, on a job created for them.
ROUNDS = 3
DIRECTED_EXAMPLES = 10
NEW_ROUTES = [("PATCH", "/jobs/{id}"), ("POST", "/jobs/batch"), ("POST", "/jobs/{id}/backfill")]
BASE_SPEC = parse_job_spec({"schedule": {"rate_seconds": 3600}, "target": NOOP_TARGET})
SCENARIOS = settings(
    max_examples=30,
    stateful_step_count=6,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def noop_job(item: object) -> object:
    """A generated job of a batch, made to run the built-in no-op handler as POST /jobs bodies
    are (one the API would refuse becomes a recurring job, keeping its idempotency key)."""
    if not isinstance(item, dict):
        return item
    item = {**item, "target": NOOP_TARGET}
    key = item.pop("idempotency_key", None)
    try:
        parse_job_spec(item)
    except ValidationError:
        item = {"schedule": {"rate_seconds": 3600}, "target": NOOP_TARGET}
    return item if key is None else {**item, "idempotency_key": key}


def patchable(case: Any) -> None:
    """A PATCH an owner would send: the no-op target kept, no generated If-Match (a random
    version is stale: 412 is tested in test_update_e2e), and a body the API would refuse, or
    one that makes the job depend on itself (the link fills schedule.after.job_id with the
    job's own id), becomes a change of description."""
    case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "if-match"}
    if not isinstance(case.body, dict):
        return
    if case.body.get("target") is not None:
        case.body["target"] = NOOP_TARGET
    schedule = case.body.get("schedule")
    after = schedule.get("after") if isinstance(schedule, dict) else None
    itself = isinstance(after, dict) and after.get("job_id") == case.path_parameters.get("id")
    try:
        updated_spec(BASE_SPEC, case.body)
    except ValidationError:
        itself = True
    if itself:
        case.body = {"description": "changed by the stateful test"}


def runnable(case: Any) -> None:
    """A generated request made one an owner would send to the local stack."""
    if case.method == "POST" and case.operation.path == "/jobs" and isinstance(case.body, dict):
        # Generated targets would be fetched for real by the local stack (any URL, on any
        # network): every job runs the built-in no-op handler instead. A body the API would
        # refuse (the stateless test's business) becomes a recurring job, so that sequences
        # have a job to act on.
        case.body["target"] = NOOP_TARGET
        try:
            parse_job_spec(case.body)
        except ValidationError:
            case.body = {"schedule": {"rate_seconds": 3600}, "target": NOOP_TARGET}
    if (
        case.method == "POST"
        and case.operation.path == "/jobs/batch"
        and isinstance(case.body, dict)
        and isinstance(case.body.get("jobs"), list)
    ):
        case.body["jobs"] = [noop_job(item) for item in case.body["jobs"]]
    if case.operation.path == "/jobs/{id}/backfill" and isinstance(case.body, dict):
        # A range in the recent past, as an owner would ask: generated instants are mostly
        # outside the hot window (400, the stateless test's business).
        now = time.time()
        case.body = {"from": rfc3339(now - 600), "to": rfc3339(now - 1)}
    if case.method == "PATCH":
        patchable(case)


def test_stateful_sequences_conform_and_never_cross_tenants(stack: Stack) -> None:
    schema = schemathesis.openapi.from_dict(OPENAPI)
    # Valid requests only, with our tokens: the stateless test covers invalid input, and
    # sequences need submissions that succeed to have something to act on.
    schema.config.generation.update(
        modes=[schemathesis.GenerationMode.POSITIVE], with_security_parameters=False
    )
    key, _ = load_or_create_key(stack.state_dir)  # the stack's signing key
    scenarios = itertools.count()
    other = {"authorization": f"Bearer {issue_token('stateful-other', 3600, key)}"}
    session = requests.Session()
    seen: dict[str, list[str]] = {"jobs": [], "by_id_2xx": []}
    answered: collections.Counter[tuple[str, str, int]] = collections.Counter()
    # Failures are collected, not raised inside the machine: Hypothesis would replay a failing
    # scenario, and a replay against a stack whose state has moved on draws differently
    # (FlakyStrategyDefinition), hiding the failure itself.
    failures: list[str] = []

    def other_tenant_cannot_see(job_id: str) -> None:
        reply = session.get(f"{stack.url}/jobs/{job_id}", headers=other, timeout=10)
        assert reply.status_code == 404, (job_id, reply.status_code, reply.text)
        listed = session.get(f"{stack.url}/jobs", headers=other, timeout=10).json()
        assert job_id not in {job["id"] for job in listed["items"]}

    def record(response: Any, case: Any) -> None:
        answered[(case.method, case.operation.path, response.status_code)] += 1
        if not 200 <= response.status_code < 300:
            return
        body = response.json()
        if case.operation.path == "/jobs/batch" and isinstance(body, dict):
            for item in body.get("items") or []:
                if item.get("status") == 201:
                    seen["jobs"].append(item["job"]["id"])
                    try:
                        other_tenant_cannot_see(item["job"]["id"])
                    except AssertionError as exc:
                        failures.append(f"tenant isolation after a batch: {exc}")
            return
        job_id = body.get("id") or body.get("job_id") if isinstance(body, dict) else None
        if isinstance(job_id, str):
            seen["jobs"].append(job_id)
            if "{id}" in case.operation.path:
                seen["by_id_2xx"].append(f"{case.method} {case.operation.path}")
            try:
                other_tenant_cannot_see(job_id)
            except AssertionError as exc:
                failures.append(f"tenant isolation after {case.method} {case.path}: {exc}")

    class Machine(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            # A tenant per scenario: each starts from an empty account, so what a step sees
            # depends on its scenario alone, not on the scenarios before it (Hypothesis
            # requires the same choices to lead to the same kind of draws).
            tenant = f"stateful-{next(scenarios)}"
            self.owner = {"authorization": f"Bearer {issue_token(tenant, 3600, key)}"}

        def before_call(self, case: Any) -> None:
            super().before_call(case)
            runnable(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": stack.url, "headers": self.owner, "session": session}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            try:
                case.validate_response(
                    response, checks=CHECKS, transport_kwargs=kwargs or None, recorder=self.recorder
                )
            except Exception as exc:  # a check failure or a group of them: reported at the end
                failures.append(f"{case.method} {case.operation.path}: {exc}")

        def after_call(self, response: Any, case: Any) -> None:
            super().after_call(response, case)
            record(response, case)

    def directed(method: str, path: str) -> None:
        """Generated requests of one route, on a job of the owner's: the rounds' random walk
        did not reach it (it can miss a route for several rounds in a row on a slow machine)."""
        owner = {"authorization": f"Bearer {issue_token('stateful-directed', 3600, key)}"}
        job: dict[str, Any] = {"schedule": {"rate_seconds": 3600}, "target": NOOP_TARGET}
        created = session.post(f"{stack.url}/jobs", json=job, headers=owner, timeout=10)
        assert created.status_code == 201, created.text
        ids = {"id": created.json()["id"]} if "{id}" in path else None

        @settings(SCENARIOS, max_examples=DIRECTED_EXAMPLES)
        @given(case=schema[path][method].as_strategy(path_parameters=ids))
        def call(case: Any) -> None:
            runnable(case)
            response = case.call(base_url=stack.url, headers=owner, session=session)
            try:
                case.validate_response(response, checks=CHECKS)
            except Exception as exc:  # reported at the end, as the machine's
                failures.append(f"{method} {path} (directed): {exc}")
            record(response, case)

        call()

    def reached() -> set[tuple[str, str]]:
        """The routes answered other than 404 (on a real job), PATCH only once one succeeded."""
        found = {(method, path) for method, path, status in answered if status != 404}
        if not any(m == "PATCH" and 200 <= s < 300 for m, _, s in answered):
            found.discard(("PATCH", "/jobs/{id}"))
        return found

    # Another round of scenarios while a route of NEW_ROUTES has not been reached on a real
    # job: Hypothesis picks the steps at random, and one round misses one about a time in four.
    for _ in range(ROUNDS):
        # FlakyStrategyDefinition: the same choices met different enabled steps, as the live
        # stack answered a step differently from before (a one-off job ran meanwhile, say).
        # That is the harness, not the API (a check failure is in `failures`): another round.
        with contextlib.suppress(FlakyStrategyDefinition):
            Machine.run(settings=SCENARIOS)
        if reached().issuperset(NEW_ROUTES):
            break
    # A route still missed gets generated requests of its own on a real job.
    for method, path in set(NEW_ROUTES) - reached():
        directed(method, path)

    assert failures == [], "\n".join(failures)

    # The machine did chain calls: jobs were created and then acted on by their id.
    assert seen["jobs"], "no job was ever created"
    assert seen["by_id_2xx"], "no call on /jobs/{id} succeeded: the links were not followed"
    # The routes of the features issue were reached on real jobs (an answer other than 404)
    # and checked; an update went through.
    for route in NEW_ROUTES:
        assert route in reached(), (route, sorted(answered.items()))
