"""`duetime` when the other side misbehaves: a 200 that is not in the API's shape (a server that
is not the API), JSON nested too deeply, a batch interrupted half-way, standard output closed or
full. A one-line error with the documented exit status, never a traceback, and no result lost."""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path
from typing import Any

import pytest

from duetime.cli import jobs_batch
from duetime.cli.client import ApiClient
from duetime.cli.main import main
from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    JOB,
    TOKEN,
    FakeApi,
    api,
    clean_env,
    jobs,
    server_url,
)

DEEP = b"[" * 100_000 + b"]" * 100_000

# --- 2: a 200 of the wrong shape ----------------------------------------------------------------


def interrupt_the_second_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the CLI makes its second request."""
    calls = []
    call = ApiClient.call

    def interrupted(self: ApiClient, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return call(self, *args, **kwargs)

    monkeypatch.setattr(ApiClient, "call", interrupted)


@pytest.mark.parametrize(
    "argv",
    [
        ("list",),
        ("list", "--all"),
        ("list", "--json"),
        ("runs", "J1"),
        ("backfill", "J1", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"),
    ],
)
@pytest.mark.parametrize(
    "answer", [[], "abc", b"", {"items": 5}, {"items": [], "next_cursor": 7}, b"9" * 5_000]
)
def test_a_200_that_is_not_a_page_is_a_bad_response(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    answer: Any,
) -> None:
    # AttributeError: 'list' object has no attribute 'get' (and the like): a traceback.
    if argv[0] == "backfill" and isinstance(answer, dict):
        answer = [answer]  # any object is a backfill's answer
    api.answer(200, answer)
    assert jobs(api, *argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("duetime: 200 bad_response: the API answered ")
    assert len(err.splitlines()) == 1


def test_a_cursor_that_is_not_a_string_is_a_bad_response(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    # TypeError: unhashable type: 'list' (the set of cursors seen).
    api.answer(200, {"items": [{"id": 1}], "next_cursor": [1]})
    assert jobs(api, "list", "--all") == 1
    assert capsys.readouterr().err.startswith("duetime: 200 bad_response: the API answered ")


@pytest.mark.parametrize("json_output", [(), ("--json",)])
def test_a_lone_surrogate_in_an_answer_is_a_bad_response_not_a_print_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    json_output: tuple[str, ...],
) -> None:
    # print() raised UnicodeEncodeError: a traceback.
    api.answer(200, b'{"id": "J1", "name": "\\ud800"}')
    assert jobs(api, "get", "J1", *json_output) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "duetime: 200 bad_response: the API answered text that is not Unicode (a lone surrogate)\n"
    )


# --- 3: JSON nested too deeply ------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_nested_too_deeply_is_an_api_error_exit_1(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    status: int,
) -> None:
    # RecursionError reached main: `maximum recursion depth exceeded …`, exit 2.
    api.answer(status, DEEP)
    assert jobs(api, "get", "J1") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"duetime: {status} ")
    assert len(err.splitlines()) == 1
    if status == 200:
        assert err == "duetime: 200 bad_response: the API answered JSON nested too deeply\n"


def test_a_line_nested_too_deeply_names_the_file_and_line(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b'{"a": 1}\n' + DEEP + b"\n")
    assert jobs(api, "create", "--from-file", str(path)) == 2
    assert capsys.readouterr().err == f"duetime: {path}:2: nested more than 64 levels\n"
    assert api.requests == []


# --- 8: a batch that stops half-way -------------------------------------------------------------


def _file(tmp_path: Path, count: int) -> str:
    body = {"schedule": {"delay_seconds": 60}, "target": {"type": "handler", "name": "x"}}
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps(body | {"payload": n}) + "\n" for n in range(count)))
    return str(path)


def _created(count: int) -> dict[str, Any]:
    return {"items": [{"status": 201, "job": {**JOB, "id": f"J{n}"}} for n in range(count)]}


def test_a_malformed_200_keeps_the_results_already_received(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # `200 bad_response: the API did not answer an item per job` alone: the 100 ids created
    # by the first request were dropped.
    api.answer(200, _created(100))
    api.answer(200, {"items": []})
    assert jobs(api, "create", "--from-file", _file(tmp_path, 150)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 150
    assert lines[99].startswith("line 100: 201 J99 ")
    assert lines[100] == (
        "line 101: 200 bad_response the request failed: the API answered something that is "
        "not an item per job; these jobs may or may not exist"
    )


@pytest.mark.parametrize("json_output", [(), ("--json",)])
def test_an_interruption_keeps_the_results_already_received_and_exits_130(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    json_output: tuple[str, ...],
) -> None:
    # Ctrl-C during the second request: exit 130 with nothing printed, the 100 ids lost.
    interrupt_the_second_request(monkeypatch)
    api.answer(200, _created(100))
    try:
        code = jobs(api, "create", "--from-file", _file(tmp_path, 250), *json_output)
    except KeyboardInterrupt:  # left to main, which exits 130 (pytest must not see it)
        code = None
    assert code == 130
    out = capsys.readouterr().out
    if json_output:
        items = json.loads(out)["items"]
        assert [item["status"] for item in items[:101]] == [201] * 100 + [None]
        assert items[100]["error"]["code"] == "interrupted"
        assert items[200]["error"]["code"] == "not_sent"
        return
    lines = out.splitlines()
    assert len(lines) == 250
    assert lines[99].startswith("line 100: 201 J99 ")
    assert lines[100] == (
        "line 101: - interrupted interrupted before the answer; these jobs may or may not exist"
    )
    assert lines[200] == "line 201: - not_sent not sent: an earlier request failed"


# --- 9: standard output closed or full ----------------------------------------------------------


class _Failing(io.StringIO):
    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error

    def flush(self) -> None:
        if self.error.errno == errno.ENOSPC:
            raise self.error


@pytest.mark.parametrize(
    "argv",
    [
        ["token", "--tenant", "t1"],
        ["schedule", "preview", "--rate", "60"],
        ["jobs", "list"],
    ],
)
@pytest.mark.parametrize("error", [errno.EPIPE, errno.ENOSPC])
def test_a_closed_or_full_standard_output_is_not_a_usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    error: int,
) -> None:
    # `duetime schedule preview … | true`: `duetime: [Errno 32] Broken pipe`, exit 2.
    if argv[0] == "token":
        argv = [*argv, "--state-dir", str(tmp_path)]
    else:
        argv = [*argv, "--api-url", api.url, "--token", TOKEN]
        api.answer(200, {"occurrences": ["2026-11-23T08:00:00.000Z"], "items": []})
    main(["token", "--tenant", "t1", "--state-dir", str(tmp_path)])  # the key, made beforehand
    capsys.readouterr()
    exc = BrokenPipeError(error, "Broken pipe") if error == errno.EPIPE else OSError(error, "full")
    monkeypatch.setattr("sys.stdout", _Failing(exc))
    assert main(argv) == 1
    err = capsys.readouterr().err
    if error == errno.EPIPE:
        assert err == ""  # `| head`: quiet
    else:
        assert err == "duetime: cannot write the output: [Errno 28] full\n"


@pytest.mark.parametrize("json_output", [(), ("--json",)])
@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
def test_text_standard_output_cannot_encode_is_escaped_not_a_traceback(
    api: FakeApi,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    encoding: str,
    json_output: tuple[str, ...],
) -> None:
    # PYTHONIOENCODING=ascii, a Latin-1 locale, Windows redirected (cp1252): a job named
    # `café 🎉` (which the API allows) died with a UnicodeEncodeError traceback, --json too (an
    # outside CLI audit, round 29). The characters it cannot hold are JSON escapes.
    name = "caf\u00e9 \U0001f389"
    api.answer(200, {"items": [{**JOB, "name": name}], "next_cursor": None})
    path = tmp_path / "out"
    with (
        path.open("wb") as raw,
        io.TextIOWrapper(raw, encoding=encoding) as narrow,
        monkeypatch.context() as patched,
    ):
        patched.setattr("sys.stdout", narrow)
        code = jobs(api, "list", *json_output)

    assert code == 0
    out = path.read_bytes().decode(encoding)
    if json_output:
        assert json.loads(out)["items"][0]["name"] == name  # JSON still, meaning the same
        assert "\\ud83c\\udf89" in out
    else:
        assert JOB["id"] in out
        assert "\\ud83c\\udf89" in out  # (the emoji, which none of them holds)


def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The CLI's waits, recorded rather than slept."""
    slept: list[float] = []
    monkeypatch.setattr(jobs_batch.time, "sleep", slept.append)
    return slept


def rate_refused(retry_after: Any) -> dict[str, Any]:
    """A batch item the tenant's submission rate refused (no field), asking to wait."""
    message = "more than 50 submissions a second"
    error = {"code": "quota_exceeded", "message": message}
    return {"status": 429, "error": error, "retry_after_seconds": retry_after}


def test_jobs_the_submission_rate_refused_are_sent_again_after_their_retry_after(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # They were refused, and the file sent again made a second copy of every line without an
    # idempotency_key (an outside CLI audit, round three). A count quota (a field) is final.
    slept = sleeps(monkeypatch)
    slowed = rate_refused(2)
    counted = {
        "status": 429,
        "error": {"code": "quota_exceeded", "message": "1000 jobs", "field": "schedule"},
        "retry_after_seconds": 60,
    }
    first = [*_created(3)["items"][:2], slowed, counted, slowed]
    api.answer(200, {"items": first})
    api.answer(200, {"items": [slowed, {"status": 201, "job": {**JOB, "id": "J5"}}]})
    api.answer(200, {"items": [{"status": 201, "job": {**JOB, "id": "J3"}}]})

    assert jobs(api, "create", "--from-file", _file(tmp_path, 5)) == 1  # line 4: refused

    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["201", "201", "201", "429", "201"]
    assert [len(r.body["jobs"]) for r in api.requests] == [5, 2, 1]
    assert [r.body["jobs"][0]["payload"] for r in api.requests[1:]] == [2, 2]
    assert [s for s in slept if s] == [2, 2]  # (the fake API's own sleeps are 0)


@pytest.mark.parametrize(
    ("asked", "waited"),
    [("soon", 1), (-1, 1), (True, 1), (2.5, 2.5), (300, 300)]
    + [(n, None) for n in (301, 20_000, 10**30, 10**400)],
)
def test_a_retry_after_is_waited_within_bounds_or_its_lines_reported_refused(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    asked: Any,
    waited: float | None,
) -> None:
    # A hostile or impersonated API: a value not a whole number, or negative, died with a
    # traceback (the report of the lines created lost); a huge one slept for years. A
    # tenant's debt (a large backfill) asks for hours: those lines are reported refused
    # (exit 1), for the file to be sent again later.
    slept = sleeps(monkeypatch)
    slowed = rate_refused(asked)
    api.answer(200, {"items": [*_created(1)["items"], slowed]})
    api.answer(200, {"items": [{"status": 201, "job": {**JOB, "id": "J2"}}]})

    exit_code = jobs(api, "create", "--from-file", _file(tmp_path, 2))

    assert exit_code == (0 if waited else 1)
    assert [s for s in slept if s] == ([waited] if waited else [])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["201", "201" if waited else "429"]


@pytest.mark.parametrize("json_output", [(), ("--json",)])
def test_ctrl_c_while_waiting_for_the_rate_keeps_the_jobs_created_and_exits_130(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    json_output: tuple[str, ...],
) -> None:
    # The lines of the request answered were reported "interrupted before the answer; these
    # jobs may or may not exist": the ids of lines 1 and 3, created, were lost, and sending
    # the file again made copies of them (an outside CLI audit, round 29). The wait is said.
    def interrupted(seconds: float) -> None:  # Ctrl-C during the wait (not the fake API's 0)
        if seconds:
            raise KeyboardInterrupt

    monkeypatch.setattr(jobs_batch.time, "sleep", interrupted)
    created = _created(3)["items"]
    api.answer(200, {"items": [created[0], rate_refused(30), created[2]]})

    assert jobs(api, "create", "--from-file", _file(tmp_path, 3), *json_output) == 130

    out, err = capsys.readouterr()
    assert len(api.requests) == 1
    assert err == "duetime: the submission rate refused 1 line(s): waiting 30 s to try again\n"
    not_created = "interrupted while waiting for the submission rate: not created (send it again)"
    if json_output:
        items = json.loads(out)["items"]
        assert [item.get("job", {}).get("id") for item in items] == ["J0", None, "J2"]
        assert items[1]["error"] == {"code": "interrupted", "message": not_created}
        return
    lines = out.splitlines()
    assert lines[0].startswith("line 1: 201 J0 ")
    assert lines[1] == f"line 2: 429 interrupted {not_created}"
    assert lines[2].startswith("line 3: 201 J2 ")


def test_ctrl_c_while_lines_are_sent_again_reports_them_as_maybe_created(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # (The request on its way is the one whose jobs may or may not exist; the first one's stay.)
    sleeps(monkeypatch)
    interrupt_the_second_request(monkeypatch)
    api.answer(200, {"items": [*_created(1)["items"], rate_refused(2)]})

    assert jobs(api, "create", "--from-file", _file(tmp_path, 2)) == 130

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("line 1: 201 J0 ")
    assert lines[1] == (
        "line 2: - interrupted interrupted before the answer; these jobs may or may not exist"
    )
