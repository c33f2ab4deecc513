"""The in-memory RunStore (duetime.ports): it calls the claim rule
(duetime.domain.runs.decide_claim) that the DynamoDB adapter encodes as a conditional write."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Sequence

from duetime.domain.runs import (
    ClaimOutcome,
    Run,
    RunClaim,
    RunOutcome,
    RunStatus,
    claimed_run,
    decide_claim,
    finished_run,
    withdrawn,
)
from duetime.ports import Page


class MemoryRunStore:
    def __init__(self) -> None:
        self._runs: dict[tuple[str, int], Run] = {}
        self._lock = threading.Lock()

    def claim(self, claim: RunClaim) -> tuple[ClaimOutcome, Run | None]:
        with self._lock:
            existing = self._runs.get((claim.job_id, claim.scheduled_ms))
            outcome = decide_claim(existing, claim)
            if outcome != ClaimOutcome.CLAIMED:
                return outcome, existing
            run = claimed_run(existing, claim)
            self._runs[(claim.job_id, claim.scheduled_ms)] = run
            return outcome, run

    def record(self, run: Run) -> Run | None:
        with self._lock:
            existing = self._runs.get((run.job_id, run.scheduled_ms))
            if existing is None or existing.status == RunStatus.BUFFERED:
                self._runs[(run.job_id, run.scheduled_ms)] = run
                return None
            return existing

    def finish(self, run: Run, outcome: RunOutcome) -> Run | None:
        with self._lock:
            current = self._runs.get((run.job_id, run.scheduled_ms))
            if current is None or current.version != run.version:
                return None
            done = finished_run(run, outcome)
            self._runs[(run.job_id, run.scheduled_ms)] = done
            return done

    def withdraw(self, run: Run, reason: str | None) -> bool:
        with self._lock:
            key = (run.job_id, run.scheduled_ms)
            current = self._runs.get(key)
            if current is None or current.version != run.version:
                return False
            after = withdrawn(run, reason)
            if after is None:
                del self._runs[key]
            else:
                self._runs[key] = after
            return True

    def get(self, job_id: str, scheduled_ms: int) -> Run | None:
        return self._runs.get((job_id, scheduled_ms))

    def get_many(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Run]:
        return {k: self._runs[k] for k in keys if k in self._runs}

    def list(self, job_id: str, limit: int, cursor: str | None) -> Page[Run]:
        with self._lock:  # iterating while another thread claims would raise
            times = sorted((s for j, s in self._runs if j == job_id), reverse=True)
        if cursor is not None:
            times = [s for s in times if s < int(cursor)]
        page = times[:limit]
        more = len(times) > limit
        next_cursor = str(page[-1]) if more and page else None
        return Page([self._runs[(job_id, s)] for s in page], next_cursor)

    def all(self) -> builtins.list[Run]:  # `list` is the method above in this scope
        return list(self._runs.values())
