"""Where a run's outcome is recorded, once the worker knows it (duetime.services.execute).

A store that refuses the write (throttled past the SDK's retries, a passing outage) is tried
again, with backoff, while the run's lease lasts. Dropped, the outcome would be lost: the next
delivery would find the run still `running` under this worker's own expired lease and take
the attempt for abandoned, a failure (on the last attempt: a `failed` run in the DLQ, and its
`on: failed` dependents run instead of its `on: succeeded` ones; found by an outside audit).
Past the lease another delivery may take the run over, so the error is raised then."""

from __future__ import annotations

from collections.abc import Callable

from duetime.domain.runs import Run, RunOutcome
from duetime.observability import logger
from duetime.ports import ConditionFailed, RunStore, StoreError

# Stop trying this long before the lease ends (its margin past the target's timeout is 30 s:
# duetime.services.execute.LEASE_MARGIN_MS), and the pauses between tries.
RESERVE_MS = 5_000
FIRST_PAUSE_SECONDS = 0.2
MAX_PAUSE_SECONDS = 4.0


def record_outcome(
    runs: RunStore,
    run: Run,
    outcome: RunOutcome,
    *,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
) -> Run | None:
    """`runs.finish(run, outcome)`, tried again on a transient StoreError until shortly
    before the run's lease ends (so it may hold its worker that long). A write that landed but
    answered an error is found ours by the next try (RunStore.finish)."""
    deadline = (run.lease.until_ms if run.lease is not None else 0) - RESERVE_MS
    pause = FIRST_PAUSE_SECONDS
    while True:
        try:
            return runs.finish(run, outcome)
        except StoreError as exc:
            # Only what time may mend (an access denied or a refused request would be tried
            # until the lease ends, to the same end: found by review), and while it lasts.
            mendable = exc.transient and not isinstance(exc, ConditionFailed)
            if not mendable or clock() + pause * 1000 > deadline:
                raise
            logger.warning(
                "could not record the outcome; trying again",
                extra={"status": outcome.status.value, "retry_in_s": pause},
                exc_info=True,
            )
            sleep(pause)
            pause = min(2 * pause, MAX_PAUSE_SECONDS)
