"""What the worker logs at the default level (INFO): a run that succeeded is in its record and
its history, not in the logs (a line per success would be most of the logs' bill: docs/cost.md
"Logs"); a run that failed logs its failure, and DEBUG shows the successes too."""

from __future__ import annotations

import io
import json
import logging

from duetime.domain.invocation import Invocation, TargetError
from duetime.observability import logger
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
