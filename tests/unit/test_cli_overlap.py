"""`duetime jobs create --overlap …` and the policy in `duetime jobs get`, against the fake API
of test_cli_jobs."""

from __future__ import annotations

import pytest

from tests.unit import test_cli_jobs
from tests.unit.test_cli_jobs import JOB, FakeApi, jobs

# The fake API's fixtures (a loopback server recording requests) and the clean environment.
server_url = test_cli_jobs.server_url
api = test_cli_jobs.api
clean_env = test_cli_jobs.clean_env


@pytest.mark.parametrize("policy", ["allow", "skip", "buffer_one"])
def test_create_sends_the_overlap_policy(api: FakeApi, policy: str) -> None:
    api.answer(201, {**JOB, "overlap": policy})

    code = jobs(api, "create", "--rate", "60", "--handler", "duetime.noop", "--overlap", policy)

    assert code == 0
    assert api.last.body == {
        "schedule": {"rate_seconds": 60},
        "target": {"type": "handler", "name": "duetime.noop"},
        "overlap": policy,
    }


def test_create_without_overlap_leaves_the_default_to_the_api(api: FakeApi) -> None:
    api.answer(201, JOB)
    assert jobs(api, "create", "--rate", "60", "--handler", "duetime.noop") == 0
    assert "overlap" not in api.last.body


def test_an_unknown_overlap_policy_is_refused_before_any_request(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        jobs(api, "create", "--rate", "60", "--handler", "duetime.noop", "--overlap", "never")
    assert exit_.value.code == 2
    assert "--overlap" in capsys.readouterr().err
    assert api.requests == []


def test_get_shows_the_overlap_policy_after_catchup(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(200, {**JOB, "overlap": "buffer_one"})
    assert jobs(api, "get", JOB["id"]) == 0
    out = capsys.readouterr().out
    assert "catchup:         latest (window 1h)\noverlap:         buffer_one\nnext_run_at:" in out
