"""`duetime jobs backfill ID --from TS --to TS` against the fake API of
tests/unit/test_cli_jobs.py."""

from __future__ import annotations

import pytest

from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    FakeApi,
    api,
    clean_env,
    jobs,
    run,
    server_url,
)

FROM = "2026-11-21T00:00:00Z"
TO = "2026-11-22T00:00:00Z"


def test_backfill_posts_the_range_and_prints_how_many_were_sent(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(202, {"occurrences": 24})

    code = jobs(api, "backfill", "J1", "--from", FROM, "--to", TO)

    assert code == 0
    assert (api.last.method, api.last.path) == ("POST", "/jobs/J1/backfill")
    assert api.last.body == {"from": FROM, "to": TO}
    assert capsys.readouterr().out == "24 occurrence(s) sent\n"


def test_backfill_json_prints_the_answer(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(202, {"occurrences": 0})

    assert jobs(api, "backfill", "J1", "--from", FROM, "--to", TO, "--json") == 0
    assert '"occurrences": 0' in capsys.readouterr().out


def test_backfill_shows_the_api_s_refusal(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = {"code": "invalid", "message": "must not be in the future", "field": "to"}
    api.answer(400, {"error": error})

    assert jobs(api, "backfill", "J1", "--from", FROM, "--to", TO) == 1
    assert "400 invalid: must not be in the future (field: to)" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [("J1", "--from", FROM), ("J1", "--to", TO), ("--from", FROM)])
def test_backfill_needs_an_id_and_both_instants(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as raised:
        run("backfill", *argv)

    assert raised.value.code == 2


@pytest.mark.parametrize("answer", [{}, {"occurrences": "many"}, {"occurrences": True}])
def test_an_answer_without_a_count_is_a_bad_response(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    answer: dict[str, object],
) -> None:
    # It printed "None occurrence(s) sent" and exited 0 (an outside CLI audit, round three).
    api.answer(202, answer)

    assert jobs(api, "backfill", "J1", "--from", FROM, "--to", TO) == 1
    assert "bad_response" in capsys.readouterr().err


@pytest.mark.parametrize("version", ["3", '"3"'])
def test_backfill_takes_if_match_as_run_does(api: FakeApi, version: str) -> None:  # noqa: F811
    # The API evaluates If-Match on a backfill (a stale version started runs) and `run` had the
    # flag; `backfill` refused it as an unrecognized argument (an outside CLI audit, round 29).
    api.answer(202, {"occurrences": 2})

    assert jobs(api, "backfill", "J1", "--from", FROM, "--to", TO, "--if-match", version) == 0

    assert api.last.headers["if-match"] == '"3"'


def test_backfill_without_if_match_sends_none(api: FakeApi) -> None:  # noqa: F811
    api.answer(202, {"occurrences": 2})
    assert jobs(api, "backfill", "J1", "--from", FROM, "--to", TO) == 0
    assert "if-match" not in api.last.headers
