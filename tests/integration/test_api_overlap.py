"""The overlap policy through the HTTP API on moto: the field on POST/GET /jobs, its 400s, and
`skipped`/`buffered` runs in GET /jobs/{id}/runs (validated against the OpenAPI document),
with the real worker handler on SQS and DynamoDB."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from duetime.targets import DEFAULT_HANDLERS, Invocation
from tests.integration import test_api
from tests.integration.conftest import Engine
from tests.integration.test_api import HANDLER_TARGET, Api, at

api = test_api.api  # the fixture: the API handler over the moto engine


class Meanwhile:
    """A handler target that, during its first execution, does something else (what other
    workers do meanwhile): the occurrences handled then meet a run that is still active."""

    def __init__(self) -> None:
        self.during: Callable[[], None] | None = None
        self.calls: list[int] = []

    def __call__(self, invocation: Invocation) -> None:
        self.calls.append(invocation.scheduled_ms)
        during, self.during = self.during, None
        if during is not None:
            during()


MEANWHILE = Meanwhile()
DEFAULT_HANDLERS.register("test.meanwhile", MEANWHILE)


@pytest.mark.parametrize("overlap", ["allow", "skip", "buffer_one"])
def test_the_overlap_policy_is_stored_and_shown(api: Api, overlap: str) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}, "overlap": overlap})

    assert job["overlap"] == overlap
    assert api.call("GET", f"/jobs/{job['id']}").json["overlap"] == overlap


def test_the_overlap_policy_defaults_to_allow(api: Api) -> None:
    assert api.create({"schedule": {"rate_seconds": 60}})["overlap"] == "allow"
    assert api.create({"schedule": {"at": at(60)}})["overlap"] == "allow"


@pytest.mark.parametrize(
    "body",
    [
        {"schedule": {"rate_seconds": 60}, "overlap": "never"},
        {"schedule": {"rate_seconds": 60}, "overlap": None},
        {"schedule": {"rate_seconds": 60}, "overlap": 1},
        {"schedule": {"at": at(60)}, "overlap": "skip"},
        {"schedule": {"delay_seconds": 5}, "overlap": "buffer_one"},
    ],
)
def test_a_bad_overlap_is_a_400_naming_it(api: Api, body: dict[str, Any]) -> None:
    reply = api.call("POST", "/jobs", {"target": HANDLER_TARGET, **body})

    assert reply.status == 400
    assert reply.error["code"] == "invalid"
    assert reply.error["field"] == "overlap"
    assert api.job_items() == []


def run_now_meanwhile(api: Api, job_id: str, times: int) -> Callable[[], None]:
    def during() -> None:
        for _ in range(times):
            api.engine.advance(1)
            assert api.call("POST", f"/jobs/{job_id}/run").status == 202
            api.engine.drain()

    return during


def statuses(api: Api, job_id: str) -> list[str]:
    reply = api.call("GET", f"/jobs/{job_id}/runs")  # validated against the document
    return [run["status"] for run in reversed(reply.json["items"])]


def test_given_skip_then_occurrences_during_a_run_are_listed_as_skipped(
    api: Api, engine: Engine
) -> None:
    job = api.create(
        {
            "schedule": {"rate_seconds": 3600},
            "target": {"type": "handler", "name": "test.meanwhile"},
            "overlap": "skip",
        }
    )
    MEANWHILE.calls.clear()
    MEANWHILE.during = run_now_meanwhile(api, job["id"], 2)

    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    engine.drain()

    assert statuses(api, job["id"]) == ["succeeded", "skipped", "skipped"]
    assert len(MEANWHILE.calls) == 1
    skipped = api.call("GET", f"/jobs/{job['id']}/runs").json["items"][0]
    assert (skipped["attempts"], skipped["started_at"], skipped["finished_at"]) == (0, None, None)


def test_given_buffer_one_then_one_waits_and_runs_after_the_active_one(
    api: Api, engine: Engine
) -> None:
    job = api.create(
        {
            "schedule": {"rate_seconds": 3600},
            "target": {"type": "handler", "name": "test.meanwhile"},
            "overlap": "buffer_one",
        }
    )
    MEANWHILE.calls.clear()

    def during() -> None:
        run_now_meanwhile(api, job["id"], 2)()
        assert statuses(api, job["id"]) == ["running", "buffered", "skipped"]

    MEANWHILE.during = during
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    engine.drain()

    assert statuses(api, job["id"]) == ["succeeded", "succeeded", "skipped"]
    first, buffered, _ = sorted(
        api.call("GET", f"/jobs/{job['id']}/runs").json["items"], key=lambda r: r["run_id"]
    )
    assert MEANWHILE.calls == sorted(MEANWHILE.calls)
    assert len(MEANWHILE.calls) == 2
    assert buffered["started_at"] >= first["finished_at"]
