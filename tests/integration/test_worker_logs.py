"""What the worker logs at the default level (INFO): a run that succeeded is in its record and
its history, not in the logs (a line per success would be most of the logs' bill: docs/cost.md
"Logs"); a run that failed logs its failure, and DEBUG shows the successes too."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from duetime.domain.invocation import Invocation, TargetError
from duetime.observability import Metric, logger
from duetime.ports import StoreError
from duetime.targets import DEFAULT_HANDLERS
from tests.integration.conftest import Engine


def refused(invocation: Invocation) -> None:
    raise TargetError("the target refused it", retryable=False)


DEFAULT_HANDLERS.register("test.logs.refused", refused)


def lines_about(buffer: io.StringIO, job_id: str) -> list[str]:
    lines = [json.loads(line) for line in buffer.getvalue().splitlines() if line.startswith("{")]
    return [str(line.get("message")) for line in lines if job_id in json.dumps(line)]


def test_at_info_a_success_logs_nothing_and_a_failure_logs_its_error(
    engine: Engine, logged: io.StringIO
) -> None:
    # Given a job that succeeds and one whose target refuses it
    ok = engine.submit({"schedule": {"delay_seconds": 0}})
    bad = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "handler", "name": "test.logs.refused"},
        }
    )

    # When the workers run them
    engine.advance(1)
    engine.drain()

    # Then both ran, and are on record...
    assert len(engine.recorder.runs_of(ok)) == 1
    ok_runs = engine.parts.runs.list(ok, 10, None).items
    bad_runs = engine.parts.runs.list(bad, 10, None).items
    assert [r.status.value for r in ok_runs] == ["succeeded"]
    assert [r.status.value for r in bad_runs] == ["failed"]
    # ...but only the failure is in the logs
    assert lines_about(logged, ok) == []
    assert "run failed" in lines_about(logged, bad)


def test_at_debug_a_success_logs_its_line(engine: Engine, logged: io.StringIO) -> None:
    logger.setLevel(logging.DEBUG)
    job_id = engine.submit({"schedule": {"delay_seconds": 0}})
    engine.advance(1)
    engine.drain()
    assert "run succeeded" in lines_about(logged, job_id)


def test_a_delivery_whose_handling_fails_is_logged_with_its_run_s_ids_and_tenant_and_counted(
    engine: Engine,
    logged: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `run processing failed` was logged by the worker loop, after the run's keys were gone:
    # only the SQS message id, and no line of the worker carried the tenant (until 2026-11-30;
    # found by an outside SRE audit).
    job_id = engine.submit({"schedule": {"delay_seconds": 0}})
    reads = engine.parts.executor._reads
    real, failed = reads.get, []

    def unavailable(*args: Any) -> Any:
        if not failed:
            failed.append(True)
            raise StoreError("the jobs table is unavailable")
        return real(*args)

    monkeypatch.setattr(reads, "get", unavailable)
    engine.advance(1)
    capsys.readouterr()
    engine.drain()
    assert Metric.DELIVERIES_FAILED in capsys.readouterr().out  # (WorkerErrors watches it)
    lines = [json.loads(line) for line in logged.getvalue().splitlines() if line.startswith("{")]
    (line,) = [line for line in lines if line["message"] == "run processing failed"]
    assert (line["tenant"], line["job_id"]) == ("tenant-a", job_id)
    assert line["run_id"].startswith(f"{job_id}-")
    assert "the jobs table is unavailable" in line["exception"]
    assert line["level"] == "ERROR"
