"""`duetime jobs` and `schedule preview` given input they cannot send as is: arguments that are
not UTF-8 or not ASCII where a URL needs it, JSON the API would read otherwise (a repeated key,
NaN), numbers JSON cannot carry, `--body null`, and JSONL with Unicode line separators. Each is
a one-line usage error naming the flag or the file and line (exit 2) and nothing is sent, or is
sent correctly: never a traceback (docs/cli.md)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from duetime.cli import schedule
from duetime.cli.client import ApiClient, UsageError
from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    JOB,
    TOKEN,
    FakeApi,
    api,
    clean_env,
    jobs,
    run,
    server_url,
)

NOT_UTF8 = b"n\xff".decode("utf-8", "surrogateescape")  # how Python gets a byte that is not UTF-8
CREATE = ("--delay", "60", "--handler", "x")


def usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    *argv: str,
) -> str:
    """argparse's exit status 2 with nothing sent; returns stderr."""
    with pytest.raises(SystemExit) as exited:
        jobs(api, *argv)
    assert exited.value.code == 2
    assert api.requests == []
    return capsys.readouterr().err


# --- 1: URL parts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("get", NOT_UTF8), "ID"),
        (("cancel", NOT_UTF8), "ID"),
        (("runs", NOT_UTF8), "ID"),
        (("update", NOT_UTF8, "--name", "x"), "ID"),
        (("list", "--name-prefix", NOT_UTF8), "--name-prefix"),
        (("list", "--cursor", NOT_UTF8), "--cursor"),
        (("list", "--tag", f"a={NOT_UTF8}"), "--tag"),
    ],
)
def test_an_argument_that_is_not_utf8_in_the_url_is_a_usage_error_naming_it(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    flag: str,
) -> None:
    # UnicodeEncodeError in urllib.parse.quote/urlencode: a traceback.
    assert f"argument {flag}: " in usage_error(api, capsys, *argv)


def test_non_ascii_text_in_the_url_is_percent_encoded(api: FakeApi) -> None:  # noqa: F811
    assert jobs(api, "get", "j\u00e9") == 0
    assert jobs(api, "list", "--name-prefix", "caf\u00e9", "--tag", "k=\u00e9") == 0
    assert api.requests[0].path == "/jobs/j%C3%A9"
    assert api.last.query == {"name_prefix": ["caf\u00e9"], "tag": ["k:\u00e9"]}


@pytest.mark.parametrize("path", ["/\u00e9", "/" + NOT_UTF8])
def test_an_api_url_no_request_line_can_carry_is_a_usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    # http.client raised UnicodeEncodeError: a traceback.
    monkeypatch.setenv("DUETIME_API_URL", api.url + path)
    assert run("list", "--token", TOKEN) == 2
    assert "the API URL must be printable ASCII" in capsys.readouterr().err
    assert api.requests == []


@pytest.mark.parametrize(
    "host",
    [
        "abc123.execute-api.eu-west-1..amazonaws.com",  # a doubled dot, a typo
        "a" * 64 + ".example.com",  # a label over 63 characters
        ".",
    ],
)
def test_an_api_url_whose_host_has_an_empty_or_long_label_is_a_usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    host: str,
) -> None:
    # The resolver's UnicodeError ("label empty or too long") was a traceback, exit 1 (an
    # outside CLI audit, round 29).
    assert run("get", "J1", "--api-url", f"https://{host}", "--token", TOKEN) == 2
    assert capsys.readouterr().err.startswith(
        "duetime: the API URL's host has an empty or over-63-character label (a doubled dot?)"
    )


def test_a_proxy_whose_host_has_an_empty_label_is_a_message_not_a_traceback(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "http://proxy..example.com:3128")
    assert run("get", "J1", "--api-url", api.url, "--token", TOKEN) == 1
    assert capsys.readouterr().err == (
        f"duetime: cannot reach the API at {api.url}: a host name on the way (a proxy's: "
        "HTTPS_PROXY, HTTP_PROXY) has an empty or over-63-character label\n"
    )
    assert api.requests == []


# --- 4, 5, 6: JSON the API would read otherwise ------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--body", '{"schedule":{"delay_seconds":600},"schedule":{"delay_seconds":5}}'),
            "argument --body: schedule: appears twice in one object",
        ),
        (
            (*CREATE, "--payload", '{"a": 1, "a": 2}'),
            "argument --payload: a: appears twice in one object",
        ),
        ((*CREATE, "--payload", "NaN"), "argument --payload: not valid JSON (NaN is not JSON)"),
        ((*CREATE, "--payload", "[1, -Infinity]"), "-Infinity is not JSON"),
        ((*CREATE, "--payload", "[1, 1e999]"), "not valid JSON (number 1e999 is out of range)"),
        (("--body", '{"payload": NaN}'), "argument --body: not valid JSON (NaN is not JSON)"),
    ],
)
def test_json_the_api_would_read_otherwise_is_refused_naming_the_flag(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    message: str,
) -> None:
    # json.loads kept the last of two keys (a job from the value not meant) and took NaN, sent
    # as non-JSON that the API refused naming `body`.
    assert message in usage_error(api, capsys, "create", *argv)


def test_a_repeated_key_in_a_body_file_is_refused_naming_the_file(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    path = tmp_path / "job.json"
    path.write_text('{"target": {"type": "handler", "name": "x", "name": "y"}}')
    err = usage_error(api, capsys, "update", "J1", "--body", f"@{path}")
    assert f"argument --body: {path}: target.name: appears twice in one object" in err


@pytest.mark.parametrize("flag", ["--backoff-seconds", "--max-backoff-seconds"])
@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "9" * 5_000])
def test_a_number_flag_json_cannot_carry_is_refused_naming_the_flag(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
) -> None:
    # Sent as NaN/Infinity: the API answered `not valid JSON (field: body)`.
    err = usage_error(api, capsys, "create", *CREATE, flag, value)
    assert f"argument {flag}: must be a finite number" in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--delay", "٩٠٠"),  # Arabic-Indic digits: int() takes them, the API and console not
        ("--rate", "1_0_0"),
        ("--jitter", "\uff16"),
        ("--timeout-seconds", "\uff13\u0660"),
        ("--max-attempts", "²"),
        ("--backoff-seconds", "\uff11.\uff15"),
        ("--max-backoff-seconds", "1_0.5"),
        ("--delay", "9" * 5_000),
    ],
)
def test_a_number_flag_takes_ascii_digits_only(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
) -> None:
    args = (
        ("--handler", "x", flag, value) if flag in ("--delay", "--rate") else (*CREATE, flag, value)
    )
    err = usage_error(api, capsys, "create", *args)
    assert f"argument {flag}:" in err
    assert "Traceback" not in err


def test_number_flags_still_keep_what_the_user_wrote(api: FakeApi) -> None:  # noqa: F811
    argv = ("--backoff-seconds", "2", "--max-backoff-seconds", "2.5")
    assert jobs(api, "create", *CREATE, *argv) == 0
    assert api.last.body["retry"] == {"backoff_seconds": 2, "max_backoff_seconds": 2.5}


def test_the_client_never_sends_nan() -> None:
    client = ApiClient("http://127.0.0.1:9", TOKEN, 1.0)
    with pytest.raises(UsageError, match="cannot be sent as JSON"):
        client.call("POST", "/jobs", body={"payload": math.nan})


# --- 7: text flags that are not UTF-8 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("--delay", "60", "--handler", NOT_UTF8), "--handler"),
        (("--delay", "60", "--url", NOT_UTF8), "--url"),
        ((*CREATE, "--name", NOT_UTF8), "--name"),
        ((*CREATE, "--description", NOT_UTF8), "--description"),
        ((*CREATE, "--tag", f"{NOT_UTF8}=v"), "--tag"),
        (("--cron", NOT_UTF8, "--handler", "x"), "--cron"),
        (("--delay", "60", "--eventbridge", f"a:{NOT_UTF8}"), "--eventbridge"),
        ((*CREATE, "--payload", f'"{NOT_UTF8}"'), "--payload"),
        (("--body", f'{{"name": "{NOT_UTF8}"}}'), "--body"),
    ],
)
def test_a_text_flag_that_is_not_utf8_is_refused_naming_the_flag(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    flag: str,
) -> None:
    # Sent as a lone surrogate escape: the API answered `not valid JSON (field: body)`.
    err = usage_error(api, capsys, "create", *argv)
    assert f"argument {flag}: " in err
    assert "not UTF-8" in err


def test_a_schedule_preview_that_is_not_utf8_is_refused_naming_the_argument(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser(prog="duetime")
    schedule.register(parser.add_subparsers(dest="command", required=True))
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["schedule", "preview", f"{NOT_UTF8} * * * *", "--token", TOKEN])
    assert exited.value.code == 2
    assert "argument CRON: " in capsys.readouterr().err


# --- 10: --body null ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("create", "--body", "null", "--delay", "600", "--handler", "x"),
        ("create", "--body", "null"),
        ("update", "J1", "--body", "null"),
        ("create", "--body", "[1]"),
    ],
)
def test_a_body_that_is_not_an_object_is_refused(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
) -> None:
    # `--body null` was taken for no --body: the flags' body was sent, or "give at least one
    # flag".
    err = usage_error(api, capsys, *argv)
    assert "argument --body: JSON is not a JSON object (a job body)" in err


# --- 4, 5, 11: --from-file lines -----------------------------------------------------------------


def _file(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _body(**fields: object) -> str:
    body = {"schedule": {"delay_seconds": 60}, "target": {"type": "handler", "name": "x"}}
    return json.dumps(body | fields, ensure_ascii=False)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"payload": NaN}', "jobs.jsonl:3: not valid JSON (NaN is not JSON)"),
        ('{"payload": [Infinity]}', "jobs.jsonl:3: not valid JSON (Infinity is not JSON)"),
        ('{"payload": 1e400}', "jobs.jsonl:3: not valid JSON (number 1e400 is out of range)"),
        ('{"name": "a", "name": "b"}', "jobs.jsonl:3: name: appears twice in one object"),
    ],
)
def test_a_line_the_api_would_read_otherwise_stops_the_file_before_anything_is_sent(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    line: str,
    message: str,
) -> None:
    # NaN was sent: with 150 lines, 100 jobs created and 50 refused, none naming the line.
    path = _file(tmp_path, [_body(), _body(), line, _body()])
    assert jobs(api, "create", "--from-file", path) == 2
    assert capsys.readouterr().err == f"duetime: {path[: -len('jobs.jsonl')]}{message}\n"
    assert api.requests == []


def test_line_separators_inside_strings_are_json_and_do_not_end_a_line(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # str.splitlines() cut at U+2028, U+2029 and U+0085: a false "not valid JSON", and the
    # line numbers after them were wrong.
    texts = ["one\u2028two", "three\u2029four", "five\x85six"]
    path = _file(tmp_path, [_body(description=text) for text in texts] + ["[1]"])
    assert jobs(api, "create", "--from-file", path) == 2
    assert "jobs.jsonl:4: not a JSON object" in capsys.readouterr().err

    path = _file(tmp_path, [_body(description=text) for text in texts])
    api.answer(200, {"items": [{"status": 201, "job": JOB}] * 3})
    assert jobs(api, "create", "--from-file", path) == 0
    assert [job["description"] for job in api.last.body["jobs"]] == texts
