"""`duetime jobs update`, `create --description --tag` and `list --tag --name-prefix` against
the fake API of tests/unit/test_cli_jobs.py."""

from __future__ import annotations

import pytest

from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    JOB,
    FakeApi,
    api,
    clean_env,
    jobs,
    server_url,
)


def test_create_sends_description_and_tags(api: FakeApi) -> None:  # noqa: F811
    api.answer(201, JOB)
    code = jobs(
        api,
        "create",
        "--rate",
        "60",
        "--handler",
        "test.record",
        "--description",
        "closes the day",
        "--tag",
        "team=payments",
        "--tag",
        "env=prod",
    )
    assert code == 0
    assert api.last.body["description"] == "closes the day"
    assert api.last.body["tags"] == {"team": "payments", "env": "prod"}


def test_list_sends_each_tag_as_key_colon_value_and_the_name_prefix(
    api: FakeApi,  # noqa: F811
) -> None:
    api.answer(200, {"items": [], "next_cursor": None})
    code = jobs(api, "list", "--tag", "team=payments", "--tag", "env=prod", "--name-prefix", "n-")
    assert code == 0
    assert api.last.query == {"tag": ["team:payments", "env:prod"], "name_prefix": ["n-"]}


def test_update_sends_only_the_flags_given_and_if_match_as_an_etag(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(200, {**JOB, "version": 4, "tags": {"team": "core"}})
    code = jobs(
        api,
        "update",
        "J1",
        "--cron",
        "0 9 * * *",
        "--timezone",
        "Europe/Berlin",
        "--name",
        "renamed",
        "--tag",
        "team=core",
        "--if-match",
        "3",
    )
    assert code == 0
    assert (api.last.method, api.last.path) == ("PATCH", "/jobs/J1")
    assert api.last.body == {
        "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"},
        "name": "renamed",
        "tags": {"team": "core"},
    }
    assert api.last.headers["if-match"] == '"3"'
    out = capsys.readouterr().out
    assert "version:" in out
    assert "tags:" in out
    assert "team=core" in out


@pytest.mark.parametrize(
    ("argv", "body"),
    [
        (["--rate", "120"], {"schedule": {"rate_seconds": 120}}),
        (["--at", "2026-12-01T00:00:00Z"], {"schedule": {"at": "2026-12-01T00:00:00Z"}}),
        (["--payload", '{"v": 2}'], {"payload": {"v": 2}}),
        (
            ["--url", "https://x.example.com"],
            {"target": {"type": "http", "url": "https://x.example.com"}},
        ),
        (["--body", '{"priority": "high"}'], {"priority": "high"}),
    ],
)
def test_update_bodies(api: FakeApi, argv: list[str], body: dict[str, object]) -> None:  # noqa: F811
    api.answer(200, JOB)
    assert jobs(api, "update", "J1", *argv) == 0
    assert api.last.body == body
    assert "if-match" not in api.last.headers


def test_update_without_flags_or_with_two_schedules_is_a_usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert jobs(api, "update", "J1") == 2
    assert "nothing to update" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        jobs(api, "update", "J1", "--rate", "60", "--cron", "* * * * *")
    with pytest.raises(SystemExit):
        jobs(api, "update", "J1", "--if-match", "0")
    assert jobs(api, "update", "J1", "--body", "{}", "--name", "x") == 2
    assert api.requests == []


def test_a_412_is_one_line_on_stderr(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    api.answer(
        412,
        {"error": {"code": "precondition_failed", "message": "job J1 is at version 5, not 3"}},
    )
    assert jobs(api, "update", "J1", "--name", "x", "--if-match", "3") == 1
    err = capsys.readouterr().err
    assert err.startswith("duetime: ")
    assert "version 5" in err


def test_payload_null_resets_the_payload_in_an_update(
    api: FakeApi,  # noqa: F811
) -> None:
    # `--payload null` read as "not given": "nothing to update", exit 2.
    api.answer(200, JOB)
    assert jobs(api, "update", JOB["id"], "--payload", "null") == 0
    assert api.last.body == {"payload": None}


def test_payload_null_counts_as_a_body_flag_next_to_body(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert jobs(api, "update", JOB["id"], "--body", "{}", "--payload", "null") == 2
    assert "--body cannot be combined with --payload" in capsys.readouterr().err
    assert api.requests == []


def test_update_sends_an_empty_object_payload_as_given(api: FakeApi) -> None:  # noqa: F811
    # Found by review: empty objects were dropped from the body, `--payload {}` with them.
    api.answer(200, JOB)
    assert jobs(api, "update", "J1", "--payload", "{}") == 0
    assert api.last.body == {"payload": {}}


def test_create_leaves_out_a_target_none_of_whose_flags_was_given(api: FakeApi) -> None:  # noqa: F811
    # Found by review: `{"target": {}}` was sent, and the API named target.type, not target.
    api.answer(201, JOB)
    assert jobs(api, "create", "--delay", "60") == 0
    assert api.last.body == {"schedule": {"delay_seconds": 60}}


@pytest.mark.parametrize("given", ["3", '"3"', ' "3" '])
def test_if_match_takes_the_version_or_the_etag_as_sent(
    api: FakeApi,  # noqa: F811
    given: str,
) -> None:
    # The ETag copied from an answer (`"3"`, quotes and all) was refused as no whole number
    # (found by an outside audit): cli.md says to pass the ETag.
    api.answer(200, {**JOB, "version": 4})
    assert jobs(api, "update", "J1", "--name", "x", "--if-match", given) == 0
    assert api.last.headers["if-match"] == '"3"'


@pytest.mark.parametrize("given", ['W/"3"', '"x"', "0", '""'])
def test_if_match_refuses_what_is_no_version(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        jobs(api, "update", "J1", "--name", "x", "--if-match", given)
    assert exited.value.code == 2
    assert "--if-match" in capsys.readouterr().err
    assert api.requests == []


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--method", "GET"], "--method goes with a target flag (--url)"),
        (["--header", "a=b"], "--header goes with a target flag (--url)"),
        (["--event-bus", "bus"], "--event-bus goes with a target flag (--eventbridge)"),
        (["--timezone", "UTC"], "--timezone goes with a schedule flag (--cron)"),
        (["--end-at", "2030-01-01T00:00:00Z"], "--end-at goes with a schedule flag (--rate or"),
    ],
)
@pytest.mark.parametrize("action", ["create", "update"])
def test_a_target_or_schedule_detail_alone_names_its_flag(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    action: str,
    flags: list[str],
    named: str,
) -> None:
    # A new user's walk: `update --timezone UTC` was answered about the schedule kinds, and
    # `--method GET` about target.type, fields the user had not touched.
    other_part = ["--handler", "x"] if "schedule" in named else ["--delay", "5"]
    args = ["J1", *flags] if action == "update" else [*other_part, *flags]
    assert jobs(api, action, *args) == 2
    err = capsys.readouterr().err
    assert named in err
    assert "replaced whole" in err
    assert api.requests == []


@pytest.mark.parametrize("action", ["create", "update"])
def test_on_without_after_names_after(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    action: str,
) -> None:
    # A new user's walk (round 30): `create --rate 60 --on failed` was answered "exactly one of
    # at, delay_seconds, …", and `update ID --on failed` "must be a job id".
    args = ["J1", "--on", "failed"] if action == "update" else ["--rate", "60", "--on", "failed"]
    assert jobs(api, action, *args, "--handler", "x") == 2
    assert "--on goes with --after" in capsys.readouterr().err
    assert api.requests == []


def test_a_detail_with_its_kind_is_sent(api: FakeApi) -> None:  # noqa: F811
    api.answer(200, JOB)
    assert jobs(api, "update", "J1", "--cron", "0 9 * * *", "--timezone", "Europe/Berlin") == 0
    assert api.last.body == {"schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"}}


@pytest.mark.parametrize(
    ("action", "method", "path"),
    [
        ("cancel", "DELETE", "/jobs/J1"),
        ("pause", "POST", "/jobs/J1/pause"),
        ("resume", "POST", "/jobs/J1/resume"),
        ("run", "POST", "/jobs/J1/run"),
    ],
)
def test_a_status_change_and_a_run_now_send_if_match_when_given(
    api: FakeApi,  # noqa: F811
    action: str,
    method: str,
    path: str,
) -> None:
    # Only `update` took --if-match, though the API honours it on each (a new user's walk).
    api.answer(200, JOB)
    assert jobs(api, action, "J1", "--if-match", '"3"') == 0
    assert (api.last.method, api.last.path) == (method, path)
    assert api.last.headers["if-match"] == '"3"'
    api.answer(200, JOB)
    assert jobs(api, action, "J1") == 0
    assert "if-match" not in api.last.headers


def test_a_run_now_sends_its_key_and_if_match_together(api: FakeApi) -> None:  # noqa: F811
    api.answer(202, JOB)
    assert jobs(api, "run", "J1", "--idempotency-key", "k-1", "--if-match", "4") == 0
    assert api.last.headers["if-match"] == '"4"'
    assert api.last.headers["idempotency-key"] == "k-1"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--max-attempts", "7"],
            "--max-attempts without --backoff-seconds and --max-backoff-seconds",
        ),
        (
            ["--backoff-seconds", "5"],
            "--backoff-seconds without --max-attempts and --max-backoff-seconds",
        ),
        (
            ["--max-attempts", "7", "--max-backoff-seconds", "60"],
            "--max-attempts and --max-backoff-seconds without --backoff-seconds",
        ),
        (["--catchup", "none"], "--catchup without --catchup-window"),
        (["--catchup-window", "600"], "--catchup-window without --catchup"),
    ],
)
def test_an_update_of_part_of_the_retry_or_the_catchup_is_a_usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    # The API replaces `retry` and `catchup` whole: `--max-attempts 7` alone reset a backoff of
    # 10 s to 2 s, `--catchup none` a window of 2 h to 1 h, without a word (an outside CLI
    # audit, round 29). Refused as a schedule's or a target's details alone are.
    assert jobs(api, "update", "J1", "--name", "n", *argv) == 2

    err = capsys.readouterr().err
    assert err.startswith(f"duetime: {message}: an update replaces the job's whole ")
    assert api.requests == []


@pytest.mark.parametrize(
    ("argv", "body"),
    [
        (
            ["--max-attempts", "7", "--backoff-seconds", "10", "--max-backoff-seconds", "100"],
            {"retry": {"max_attempts": 7, "backoff_seconds": 10, "max_backoff_seconds": 100}},
        ),
        (
            ["--catchup", "none", "--catchup-window", "7200"],
            {"catchup": {"mode": "none", "window_seconds": 7200}},
        ),
    ],
)
def test_an_update_of_the_whole_retry_or_catchup_sends_it(
    api: FakeApi,  # noqa: F811
    argv: list[str],
    body: dict[str, object],
) -> None:
    api.answer(200, JOB)
    assert jobs(api, "update", "J1", *argv) == 0
    assert api.last.body == body


def test_create_takes_part_of_the_retry_or_the_catchup(api: FakeApi) -> None:  # noqa: F811
    # (Nothing to reset in a new job: what is left out is the API's default.)
    api.answer(201, JOB)
    assert jobs(api, "create", "--delay", "1", "--handler", "h", "--max-attempts", "7",
                "--catchup", "none") == 0  # fmt: skip
    assert api.last.body["retry"] == {"max_attempts": 7}
    assert api.last.body["catchup"] == "none"
