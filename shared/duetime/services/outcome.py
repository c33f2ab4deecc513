"""Where a run's outcome is recorded, and its follow-up sent (its retry, or its DLQ copy), once
the worker knows it (duetime.services.execute).

A store that refuses the write (throttled past the SDK's retries, a passing outage) is tried
again, with backoff, while the run's lease lasts. Dropped, the outcome would be lost: the next
delivery would find the run still `running` under this worker's own expired lease and take
the attempt for abandoned, a failure (on the last attempt: a `failed` run in the DLQ, and its
`on: failed` dependents run instead of its `on: succeeded` ones; found by an outside audit).
So is an SQS that takes no request for a moment when the retry or the DLQ copy is sent (until
2026-11-30 the retry then came minutes late, and the target's error was recorded as "the
worker stopped"; found by an outside audit). Past the lease another delivery may take the run
over, so the error is raised then."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from duetime.domain.messages import RunMessage
from duetime.domain.runs import Run, RunOutcome, holds
from duetime.observability import logger
from duetime.ports import ConditionFailed, JobQueue, QueueUnavailable, RunStore, StoreError

# Stop trying this long before the lease ends (its margin past the target's timeout is 30 s:
# duetime.domain.runs.LEASE_MARGIN_MS), and the pauses between tries.
RESERVE_MS = 5_000
FIRST_PAUSE_SECONDS = 0.2
MAX_PAUSE_SECONDS = 4.0

T = TypeVar("T")


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
    return _while_the_lease_lasts(
        lambda: runs.finish(run, outcome),
        run,
        _passing,
        f"record the outcome ({outcome.status.value})",
        clock=clock,
        sleep=sleep,
    )


def withdraw_claim(
    runs: RunStore,
    run: Run,
    reason: str | None,
    *,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
) -> bool:
    """`runs.withdraw(run, reason)` (a claim whose job changed before it, or handed back:
    its target never starts), tried again as an outcome is. Raised, the message came back and
    the run ended `failed` as abandoned once its lease was over (until 2026-11-30; an audit)."""
    return _while_the_lease_lasts(
        lambda: runs.withdraw(run, reason),
        run,
        _passing,
        "withdraw the claim",
        clock=clock,
        sleep=sleep,
    )


def claim_landed(
    runs: RunStore, run: Run, *, clock: Callable[[], int], sleep: Callable[[float], None]
) -> bool:
    """Whether a claim the store could not answer, nor its check (ClaimOutcome.UNKNOWN), is
    the record: read again as an outcome is written. Then the attempt is this delivery's (until
    2026-12-01 the next delivery took it for abandoned: an attempt spent, its target never
    called; an outside fault audit, round nine). Raised past the lease: the table was silent
    all that time, and the next delivery finds the attempt abandoned."""
    stored = _while_the_lease_lasts(
        lambda: runs.get(run.job_id, run.scheduled_ms),
        run,
        _passing,
        "read the claim back",
        clock=clock,
        sleep=sleep,
    )
    return holds(stored, run)


def send_follow_up(
    queue: JobQueue,
    run: Run,
    *,
    retry: tuple[RunMessage, int] | None = None,
    dead: tuple[RunMessage, str] | None = None,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
) -> None:
    """Send a failed attempt's `retry` (message, delay) or its `dead` copy (message, reason),
    tried again while SQS takes no request at all (QueueUnavailable) and the lease lasts."""

    def send() -> None:
        if retry is not None:
            queue.send([retry])
        if dead is not None:
            queue.send_dead(*dead)

    _while_the_lease_lasts(
        send,
        run,
        lambda exc: isinstance(exc, QueueUnavailable),
        "send the retry" if retry is not None else "send the run to its DLQ",
        clock=clock,
        sleep=sleep,
    )


def _passing(exc: Exception) -> bool:
    """Only what time may mend is tried again (an access denied or a refused request would be
    tried until the lease ends, to the same end: found by review)."""
    return isinstance(exc, StoreError) and exc.transient and not isinstance(exc, ConditionFailed)


def _while_the_lease_lasts(
    action: Callable[[], T],
    run: Run,
    mendable: Callable[[Exception], bool],
    what: str,
    *,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
) -> T:
    deadline = (run.lease.until_ms if run.lease is not None else 0) - RESERVE_MS
    pause = FIRST_PAUSE_SECONDS
    while True:
        try:
            return action()
        except Exception as exc:
            if not mendable(exc) or clock() + pause * 1000 > deadline:
                raise
            logger.warning(
                f"could not {what}; trying again", extra={"retry_in_s": pause}, exc_info=True
            )
            sleep(pause)
            pause = min(2 * pause, MAX_PAUSE_SECONDS)
