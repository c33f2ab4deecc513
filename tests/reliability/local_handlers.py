"""A recording handler for worker *processes* (tests/reliability/test_local_faults.py).

The worker subprocess imports this module before `duetime worker` starts, so jobs can target
`reliability.file_record`: each execution appends a JSON line to `payload.path` (flushed to
disk before the work begins, so a process killed mid-run has recorded that it started), then
works for `payload.first_seconds` on a run's first execution and not at all afterwards.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from duetime.targets import Invocation, handler
from tests.reliability.accounting import Execution


@handler("reliability.file_record")
def file_record(invocation: Invocation) -> None:
    payload = invocation.payload
    assert isinstance(payload, dict)
    path = Path(str(payload["path"]))
    first = not any(
        e.job_id == invocation.job_id and e.scheduled_ms == invocation.scheduled_ms
        for e in read_executions(path)
    )
    line = {
        "job_id": invocation.job_id,
        "scheduled_ms": invocation.scheduled_ms,
        "attempt": invocation.attempt,
        "pid": os.getpid(),
    }
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
        out.flush()
        os.fsync(out.fileno())
    if first:
        time.sleep(float(payload.get("first_seconds", 0)))


def read_executions(path: Path) -> list[Execution]:
    if not path.exists():
        return []
    lines = [json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines() if raw]
    return [Execution(e["job_id"], e["scheduled_ms"], e["attempt"]) for e in lines]


def pids(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(raw)["pid"] for raw in path.read_text(encoding="utf-8").splitlines() if raw]
