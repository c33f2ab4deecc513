"""`duetime` under what an outside CLI audit tried (2026-11-30): its log lines kept off standard
output, AWS set-up mistakes, stdin or stdout closed, an API that trickles its answer, NaN in
an answer, control characters in keys, empty or ambiguous flags, repeated keys and queues.
Each is a one-line message with the documented exit status, never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duetime.cli.client import ApiClient
from duetime.cli.main import main
from duetime.observability import logger
from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    JOB,
    TOKEN,
    FakeApi,
    api,
    clean_env,
    server_url,
)

QUEUES = {
    f"{runtime}/{priority}": {"url": "http://h/1/q", "dlq_url": "http://h/1/d"}
    for runtime in ("lambda", "fargate")
    for priority in ("high", "normal", "low")
}


def get(api: FakeApi, *argv: str) -> int:  # noqa: F811
    return main(["jobs", "get", "J1", "--api-url", api.url, "--token", TOKEN, *argv])


def test_log_lines_go_to_stderr_and_stdout_holds_the_output_alone(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `timers stuck --json` printed a handover's warning, traceback and all, on stdout: not
    # one JSON document any more.
    call = ApiClient.call

    def logging_call(self: ApiClient, *args: Any, **kwargs: Any) -> Any:
        logger.warning("a warning on the way")
        return call(self, *args, **kwargs)

    monkeypatch.setattr(ApiClient, "call", logging_call)
    api.answer(200, JOB)
    stream = logger.registered_handler.stream

    assert get(api, "--json") == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == JOB
    assert '"a warning on the way"' in err
    assert logger.registered_handler.stream is stream  # as it was, for what runs next


def test_a_command_s_log_line_names_its_error_without_a_traceback(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `timers stuck --retry` printed a ~3 KB traceback per timer whose handover failed, beside
    # the reason its table already shows (a new user's walk, 2026-11-30).
    call = ApiClient.call

    def failing_call(self: ApiClient, *args: Any, **kwargs: Any) -> Any:
        try:
            json.loads("not json")
        except ValueError as exc:
            logger.warning("handing a timer over failed", exc_info=exc)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(ApiClient, "call", failing_call)
    api.answer(200, JOB)

    assert get(api, "--json") == 0
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["message"] == "handing a timer over failed"
    assert record["exception_name"] == "JSONDecodeError"
    assert "Traceback" not in line
    assert len(line) < 600
    assert logger.registered_handler.filters == []  # as it was, for what runs next


def test_no_aws_region_is_a_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("DUETIME_QUEUES", json.dumps(QUEUES))
    for name, value in (("JOBS", "j"), ("TIMERS", "t"), ("RUNS", "r")):
        monkeypatch.setenv(f"DUETIME_{name}_TABLE", value)

    for argv in (["dlq", "list"], ["timers", "stuck"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == "duetime: AWS: You must specify a region.\n", argv


def test_an_endpoint_that_is_no_url_is_a_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "nope")
    monkeypatch.setenv("DUETIME_QUEUES", json.dumps(QUEUES))
    for name, value in (("JOBS", "j"), ("TIMERS", "t"), ("RUNS", "r")):
        monkeypatch.setenv(f"DUETIME_{name}_TABLE", value)

    assert main(["dlq", "list"]) == 2
    assert capsys.readouterr().err == "duetime: cannot set up AWS: Invalid endpoint: nope\n"
    with pytest.raises(SystemExit) as exited:
        main(["history", "query", "--bucket", "b", "--endpoint-url", "nope", "SELECT 1"])
    assert exited.value.code == 2
    assert "--endpoint-url: 'nope' is not an http(s) URL" in capsys.readouterr().err


def test_a_closed_stdin_is_a_message_and_exit_2(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", None)
    with pytest.raises(SystemExit) as exited:
        main(["jobs", "create", "--delay", "1", "--handler", "x", "--payload", "@-"])
    assert exited.value.code == 2
    assert "standard input is closed" in capsys.readouterr().err
    assert api.requests == []


def test_ctrl_c_while_the_arguments_are_read_exits_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Interrupted:
        def read(self) -> str:
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", Interrupted())
    assert main(["jobs", "create", "--delay", "1", "--handler", "x", "--payload", "@-"]) == 130
    assert capsys.readouterr().err == ""


def test_a_closed_stdout_is_an_error_not_a_silent_success(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `duetime jobs create … >&-` created the job, printed nothing and exited 0: its id lost.
    api.answer(200, JOB)
    monkeypatch.setattr("sys.stdout", None)
    assert get(api) == 1
    assert capsys.readouterr().err == (
        "duetime: cannot write the output: standard output is closed\n"
    )


@pytest.fixture(params=[200, 500])
def trickling(request: pytest.FixtureRequest) -> Iterator[str]:
    """An HTTP server that answers a byte a tenth of a second: a 200 (or a 500: its body was
    read past the timeout, found by review) of about 10 s."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    status = {200: "200 OK", 500: "500 Internal Server Error"}[request.param]

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            body = json.dumps(JOB).encode()
            head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            connection.sendall(head)
            for byte in body[:100]:
                if stop.wait(0.1):
                    return
                connection.sendall(bytes([byte]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()


def test_the_timeout_bounds_the_whole_answer_not_each_read(
    trickling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--timeout 2` against an API answering a byte a second took 30 s.
    started = time.monotonic()
    argv = ["jobs", "get", "J1", "--api-url", trickling, "--token", TOKEN, "--timeout", "1"]
    assert main(argv) == 1
    assert time.monotonic() - started < 3
    assert capsys.readouterr().err == f"duetime: no answer from the API at {trickling} in 1 s\n"


def test_nan_in_an_answer_is_a_bad_response(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(200, b'{"id": NaN}')
    assert get(api, "--json") == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("duetime: 200 bad_response: the API answered with something not JSON")


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"[1, 2e308]"])
def test_a_number_beyond_a_double_in_an_answer_is_a_bad_response_never_infinity(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    number: bytes,
) -> None:
    # Read as inf, it passed the check meant for NaN and `--json` printed `Infinity`, which
    # is not JSON and which jq refuses, exit 0 (an outside CLI audit, round 29).
    api.answer(200, b'{"id": "J1", "version": ' + number + b"}")
    assert get(api, "--json") == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "duetime: 200 bad_response: the API answered a number beyond a double (such as 1e400)\n"
    )


def test_control_characters_in_keys_are_escaped_as_in_values(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(200, {**JOB, "\x1b[31mkey": "\x1b[1mvalue"})
    assert get(api) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\\x1b[31mkey:" in out or "\\u001b[31mkey:" in out


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "--api-url is empty"),
        ("http://a b", "without spaces"),
        ("http://127.0.0.1:8080/?x=1", "with no ? or #"),
        ("http://127.0.0.1:8080/#", "with no ? or #"),
    ],
)
def test_an_empty_or_ambiguous_api_url_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], url: str, problem: str
) -> None:
    assert main(["jobs", "list", "--api-url", url, "--token", TOKEN]) == 2
    err = capsys.readouterr().err
    assert problem in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("command", [["token", "--tenant", "a"], ["dlq", "list"]])
def test_an_empty_state_dir_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: list[str],
) -> None:
    # `duetime token --state-dir ''` wrote a signing key into the working directory.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main([*command, "--state-dir", ""])
    assert exited.value.code == 2
    assert "--state-dir: is empty" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--tag", "team=a", "--tag", "team=b"], "--tag team is given twice"),
        (["--url", "https://example.com", "--header", "X=1", "--header", "X=2"], "--header X"),
        (
            ["--url", "https://example.com", "--header", "X-A=1", "--header", "x-a=2"],
            "--header x-a",
        ),
    ],
)
def test_a_key_given_twice_in_flags_is_a_usage_error(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    problem: str,
) -> None:
    argv = ["jobs", "create", "--delay", "60", *flags, "--api-url", api.url, "--token", TOKEN]
    if "--url" not in flags:
        argv += ["--handler", "x"]
    assert main(argv) == 2
    assert problem in capsys.readouterr().err
    assert api.requests == []


def test_an_aws_timeout_is_an_aws_failure_not_a_set_up_problem(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore's timeouts are OSErrors too: it exited 2, without `AWS:` (found by review).
    from botocore.exceptions import ReadTimeoutError

    from duetime.cli import history

    def timing_out(args: Any) -> int:
        raise ReadTimeoutError(endpoint_url="https://athena.us-east-1.amazonaws.com")

    monkeypatch.setattr(history, "_run_history_compact", timing_out)
    assert main(["history", "compact", "--dt", "2026-11-30"]) == 1
    assert capsys.readouterr().err.startswith("duetime: AWS: Read timeout on endpoint URL")


def test_the_worker_refuses_a_visibility_sqs_would_refuse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--visibility-seconds", "99999999"])
    assert exited.value.code == 2
    assert "must be from 1 to 43200" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ("jobs", "list", "--lim", "5"),  # --limit
        ("jobs", "get", "J1", "--js"),  # --json
        ("schedule", "preview", "--rat", "60"),  # --rate
        ("jobs", "create", "--del", "60", "--handler", "x"),  # --delay
    ],
)
def test_a_flag_must_be_spelt_out(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
) -> None:
    # argparse took a prefix for the flag it starts (`--lim` for `--limit`): a script using one
    # breaks the day another flag shares it. Found by the CLI audit, round two.
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--api-url", api.url, "--token", TOKEN])
    assert exited.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert api.requests == []


@pytest.mark.parametrize(
    ("argv", "usage", "hint"),
    [
        (
            ("jobs", "create", "--cron", "0 9 * * *", "--tz", "UTC", "--handler", "x"),
            "usage: duetime jobs create",
            None,
        ),
        (("jobs", "list", "--jsn"), "usage: duetime jobs list", "did you mean --json?"),
        (
            ("jobs", "create", "--delay", "5", "--handler", "x", "--retries", "3"),
            "usage: duetime jobs create",
            None,
        ),
        (("jobs", "get", "J1", "--limit", "5"), "usage: duetime jobs get", None),
        (("schedule", "preview", "--rat", "60"), "usage: duetime schedule preview", "--rate?"),
        # An action's flag before the action: the top command's usage, and no word of where
        # it goes (a new user's walk, round two).
        (("jobs", "--json", "list"), "usage: duetime jobs", "after the action: duetime jobs list"),
    ],
)
def test_an_unknown_flag_is_named_with_its_action_s_usage(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    usage: str,
    hint: str | None,
) -> None:
    # A new user's walk: `jobs create … --tz UTC` showed the top command's usage
    # (`duetime [-h] COMMAND ...`), so the user never saw `--timezone` in it.
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--api-url", api.url, "--token", TOKEN])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage)
    assert "unrecognized arguments" in err
    if hint is not None:
        assert hint in err
    assert api.requests == []


@pytest.mark.parametrize("command", [["dlq", "list"], ["timers", "stuck"]])
def test_a_local_stack_that_stopped_answering_is_exit_1_not_a_set_up_problem(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: list[str],
) -> None:
    # Its local.json left behind (the stack killed): exit 2, where the table says 1 for an AWS
    # call that gets no answer (noticed by a CLI audit, round two).
    monkeypatch.delenv("DUETIME_QUEUES", raising=False)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    endpoint = {"endpoint_url": f"http://127.0.0.1:{port}", "region": "us-east-1"}
    (tmp_path / "local.json").write_text(json.dumps({**endpoint, "history_bucket": "b"}))

    assert main([*command, "--state-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(
        f"duetime: cannot reach the local stack at http://127.0.0.1:{port}:"
    )


@pytest.mark.parametrize(
    "setting",
    [
        {"AWS_PROFILE": "nope"},
        {"AWS_MAX_ATTEMPTS": "abc"},
        {"LOG_LEVEL": "trace"},
        {"POWERTOOLS_LOG_LEVEL": "loud"},
    ],
)
def test_a_bad_aws_or_logging_setting_does_not_stop_a_command_that_needs_none(
    setting: dict[str, str], tmp_path: Path
) -> None:
    # Every command, `--help` too, died importing the tracer (the X-Ray SDK makes a client
    # as it loads) or the logger, with a traceback (an outside CLI audit, round three).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DUETIME_"))}
    env |= setting | {"HOME": str(tmp_path)}
    for command in (["--help"], ["schedule", "preview", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "duetime.cli", *command],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, ""), (command, done.stderr[-300:])


def test_output_cut_short_by_a_file_size_limit_is_an_error(tmp_path: Path) -> None:
    # One write of a large output without a line end: Python's buffered writer took the
    # partial write and the error after it for a success: a history export was cut mid-row,
    # exit 0 (an outside CLI audit, round three).
    import resource

    script = "from duetime.cli.format import write_out\nwrite_out('x\\n' * 2_500_000, end='')"

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    with (tmp_path / "out.txt").open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-c", script],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limited,  # a limit of the child alone
            timeout=60,
            check=False,
        )

    assert done.returncode != 0
    assert "File too large" in done.stderr


def test_a_worker_without_a_run_signing_key_does_not_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # It took every message and failed it, a traceback each, until the DLQ had them all (an
    # outside CLI audit, round three); a missing table stopped it at once.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("DUETIME_QUEUES", json.dumps(QUEUES))
    for name, value in (("JOBS", "j"), ("TIMERS", "t"), ("RUNS", "r")):
        monkeypatch.setenv(f"DUETIME_{name}_TABLE", value)
    for name in ("DUETIME_RUN_SIGNING_KEY", "DUETIME_RUN_SIGNING_SECRET_ARN"):
        monkeypatch.delenv(name, raising=False)

    assert main(["worker", "--runtime", "fargate"]) == 2
    assert capsys.readouterr().err == (
        "duetime: no key for run messages: set DUETIME_RUN_SIGNING_SECRET_ARN or "
        "DUETIME_RUN_SIGNING_KEY\n"
    )


def test_a_reason_in_the_dlq_and_timers_tables_keeps_its_text_and_escapes_controls() -> None:
    # Escaped as Python literals, `é` read `\xe9` and an escape `\x1b`, where cli.md and every
    # other table say `\u001b` (an outside CLI audit, round three).
    from types import SimpleNamespace

    from duetime.cli import dlq, timers

    reason = "HTTP 500: défaillance \x1b[31m"
    dead = SimpleNamespace(message=object(), letter=SimpleNamespace(reason=reason))
    for shown in (dlq._reason(dead), timers._short(reason)):  # type: ignore[arg-type]
        assert shown == "HTTP 500: défaillance \\u001b[31m"


def test_a_priority_given_twice_is_served_by_one_poller(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--priority high --priority high` started two pollers on one queue (an outside CLI
    # audit, round three); `dlq --queue` already read a repeated queue once.
    from duetime.cli import worker
    from duetime.services import queue_worker

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("DUETIME_QUEUES", json.dumps(QUEUES))
    monkeypatch.setenv("DUETIME_RUN_SIGNING_KEY", "a key")
    for name, value in (("JOBS", "j"), ("TIMERS", "t"), ("RUNS", "r")):
        monkeypatch.setenv(f"DUETIME_{name}_TABLE", value)
    served: list[list[str]] = []

    class Worker:
        def __init__(self, *args: Any, priorities: list[Any], **kwargs: Any) -> None:
            served.append([p.value for p in priorities])

        def run(self) -> None:
            pass

    def exit_now(status: int) -> None:
        raise SystemExit(status)

    monkeypatch.setattr(queue_worker, "QueueWorker", Worker)
    monkeypatch.setattr(worker, "exit_now", exit_now)
    for argv in (["--priority", "high", "--priority", "high", "--priority", "low"], []):
        with pytest.raises(SystemExit):
            main(["worker", *argv])

    assert served == [["high", "low"], ["high", "normal", "low"]]


@pytest.mark.parametrize(
    ("setting", "endpoint"),
    [
        ({"AWS_MAX_ATTEMPTS": "abc"}, "http://127.0.0.1:1"),  # a ValueError: a traceback
        ({}, "nope"),  # a local.json whose endpoint is no URL: a traceback
        ({"AWS_RETRY_MODE": "bogus"}, "http://127.0.0.1:1"),  # exit 1, "AWS did not answer"
        ({"AWS_DEFAULTS_MODE": "x"}, "http://127.0.0.1:1"),  # the same
    ],
)
@pytest.mark.parametrize("command", [["dlq", "list"], ["timers", "stuck"]])
def test_a_bad_aws_setting_for_the_local_stack_is_a_set_up_message_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    setting: dict[str, str],
    endpoint: str,
    command: list[str],
) -> None:
    # The local stack's SQS client was made outside aws_setup(), and botocore's errors of a
    # setting it refuses were taken for AWS not answering (an outside CLI audit, round 29).
    monkeypatch.delenv("DUETIME_QUEUES", raising=False)
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    local = {"endpoint_url": endpoint, "region": "us-east-1", "history_bucket": "b"}
    (tmp_path / "local.json").write_text(json.dumps(local))

    assert main([*command, "--state-dir", str(tmp_path)]) == 2

    err = capsys.readouterr().err
    assert err.startswith(("duetime: cannot set up AWS: ", "duetime: AWS: ")), err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT to_timestamp(1795183512000) AS t",  # milliseconds taken for seconds
        "SELECT 'infinity'::TIMESTAMP AS t",
        "SELECT DATE '-5000-01-01' AS d",
        "SELECT '2020-01-01 00:00:00.123456789'::TIMESTAMP_NS AS t",
    ],
)
@pytest.mark.parametrize("output", [(), ("--json",), ("--csv",)])
def test_a_history_value_python_cannot_hold_is_a_message_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sql: str,
    output: tuple[str, ...],
) -> None:
    # DuckDB's instants range wider than Python's datetime: an OverflowError or ValueError
    # traceback, in every format, where history.md says a failure is a message, exit 2 (an
    # outside CLI audit, round 29).
    pytest.importorskip("duckdb")
    from duetime.cli import history
    from duetime.history import query

    monkeypatch.setattr(history, "_history_bucket", lambda args: None)
    monkeypatch.setattr(query, "load_archive", lambda bucket: query.archive_schema().empty_table())

    assert main(["history", "query", "--local", sql, *output]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("duetime: a value of the result cannot be shown (")
    assert err.endswith("can be cast to text, CAST(x AS VARCHAR)\n")
    assert "pandas" not in err

    # As the message says: the value as text
    cast = "SELECT CAST('infinity'::TIMESTAMP AS VARCHAR) AS t"
    assert main(["history", "query", "--local", cast, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"t": "infinity"}]
