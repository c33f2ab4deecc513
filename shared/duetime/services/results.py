"""What handling a delivery tells the worker that received it: delete the message, or leave it
to come back, and when (duetime.services.execute decides; the Lambda and Fargate workers act)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from duetime.domain.messages import KeysUnavailable
from duetime.domain.runs import Lease, Run
from duetime.observability import Metric, count, logger
from duetime.ports import (
    ConditionFailed,
    Delivery,
    JobQueue,
    QueueUnavailable,
    SecretsUnavailable,
    StoreError,
)
from duetime.settings import Settings


class Disposition(StrEnum):
    DONE = "done"  # delete the message
    RETRY_LATER = "retry_later"  # leave it: SQS delivers it again after the visibility timeout


# A delivery to handle again soon (its handling failed, or a send it owed did) comes back after
# 2, 4, 8, ... seconds by its receive count, up to this: not after the queue's visibility
# timeout (6 x the worker's: 90 minutes as deployed); the redrive policy still dead-letters it
# after its 10th receive.
RETRY_SOON_MAX_SECONDS = 300
# SQS caps a message's visibility timeout at 12 hours.
MAX_VISIBILITY_SECONDS = 43_200
# A delivery that finds a run claimed less than this long ago (or due to start) comes back
# soon, not when the holder's lease ends: a late claim whose job changed is withdrawn at once.
FRESH_MS = 5_000


def retry_soon_seconds(receive_count: int) -> int:
    doubling: int = 2 ** min(max(receive_count, 1), 9)
    return min(RETRY_SOON_MAX_SECONDS, doubling)


# A message no worker could open, the keys unreadable (Secrets Manager throttled or silent),
# comes back after this much, doubling from its 2nd receive: its 10 receives (the redrive
# policy's) last ~4.5 hours, where 2, 4, 8 … s moved every run a cold worker met to the DLQ in
# ~20 minutes, no message at fault (until 2026-12-01; an outside fault audit, round nine).
KEYS_WAIT_SECONDS = (120, 3600)


# A delivery whose handling met a passing outage of the platform's own (a table or SQS
# throttled or silent past the SDK's retries, a tenant's webhook secret unreadable) comes back
# after 2, 4, 8 s, then after 1, 2, 4 … minutes: its 10 receives last ~63 minutes, where 2 …
# 300 s moved every run a worker met in an outage of ~13.5 minutes to the DLQ, no message at
# fault (until 2026-12-01; an outside fault audit, round nine). Its own failure (a store
# refusing for good, a bug) keeps retry_soon_seconds: a poison message reaches the DLQ soon.
OUTAGE_WAIT_SECONDS = (60, 3600)  # from the 4th receive


def back_soon(queue: JobQueue, delivery: Delivery, cause: BaseException | None = None) -> None:
    """Make a delivery visible again after retry_soon_seconds (its handling failed, or a send it
    owed did), not after the queue's visibility timeout; later when the `cause` is an outage
    (the keys, or another of the platform's passing faults)."""
    received = max(delivery.receive_count, 1)
    wait = retry_soon_seconds(received)
    if isinstance(cause, KeysUnavailable):
        first, most = KEYS_WAIT_SECONDS
        wait = min(most, first * 2 ** min(received - 1, 5))
    elif _outage(cause) and received > 3:
        first, most = OUTAGE_WAIT_SECONDS
        wait = min(most, first * 2 ** min(received - 4, 6))
    try:
        queue.change_visibility(delivery, wait)
    except Exception:  # the same outage, likely: the visibility timeout stands
        logger.warning("could not shorten a delivery's visibility", exc_info=True)


def _outage(cause: BaseException | None) -> bool:
    if isinstance(cause, StoreError):
        return cause.transient and not isinstance(cause, ConditionFailed)
    passing = isinstance(cause, SecretsUnavailable) and cause.passing
    return passing or isinstance(cause, QueueUnavailable)


@dataclass(frozen=True)
class Result:
    disposition: Disposition
    detail: str
    run: Run | None = None
    soon: bool = False  # RETRY_LATER, back after retry_soon_seconds (set by RunExecutor.handle)
    cause: BaseException | None = None  # why it comes back soon (an outage's: back_soon)


def soon(detail: str, run: Run | None, cause: BaseException | None = None) -> Result:
    """Leave the message to come back soon: nothing else says when. `cause`: the failure, its
    wait an outage's when passing (until 2026-12-01 a finished run whose dependents a silent
    table kept from going out reached the DLQ in ~13.5 minutes: an outside fault audit)."""
    return Result(Disposition.RETRY_LATER, detail, run, soon=True, cause=cause)


def dropped(detail: str) -> Result:
    """Delete the message of a run that will not run (its job cancelled, paused or changed):
    counted and logged, with why (the line carries the run's ids)."""
    count(Metric.RUNS_DROPPED)
    logger.info("run dropped", extra={"reason": detail})
    return Result(Disposition.DONE, detail)


def lease_end(lease: Lease, settings: Settings) -> int:
    """A lease's deadline plus the clock-skew allowance: when it counts as over."""
    return lease.until_ms + settings.clock_skew_allowance_seconds * 1000


def after_the_lease(
    queue: JobQueue, delivery: Delivery, run: Run, detail: str, now: int, settings: Settings
) -> Result:
    """Leave the message until the lease of `run`'s holder is over (its deadline plus the
    clock-skew allowance): if the holder died, the next delivery takes over. A claim made
    moments ago may yet be withdrawn (a late run whose job changed): then soon."""
    if run.lease is None or not run.attempts or now - run.attempts[-1].started_ms < FRESH_MS:
        return soon(detail, run)
    # (Not delay_seconds: a lease can end past SQS's 900 s delay limit.)
    wait = (lease_end(run.lease, settings) - now) // 1000 + 1
    queue.change_visibility(delivery, max(0, min(MAX_VISIBILITY_SECONDS, wait)))
    return Result(Disposition.RETRY_LATER, detail, run)
