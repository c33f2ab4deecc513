"""`duetime jobs create --from-file` against the fake API of tests/unit/test_cli_jobs.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duetime.api.body import MAX_BODY_BYTES
from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    JOB,
    FakeApi,
    api,
    clean_env,
    jobs,
    server_url,
)


def write_lines(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def body(n: int, **fields: Any) -> dict[str, Any]:
    return {"schedule": {"delay_seconds": 60}, "target": {"type": "handler", "name": "x"}} | {
        "payload": n,
        **fields,
    }


def created(n: int) -> dict[str, Any]:
    return {"status": 201, "job": {**JOB, "id": f"J{n}", "name": f"job-{n}"}}


def test_each_line_is_a_job_of_the_batch_and_each_result_is_printed_with_its_line(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a file of three bodies (and a blank line) and an API that refuses the second
    path = write_lines(
        tmp_path,
        [json.dumps(body(1, idempotency_key="k1")), "", json.dumps(body(2)), json.dumps(body(3))],
    )
    refused = {
        "status": 400,
        "error": {"code": "invalid", "message": "unknown field", "field": "x"},
    }
    api.answer(200, {"items": [created(1), refused, created(3)]})

    # When the file is submitted
    code = jobs(api, "create", "--from-file", path)

    # Then one POST /jobs/batch carried the bodies as written, in order
    assert (api.last.method, api.last.path) == ("POST", "/jobs/batch")
    assert api.last.body == {"jobs": [body(1, idempotency_key="k1"), body(2), body(3)]}
    # and each result is printed with its line number; one refusal makes the exit status 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("line 1: 201 J1")
    assert out[1] == "line 3: 400 invalid x: unknown field"
    assert out[2].startswith("line 4: 201 J3")
    assert code == 1


def test_all_created_exits_0_and_json_output_keeps_the_line_numbers(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_lines(tmp_path, [json.dumps(body(1)), json.dumps(body(2))])
    api.answer(200, {"items": [created(1), created(2)]})

    code = jobs(api, "create", "--from-file", path, "--json")

    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(i["line"], i["status"], i["job"]["id"]) for i in printed["items"]] == [
        (1, 201, "J1"),
        (2, 201, "J2"),
    ]


def test_more_than_100_lines_go_in_requests_of_100(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = write_lines(tmp_path, [json.dumps(body(n)) for n in range(250)])
    for size in (100, 100, 50):
        api.answer(200, {"items": [created(n) for n in range(size)]})

    assert jobs(api, "create", "--from-file", path) == 0

    assert [len(r.body["jobs"]) for r in api.requests] == [100, 100, 50]
    assert api.requests[2].body["jobs"][0] == body(200)


@pytest.mark.parametrize(
    ("line", "message"),
    [("{not json", "not valid JSON"), ("[1, 2]", "not a JSON object")],
)
def test_a_bad_line_is_reported_with_its_number_and_nothing_is_sent(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    line: str,
    message: str,
) -> None:
    path = write_lines(tmp_path, [json.dumps(body(1)), json.dumps(body(2)), line])

    code = jobs(api, "create", "--from-file", path)

    assert code == 2
    error = capsys.readouterr().err
    assert f"jobs.jsonl:3: {message}" in error
    assert api.requests == []


def test_from_file_cannot_be_combined_with_body_flags(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_lines(tmp_path, [json.dumps(body(1))])

    code = jobs(api, "create", "--from-file", path, "--rate", "60", "--idempotency-key", "k")

    assert code == 2
    assert "--from-file cannot be combined with --rate, --idempotency-key" in (
        capsys.readouterr().err
    )
    assert api.requests == []


def test_an_error_of_the_whole_batch_exits_1(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_lines(tmp_path, [json.dumps(body(1))])
    api.answer(400, {"error": {"code": "invalid", "message": "too many", "field": "jobs"}})

    assert jobs(api, "create", "--from-file", path) == 1
    assert capsys.readouterr().out == ("line 1: 400 invalid jobs: the request failed: too many\n")


def test_requests_are_split_by_size_too_so_none_exceeds_the_apis_body_limit(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
) -> None:
    # 90 jobs of 3 KB went in one 277 KB request: a 413, and nothing created.
    big = [body(n, description="d" * 3_000) for n in range(10, 100)]  # all the same size
    path = write_lines(tmp_path, [json.dumps(b) for b in big])
    # `{"jobs":[` + n bodies of `each` bytes and n - 1 commas + `]}` within the limit:
    each = len(json.dumps(big[0], separators=(",", ":")))
    first = (MAX_BODY_BYTES - len('{"jobs":[]}') + 1) // (each + 1)
    for size in (first, 90 - first):
        api.answer(200, {"items": [created(n) for n in range(size)]})

    assert jobs(api, "create", "--from-file", path) == 0

    assert [len(r.body["jobs"]) for r in api.requests] == [first, 90 - first]
    sent = [len(json.dumps(r.body, separators=(",", ":")).encode()) for r in api.requests]
    assert max(sent) <= MAX_BODY_BYTES < sum(sent)
    assert [b for r in api.requests for b in r.body["jobs"]] == big


def test_a_request_that_fails_reports_every_line_after_the_results_received(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_lines(tmp_path, [json.dumps(body(n)) for n in range(250)])
    api.answer(200, {"items": [created(n) for n in range(100)]})
    api.answer(503, {"error": {"code": "unavailable", "message": "try later"}})

    assert jobs(api, "create", "--from-file", path) == 1

    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 250  # every line's fate, the created ones included
    assert lines[99] == "line 100: 201 J99 scheduled job-99"
    assert lines[100] == "line 101: 503 unavailable the request failed: try later"
    assert lines[199] == "line 200: 503 unavailable the request failed: try later"
    assert lines[200] == "line 201: - not_sent not sent: an earlier request failed"
    assert len(api.requests) == 2


def test_a_line_no_request_can_carry_is_refused_here_and_the_others_go_on(
    api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It was sent alone, and the API's 413 of the whole request stopped every later line
    # (found by an outside audit).
    huge = body(2, description="d" * MAX_BODY_BYTES)
    path = write_lines(tmp_path, [json.dumps(body(1)), json.dumps(huge), json.dumps(body(3))])
    api.answer(200, {"items": [created(1)]})
    api.answer(200, {"items": [created(3)]})

    assert jobs(api, "create", "--from-file", path) == 1

    assert [r.body["jobs"] for r in api.requests] == [[body(1)], [body(3)]]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("line 1: 201 J1")
    assert lines[1].startswith("line 2: 413 payload_too_large body: a job body of ")
    assert lines[1].endswith(f"bytes: a request takes at most {MAX_BODY_BYTES}")
    assert lines[2].startswith("line 3: 201 J3")
