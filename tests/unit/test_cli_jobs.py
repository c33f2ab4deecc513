"""`duetime jobs …` against a fake API: a real HTTP server on loopback that records requests
and answers with canned responses."""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from duetime.cli.client import client_for
from duetime.cli.format import format_duration, format_job, schedule_summary
from duetime.cli.jobs import register
from duetime.cli.main import main

TOKEN = "t0ken"

JOB: dict[str, Any] = {
    "id": "01JD2YV3K8QF3P5W2M7N0C9XAB",
    "name": "close-day",
    "status": "scheduled",
    "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"},
    "target": {"type": "http", "url": "https://hooks.example.com/x", "method": "POST"},
    "payload": {"day": "2026-11-20"},
    "priority": "normal",
    "runtime": "lambda",
    "retry": {"max_attempts": 3, "backoff_seconds": 2.0, "max_backoff_seconds": 300.0},
    "timeout_seconds": 30,
    "catchup": {"mode": "latest", "window_seconds": 3600},
    "next_run_at": "2026-11-21T08:00:00.000Z",
    "created_at": "2026-11-20T10:00:00.000Z",
    "updated_at": "2026-11-20T10:00:00.000Z",
    "last_run": {"run_id": "r1", "status": "succeeded", "attempts": 1},
}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeApi:
    """Answers each request with the next canned (status, body); records what it got."""

    url: str
    requests: list[Recorded] = field(default_factory=list)
    answers: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)
    delay_seconds: float = 0.0

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.answers.append((status, body, headers or {}))

    @property
    def last(self) -> Recorded:
        return self.requests[-1]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeApi  # the current test's, set by the `api` fixture
    lock = threading.Lock()

    def _handle(self) -> None:
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        with self.lock:
            fake.requests.append(
                Recorded(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
            )
            status, body, headers = fake.answers.pop(0) if fake.answers else (200, {}, {})
        time.sleep(fake.delay_seconds)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (the timeout test)
            pass

    do_GET = do_POST = do_PATCH = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    # One server for the module: shutting one down takes half a second.
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def api(server_url: str) -> FakeApi:
    fake = FakeApi(url=server_url)
    _Handler.fake = fake
    return fake


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DUETIME_API_URL", "DUETIME_TOKEN", "http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duetime")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    return parser


def run(*argv: str) -> int:
    args = parser().parse_args(["jobs", *argv])
    code: int = args.run(args)
    return code


def jobs(api: FakeApi, action: str, *argv: str) -> int:
    return run(action, "--api-url", api.url, "--token", TOKEN, *argv)


# --- create -------------------------------------------------------------------------------------


def test_create_sends_every_flag_in_the_body_with_token_and_idempotency_key(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an API that creates the job
    api.answer(201, JOB)

    # When every create flag is used
    code = jobs(
        api,
        "create",
        "--cron",
        "0 9 * * *",
        "--timezone",
        "Europe/Berlin",
        "--start-at",
        "2026-12-01T00:00:00Z",
        "--end-at",
        "2027-01-01T00:00:00Z",
        "--url",
        "https://hooks.example.com/x",
        "--method",
        "PUT",
        "--header",
        "Authorization=Bearer abc",
        "--header",
        "X-Team=a=b",
        "--payload",
        '{"day": "2026-11-20"}',
        "--name",
        "close-day",
        "--priority",
        "high",
        "--runtime",
        "fargate",
        "--max-attempts",
        "5",
        "--backoff-seconds",
        "2",
        "--max-backoff-seconds",
        "60.5",
        "--timeout-seconds",
        "10",
        "--catchup",
        "all",
        "--idempotency-key",
        "key-1",
    )

    # Then one POST /jobs carries them all
    assert code == 0
    request = api.last
    assert (request.method, request.path, request.query) == ("POST", "/jobs", {})
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["idempotency-key"] == "key-1"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "schedule": {
            "cron": "0 9 * * *",
            "timezone": "Europe/Berlin",
            "start_at": "2026-12-01T00:00:00Z",
            "end_at": "2027-01-01T00:00:00Z",
        },
        "target": {
            "type": "http",
            "url": "https://hooks.example.com/x",
            "method": "PUT",
            "headers": {"Authorization": "Bearer abc", "X-Team": "a=b"},
        },
        "payload": {"day": "2026-11-20"},
        "name": "close-day",
        "priority": "high",
        "runtime": "fargate",
        "timeout_seconds": 10,
        "catchup": "all",
        "retry": {"max_attempts": 5, "backoff_seconds": 2, "max_backoff_seconds": 60.5},
    }
    # And the created job is shown as a key: value block
    out = capsys.readouterr().out
    assert "id:              01JD2YV3K8QF3P5W2M7N0C9XAB\n" in out
    assert "schedule:        cron 0 9 * * * Europe/Berlin\n" in out
    assert "target:          http POST https://hooks.example.com/x\n" in out
    assert "last_run:        succeeded, 1 attempt(s)\n" in out


@pytest.mark.parametrize(
    ("flags", "schedule"),
    [
        (["--at", "2026-11-21T09:30:00+01:00"], {"at": "2026-11-21T09:30:00+01:00"}),
        (["--delay", "900"], {"delay_seconds": 900}),
        (["--rate", "3600"], {"rate_seconds": 3600}),
        (
            ["--rate", "300", "--start-at", "2026-12-01T08:00:00Z"],
            {"rate_seconds": 300, "start_at": "2026-12-01T08:00:00Z"},
        ),
        (["--cron", "*/15 * * * *"], {"cron": "*/15 * * * *"}),
        # Not valid, but the API is the one to say so (and name the field).
        (["--rate", "60", "--timezone", "UTC"], {"rate_seconds": 60, "timezone": "UTC"}),
        ([], None),  # none: left out, and the API answers `schedule` is required
    ],
)
def test_each_schedule_flag_builds_its_schedule(
    api: FakeApi, flags: list[str], schedule: dict[str, Any] | None
) -> None:
    assert jobs(api, "create", *flags, "--handler", "duetime.noop") == 0
    assert api.last.body == {
        **({"schedule": schedule} if schedule is not None else {}),
        "target": {"type": "handler", "name": "duetime.noop"},
    }


@pytest.mark.parametrize(
    ("flags", "target"),
    [
        (["--url", "https://a.example/"], {"type": "http", "url": "https://a.example/"}),
        (
            ["--url", "https://a.example/", "--method", "GET"],
            {"type": "http", "url": "https://a.example/", "method": "GET"},
        ),
        (["--sqs", "https://sqs/q"], {"type": "sqs", "queue_url": "https://sqs/q"}),
        (["--sns", "arn:aws:sns:x:1:t"], {"type": "sns", "topic_arn": "arn:aws:sns:x:1:t"}),
        (
            ["--eventbridge", "acme.billing:CloseDay"],
            {"type": "eventbridge", "source": "acme.billing", "detail_type": "CloseDay"},
        ),
        (
            ["--eventbridge", "acme:Close: Day", "--event-bus", "ops"],
            {
                "type": "eventbridge",
                "source": "acme",
                "detail_type": "Close: Day",
                "event_bus": "ops",
            },
        ),
        (
            ["--lambda", "arn:aws:lambda:x:1:function:f"],
            {"type": "lambda", "function_arn": "arn:aws:lambda:x:1:function:f"},
        ),
        (["--handler", "billing.close_day"], {"type": "handler", "name": "billing.close_day"}),
    ],
)
def test_each_target_flag_builds_its_target(
    api: FakeApi, flags: list[str], target: dict[str, Any]
) -> None:
    assert jobs(api, "create", "--delay", "0", *flags) == 0
    assert api.last.body == {"schedule": {"delay_seconds": 0}, "target": target}
    assert "idempotency-key" not in api.last.headers


@pytest.mark.parametrize(
    ("text", "payload"),
    [("42", 42), ('"hello"', "hello"), ("null", None), ('[1, {"a": true}]', [1, {"a": True}])],
)
def test_payload_is_any_json(api: FakeApi, text: str, payload: Any) -> None:
    assert jobs(api, "create", "--delay", "1", "--handler", "h", "--payload", text) == 0
    # Sent as given: `null` is the API's default (and, in an update, resets the payload).
    assert api.last.body["payload"] == payload


def test_create_and_update_take_the_catchup_window(api: FakeApi) -> None:
    # The API's `catchup.window_seconds` had no flag (a new user's walk, round two).
    api.answer(201, JOB)
    assert jobs(api, "create", "--rate", "60", "--handler", "h", "--catchup", "all",
                "--catchup-window", "600") == 0  # fmt: skip
    assert api.last.body["catchup"] == {"mode": "all", "window_seconds": 600}
    api.answer(200, JOB)
    assert jobs(api, "update", JOB["id"], "--catchup", "latest", "--catchup-window", "0") == 0
    assert api.last.body == {"catchup": {"mode": "latest", "window_seconds": 0}}
    # (--catchup-window alone in an update reset the job's mode to latest: now a usage error,
    # tests/unit/test_cli_jobs_update.py)


def test_payload_and_body_can_come_from_a_file(api: FakeApi, tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"day": "2026-11-20"}', encoding="utf-8")
    assert jobs(api, "create", "--delay", "1", "--handler", "h", "--payload", f"@{payload}") == 0
    assert api.last.body["payload"] == {"day": "2026-11-20"}

    raw = {"schedule": {"at": "2026-11-21T09:30:00Z"}, "target": {"type": "sqs", "x": 1}}
    body = tmp_path / "job.json"
    body.write_text(json.dumps(raw), encoding="utf-8")
    assert jobs(api, "create", "--body", f"@{body}", "--idempotency-key", "k") == 0
    assert api.last.body == raw
    assert api.last.headers["idempotency-key"] == "k"


def test_body_can_come_from_standard_input(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = {"schedule": {"delay_seconds": 5}, "target": {"type": "handler", "name": "h"}}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(raw)))
    assert jobs(api, "create", "--body", "@-") == 0
    assert api.last.body == raw


def test_body_is_sent_exactly_as_given(api: FakeApi) -> None:
    raw = '{"schedule": {"delay_seconds": 5}, "target": {"type": "handler", "name": "h"}, "z": 1}'
    assert jobs(api, "create", "--body", raw) == 0
    assert api.last.body == json.loads(raw)


def test_body_with_body_flags_is_refused_before_sending(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    code = jobs(api, "create", "--body", "{}", "--cron", "@daily", "--name", "n")
    assert code == 2
    assert capsys.readouterr().err == "duetime: --body cannot be combined with --cron, --name\n"
    assert api.requests == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--at", "2026-01-01T00:00:00Z", "--cron", "@daily"], "not allowed with argument"),
        (["--url", "https://a/", "--sqs", "q"], "not allowed with argument"),
        (["--payload", "hello"], "not valid JSON (Expecting value"),
        (["--payload", "@/nonexistent/p.json"], "cannot read /nonexistent/p.json"),
        (["--header", "novalue"], "is not K=V"),
        (["--eventbridge", "no-detail-type"], "is not SOURCE:DETAIL_TYPE"),
        (["--delay", "10s"], "'10s' is not a whole number"),
        (["--priority", "urgent"], "invalid choice"),
        (["--idempotency-key", "a\nb"], "must be printable ASCII"),
    ],
)
def test_what_argparse_can_check_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run("create", "--token", TOKEN, *argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# --- get, cancel, pause, resume, run ------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "method", "path"),
    [
        ("get", "GET", "/jobs/J1"),
        ("cancel", "DELETE", "/jobs/J1"),
        ("pause", "POST", "/jobs/J1/pause"),
        ("resume", "POST", "/jobs/J1/resume"),
        ("run", "POST", "/jobs/J1/run"),
    ],
)
def test_job_actions_call_their_route(
    api: FakeApi, action: str, method: str, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(200, {**JOB, "id": "J1"})
    assert jobs(api, action, "J1") == 0
    assert (api.last.method, api.last.path) == (method, path)
    assert api.last.headers["authorization"] == f"Bearer {TOKEN}"
    assert api.last.body is None
    assert "id:              J1\n" in capsys.readouterr().out


def test_an_id_is_escaped_in_the_path(api: FakeApi) -> None:
    assert jobs(api, "get", "../health?x=1") == 0
    assert api.last.path == "/jobs/..%2Fhealth%3Fx%3D1"
    assert api.last.query == {}


def test_get_shows_a_key_value_block(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.answer(200, {**JOB, "extra": {"a": 1}, "name": None})
    assert jobs(api, "get", JOB["id"]) == 0
    assert capsys.readouterr().out == (
        "id:              01JD2YV3K8QF3P5W2M7N0C9XAB\n"
        "name:            -\n"
        "status:          scheduled\n"
        "schedule:        cron 0 9 * * * Europe/Berlin\n"
        "target:          http POST https://hooks.example.com/x\n"
        'payload:         {"day":"2026-11-20"}\n'
        "priority:        normal\n"
        "runtime:         lambda\n"
        "retry:           3 attempts, backoff 2.0s, at most 300.0s\n"
        "timeout_seconds: 30s\n"
        "catchup:         latest (window 1h)\n"
        "next_run_at:     2026-11-21T08:00:00.000Z\n"
        "last_run:        succeeded, 1 attempt(s)\n"
        "created_at:      2026-11-20T10:00:00.000Z\n"
        "updated_at:      2026-11-20T10:00:00.000Z\n"
        'extra:           {"a":1}\n'
    )


def test_json_prints_the_api_answer_as_is(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.answer(200, JOB)
    assert jobs(api, "get", JOB["id"], "--json") == 0
    out = capsys.readouterr().out
    assert json.loads(out) == JOB
    assert out.startswith('{\n  "id": ')


def test_run_shows_whatever_the_api_answers(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(202, {"job_id": "J1", "scheduled_for": "2026-11-20T10:00:00.000Z"})
    assert jobs(api, "run", "J1") == 0
    assert capsys.readouterr().out == (
        "job_id:        J1\nscheduled_for: 2026-11-20T10:00:00.000Z\n"
    )


def test_run_sends_its_idempotency_key(api: FakeApi) -> None:
    api.answer(202, {"job_id": "J1", "scheduled_for": "2026-11-20T10:00:00.000Z"})
    assert jobs(api, "run", "J1", "--idempotency-key", "rerun-7") == 0
    assert api.last.headers["idempotency-key"] == "rerun-7"
    assert jobs(api, "run", "J1") == 0
    assert "idempotency-key" not in api.last.headers


def test_run_refuses_a_key_no_header_can_carry(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        jobs(api, "run", "J1", "--idempotency-key", "k\u20ac")
    assert exit_info.value.code == 2
    assert "argument --idempotency-key: must be printable ASCII" in capsys.readouterr().err
    assert api.requests == []


# --- list and runs ------------------------------------------------------------------------------


def _job(job_id: str, schedule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": job_id,
        "name": f"n-{job_id}",
        "status": "scheduled",
        "schedule": schedule,
        **extra,
    }


def test_list_sends_its_filters_and_prints_an_aligned_table(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(
        200,
        {
            "items": [
                _job(
                    "A",
                    {"cron": "0 9 * * *", "timezone": "Europe/Berlin"},
                    next_run_at="2026-11-21T08:00:00.000Z",
                    last_run={"status": "failed"},
                ),
                _job("BB", {"rate_seconds": 30}, next_run_at="2026-11-20T10:00:30.000Z"),
                _job("C", {"at": "2026-11-21T09:30:00.000Z"}, status="succeeded"),
                _job("D", {"delay_seconds": 10}, name=None),
            ],
            "next_cursor": "c2",
        },
    )
    assert jobs(api, "list", "--status", "scheduled", "--limit", "4", "--cursor", "c1") == 0
    assert (api.last.method, api.last.path) == ("GET", "/jobs")
    assert api.last.query == {"status": ["scheduled"], "limit": ["4"], "cursor": ["c1"]}
    assert capsys.readouterr().out == (
        "ID  NAME  STATUS     SCHEDULE                      NEXT RUN                  LAST RUN\n"
        "A   n-A   scheduled  cron 0 9 * * * Europe/Berlin  2026-11-21T08:00:00.000Z  failed\n"
        "BB  n-BB  scheduled  every 30s                     2026-11-20T10:00:30.000Z  -\n"
        "C   n-C   succeeded  at 2026-11-21T09:30:00.000Z   -                         -\n"
        "D   -     scheduled  in 10s                        -                         -\n"
        "\n"
        "more: --cursor c2  (or --all for every page)\n"
    )


def test_list_without_filters_sends_no_query(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(200, {"items": [], "next_cursor": None})
    assert jobs(api, "list") == 0
    assert api.last.query == {}
    assert capsys.readouterr().out == "no jobs\n"


def test_list_all_follows_next_cursor_to_the_end(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(200, {"items": [_job("A", {"delay_seconds": 1})], "next_cursor": "c2"})
    api.answer(200, {"items": [_job("B", {"delay_seconds": 1})], "next_cursor": "c3"})
    api.answer(200, {"items": [_job("C", {"delay_seconds": 1})], "next_cursor": None})

    assert jobs(api, "list", "--all", "--limit", "1", "--json") == 0

    assert [r.query.get("cursor") for r in api.requests] == [None, ["c2"], ["c3"]]
    assert all(r.query["limit"] == ["1"] for r in api.requests)
    merged = json.loads(capsys.readouterr().out)
    assert [job["id"] for job in merged["items"]] == ["A", "B", "C"]
    assert merged["next_cursor"] is None


QUOTA = {"error": {"code": "quota_exceeded", "message": "more than 100 requests a second"}}


@pytest.mark.parametrize("action", [("list",), ("runs", "J1")])
def test_all_waits_out_a_429_and_keeps_every_page(
    api: FakeApi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    action: tuple[str, ...],
) -> None:
    # The first 429 (the request rate, which always says Retry-After) dropped every page read,
    # exit 1 (an outside CLI audit, round 29). --from-file already waited them out.
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    api.answer(200, {"items": [{"id": "A"}], "next_cursor": "c2"})
    api.answer(429, QUOTA, {"Retry-After": "3"})
    api.answer(429, QUOTA, {"Retry-After": "soon"})  # (not a number: 1 s, as --from-file)
    api.answer(200, {"items": [{"id": "B"}], "next_cursor": None})

    assert jobs(api, *action, "--all", "--json") == 0

    out, err = capsys.readouterr()
    assert [item["id"] for item in json.loads(out)["items"]] == ["A", "B"]
    assert [r.query.get("cursor") for r in api.requests] == [None, ["c2"], ["c2"], ["c2"]]
    assert [s for s in slept if s] == [3, 1]  # (the fake API's own sleeps are 0)
    said = "duetime: 429 quota_exceeded: more than 100 requests a second: waiting {} s to try again"
    assert err.splitlines() == [said.format(3), said.format(1)]


@pytest.mark.parametrize(
    ("answers", "waits"),
    [
        ([(429, QUOTA, {"Retry-After": "3600"})], []),  # (a longer wait is not waited: said)
        ([(429, QUOTA, {"Retry-After": "1"})] * 6, [1] * 5),  # (5 waits at most, as --from-file)
        ([(503, {"error": {"code": "unavailable", "message": "x"}}, {"Retry-After": "1"})], []),
    ],
)
def test_all_gives_up_on_a_429_it_cannot_wait_out_or_on_another_error(
    api: FakeApi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answers: list[tuple[int, Any, dict[str, str]]],
    waits: list[float],
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    api.answers += answers

    assert jobs(api, "list", "--all") == 1

    assert [s for s in slept if s] == waits
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"duetime: {answers[-1][0]} ")


def test_list_all_stops_on_a_repeated_cursor(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(200, {"items": [], "next_cursor": "c2"})
    api.answer(200, {"items": [], "next_cursor": "c2"})
    assert jobs(api, "list", "--all") == 1
    assert "repeated cursor 'c2'" in capsys.readouterr().err
    assert len(api.requests) == 2


def test_runs_prints_a_table_with_errors_cut_and_made_safe(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    long_error = "HTTP 500: \x1b[31m" + "x" * 100
    api.answer(
        200,
        {
            "items": [
                {
                    "run_id": "J1-2",
                    "scheduled_for": "2026-11-20T10:01:00.000Z",
                    "status": "failed",
                    "attempts": 3,
                    "started_at": "2026-11-20T10:01:00.120Z",
                    "finished_at": "2026-11-20T10:01:09.000Z",
                    "lateness_ms": 120,
                    "error": long_error,
                },
                {
                    "run_id": "J1-1",
                    "scheduled_for": "2026-11-20T10:00:00.000Z",
                    "status": "succeeded",
                    "attempts": 1,
                    "lateness_ms": 7,
                    "error": None,
                },
            ],
            "next_cursor": None,
        },
    )
    assert jobs(api, "runs", "J1", "--limit", "2") == 0
    assert (api.last.method, api.last.path, api.last.query) == (
        "GET",
        "/jobs/J1/runs",
        {"limit": ["2"]},
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "RUN ID  SCHEDULED FOR             STATUS     ATTEMPTS  LATENESS MS  ERROR"
    assert lines[1].startswith(
        "J1-2    2026-11-20T10:01:00.000Z  failed            3          120  HTTP 500: "
        "\\u001b[31mxx"
    )
    assert lines[1].endswith("x…")
    assert "\x1b" not in lines[1]
    assert len(lines[1].split("  ")[-1]) == 60
    assert lines[2] == ("J1-1    2026-11-20T10:00:00.000Z  succeeded         1            7  -")


# --- errors -------------------------------------------------------------------------------------


def test_an_api_error_is_one_line_on_stderr(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(
        400,
        {
            "error": {
                "code": "invalid_input",
                "message": "must be an IANA time zone name such as Europe/Berlin",
                "field": "schedule.timezone",
            }
        },
    )
    assert (
        jobs(api, "create", "--cron", "@daily", "--timezone", "Mars/Olympus", "--handler", "h") == 1
    )
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "duetime: 400 invalid_input: must be an IANA time zone name such as Europe/Berlin"
        " (field: schedule.timezone)\n"
    )


def test_an_api_error_without_a_field(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.answer(404, {"error": {"code": "not_found", "message": "job J9 not found", "field": None}})
    assert jobs(api, "get", "J9", "--json") == 1
    assert capsys.readouterr().err == "duetime: 404 not_found: job J9 not found\n"


def test_an_answer_that_is_not_the_api_s_error_shape(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(502, b"<html>\n<b>Bad Gateway</b>\n</html>")
    assert jobs(api, "get", "J1") == 1
    assert capsys.readouterr().err == "duetime: 502 http_error: <html> <b>Bad Gateway</b> </html>\n"


def test_a_success_that_is_not_json_is_an_error(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(200, b"<html>hello</html>")
    assert jobs(api, "get", "J1") == 1
    assert capsys.readouterr().err == (
        "duetime: 200 bad_response: the API answered with something not JSON\n"
    )


def test_a_redirect_is_not_followed_so_the_token_stays_put(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(307, b"", {"Location": "http://127.0.0.2:9/steal"})
    assert jobs(api, "get", "J1") == 1
    assert capsys.readouterr().err == "duetime: 307 http_error: Temporary Redirect\n"
    assert len(api.requests) == 1


def test_a_closed_port_says_the_api_is_not_running(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    assert run("list", "--api-url", url, "--token", TOKEN) == 1
    assert capsys.readouterr().err == (
        f'duetime: cannot reach the API at {url} — is "duetime local" running?\n'
    )


def test_a_slow_api_times_out(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.delay_seconds = 0.5
    assert jobs(api, "list", "--timeout", "0.1") == 1
    assert capsys.readouterr().err == f"duetime: no answer from the API at {api.url} in 0.1 s\n"


def test_a_missing_token_is_a_usage_error_and_nothing_is_sent(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("list", "--api-url", api.url) == 2
    err = capsys.readouterr().err
    assert err.startswith("duetime: no API token: pass --token or set DUETIME_TOKEN")
    assert api.requests == []


def test_url_and_token_come_from_the_environment(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUETIME_API_URL", api.url + "/")
    monkeypatch.setenv("DUETIME_TOKEN", "from-env\n")
    assert run("list") == 0
    assert api.last.path == "/jobs"
    assert api.last.headers["authorization"] == "Bearer from-env"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--token", "t\u00f6ken"], "argument --token: must be printable ASCII"),
        (["--token", TOKEN, "--timeout", "inf"], "argument --timeout: must be greater than 0"),
        (["--token", TOKEN, "--timeout", "1e300"], "and at most 86400"),
    ],
)
def test_a_value_no_request_can_carry_is_a_usage_error_not_a_traceback(
    api: FakeApi, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A pasted curly quote in a token raised UnicodeEncodeError; an infinite timeout,
    # OverflowError: both as tracebacks.
    with pytest.raises(SystemExit) as exited:
        run("list", "--api-url", api.url, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert api.requests == []


def test_a_token_from_the_environment_that_no_header_can_carry_is_a_usage_error(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DUETIME_TOKEN", "\u201ctoken\u201d")
    assert run("list", "--api-url", api.url) == 2
    assert "DUETIME_TOKEN must be printable ASCII" in capsys.readouterr().err
    assert api.requests == []


def test_an_idempotency_key_no_header_can_carry_is_a_usage_error(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        jobs(
            api,
            "create",
            "--delay",
            "60",
            "--url",
            "https://example.com",
            "--idempotency-key",
            "k\u20ac",
        )
    assert "argument --idempotency-key: must be printable ASCII" in capsys.readouterr().err
    assert api.requests == []


def test_a_json_file_nested_too_deeply_is_a_usage_error(
    api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(SystemExit):
        jobs(
            api, "create", "--delay", "60", "--url", "https://example.com", "--payload", f"@{deep}"
        )
    assert f"argument --payload: {deep}: nested more than 64 levels" in capsys.readouterr().err
    assert api.requests == []


def test_the_default_api_url_is_the_local_stack() -> None:
    args = parser().parse_args(["jobs", "list", "--token", TOKEN])
    assert client_for(args).base_url == "http://127.0.0.1:8080"


def test_an_api_url_that_is_not_http_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("list", "--api-url", "file:///etc/passwd", "--token", TOKEN) == 2
    assert "must be http:// or https://" in capsys.readouterr().err


# --- summaries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        ({"cron": "0 9 * * *", "timezone": "Europe/Berlin"}, "cron 0 9 * * * Europe/Berlin"),
        ({"cron": "@daily"}, "cron @daily"),
        ({"at": "2026-11-21T08:30:00.000Z"}, "at 2026-11-21T08:30:00.000Z"),
        ({"rate_seconds": 30}, "every 30s"),
        ({"rate_seconds": 300}, "every 5m"),
        (
            {"rate_seconds": 7200, "end_at": "2027-01-01T00:00:00.000Z"},
            "every 2h until 2027-01-01T00:00:00.000Z",
        ),
        (
            {"rate_seconds": 90, "start_at": "2026-12-01T00:00:00.000Z"},
            "every 90s from 2026-12-01T00:00:00.000Z",
        ),
        ({"delay_seconds": 10}, "in 10s"),
        ({"delay_seconds": 86_400}, "in 1d"),
        ({"delay_seconds": 0}, "in 0s"),
        ({"after": {"job_id": "01UP", "on": "failed"}}, "after 01UP failed"),
        ({"weird": 1}, '{"weird":1}'),
        (None, "-"),
    ],
)
def test_schedule_summary(schedule: Any, text: str) -> None:
    assert schedule_summary(schedule) == text


def test_format_duration_keeps_odd_values() -> None:
    assert format_duration(61) == "61s"
    assert format_duration(2.5) == "2.5s"


def test_the_job_block_in_cli_md_is_what_get_prints() -> None:
    # Found by review: the documented block had drifted from the output (fields added since).
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    block = docs.split("Output (the same block as `get`):\n\n```\n", 1)[1].split("\n```", 1)[0]
    job = {
        **JOB,
        "name": "standup",
        "description": None,
        "tags": {},
        "version": 1,
        "schedule": {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
        "target": {"type": "http", "url": "https://hooks.example.com/standup", "headers": {}},
        "payload": {"channel": "#team"},
        "overlap": "allow",
        "jitter_seconds": 0,
        "stage_seconds": 0,
        "next_run_at": "2026-11-23T08:00:00.000Z",
        "last_run": None,
    }
    assert format_job(job) == block


def test_the_synopsis_in_cli_md_names_each_flag_s_value_as_the_help_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--limit LIMIT` in the help, `--limit N` in cli.md (noticed by a CLI audit, round two).
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    synopsis = docs.split("```\n", 2)[1]
    checked = 0
    for line in synopsis.splitlines():
        found = re.match(r"duetime jobs (\w+)", line)
        if found is None:
            continue
        with pytest.raises(SystemExit):
            main(["jobs", found[1], "--help"])
        usage = " ".join(capsys.readouterr().out.split())
        for flag, value in re.findall(r"\[(--[\w-]+) ([A-Z=]+)\]", line):
            if flag != "--status":  # its help lists the statuses
                assert f"{flag} {value}" in usage, (found[1], flag)
                checked += 1
    assert checked >= 8


@pytest.mark.parametrize(
    "schedule",
    [
        {"cron": "* * * * *\x1b]52;c;ZXZpbA==\x07", "timezone": "UTC"},
        {"cron": "* * * * *", "timezone": "Europe/\x1b[2J"},
        {"at": "2026-12-01T00:00:00Z\x1b[2J"},
        {"after": {"job_id": "01J\x1b[2J", "on": "succeeded"}},
        {"rate_seconds": 60, "start_at": "\x1b[2J"},
    ],
)
def test_given_escapes_in_a_listed_job_s_schedule_then_jobs_list_writes_none(
    schedule: dict[str, Any],
) -> None:
    # A hostile or impersonated API (a wrong --api-url, plain http): the SCHEDULE column went
    # out as answered, an OSC 52 clipboard write or a screen clear included.
    from duetime.cli.format import format_jobs

    listed = format_jobs([{"id": "01J", "name": "n", "status": "scheduled", "schedule": schedule}])

    assert "\x1b" not in listed
    assert "\\u001b" in listed
