"""Runs: one record per occurrence of a job, with its attempts, and the claim rule.

A run is identified by (job id, scheduled instant). Delivery is at-least-once (SQS), so the
worker *claims* a run before executing it; the claim rule below decides what a delivery may do
given what the store already holds. The DynamoDB adapter encodes the same rule as a condition
expression and the in-memory store calls `decide_claim` directly; one contract suite tests both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum

from duetime.domain.errors import ValidationError
from duetime.domain.ids import run_id
from duetime.domain.timeutil import rfc3339_ms


class RunStatus(StrEnum):
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # Overlap policy (duetime.domain.overlap): an occurrence that did not start because
    # another run of its job was active (`skip`, or `buffer_one` with one already waiting),
    # and the one occurrence waiting for it (`buffer_one`).
    SKIPPED = "skipped"
    BUFFERED = "buffered"


TERMINAL_RUN_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED})


class UnreadableRun(Exception):  # (not a ValueError: the API reads those as a bad input)
    """A stored run record this version cannot read: a status a later version writes (during a
    deploy, after a rollback), an item damaged by hand. Listings and a job's view leave it out;
    a claim, or a check whether a run exists, does not take it for none."""


# Keep a run record near one DynamoDB write unit (1 KB) however often it is retried: the
# latest error in full (300 characters), earlier ones shortened, the first attempt and the
# latest ones only.
# Full errors are in the logs and in the DLQ reason.
MAX_ERROR_CHARS = 300
EARLIER_ERROR_CHARS = 80
MAX_ATTEMPTS_KEPT = 5
# A lease's deadline is written with the holder's clock and read with another worker's: it
# counts as passed only this long after it (the claim's `skew_allowance_ms`, by default this),
# so workers whose clocks disagree by less never take a live lease. AWS compute is kept within
# milliseconds by Amazon Time Sync; the allowance delays taking over a run whose holder died.
CLOCK_SKEW_ALLOWANCE_MS = 120_000
# A lease outlives the target's timeout by this margin before another delivery may reclaim.
LEASE_MARGIN_MS = 30_000


@dataclass(frozen=True)
class Attempt:
    number: int
    started_ms: int
    lateness_ms: int
    finished_ms: int | None = None
    error: str | None = None
    # How long the delivery waited for the due instant before this attempt was claimed (SQS
    # delays count whole seconds); None on a record written before attempts carried it.
    early_wait_ms: int | None = None


@dataclass(frozen=True)
class Lease:
    """Who holds a run: the SQS message and its receive count, and until when."""

    message_id: str
    receive_count: int
    until_ms: int


@dataclass(frozen=True)
class RunClaim:
    """A delivery's request to execute attempt `attempt` of a run."""

    tenant: str
    job_id: str
    scheduled_ms: int
    attempt: int
    lease: Lease
    # When the attempt starts: the claim is written up to the worker's claim lead before the
    # due instant, and the target started on it (duetime.services.execute).
    now_ms: int
    lateness_ms: int
    expires_at: int  # TTL of the run record, epoch seconds
    job_name: str | None = None
    target_type: str = ""
    priority: str = "normal"
    runtime: str = "lambda"
    # How far past its deadline another worker's lease counts as over (see
    # CLOCK_SKEW_ALLOWANCE_MS): a deployment setting, DUETIME_CLOCK_SKEW_ALLOWANCE_SECONDS.
    skew_allowance_ms: int = CLOCK_SKEW_ALLOWANCE_MS
    # When the occurrence was due to start: its instant plus the job's jitter (Job.due_ms).
    # Kept from the run's first claim; None: not known (the run's scheduled instant).
    due_ms: int | None = None
    # How long the delivery waited for its due instant before claiming (Attempt.early_wait_ms).
    early_wait_ms: int | None = None
    # When a run-now or a backfill asked for the run (RunMessage.asked_ms), else None.
    asked_ms: int | None = None

    @property
    def run_id(self) -> str:
        return run_id(self.job_id, self.scheduled_ms)


@dataclass(frozen=True)
class Run:
    tenant: str
    job_id: str
    scheduled_ms: int
    status: RunStatus
    attempt: int
    attempts: tuple[Attempt, ...] = field(default_factory=tuple)
    lease: Lease | None = None
    expires_at: int = 0
    job_name: str | None = None
    target_type: str = ""
    priority: str = "normal"
    runtime: str = "lambda"
    # Incremented by every write: stores use it for compare-and-set.
    version: int = 1
    # When the occurrence was due to start (scheduled_ms plus the job's jitter); None on a
    # record written before runs carried it: scheduled_ms.
    due_ms: int | None = None
    # When a run-now or a backfill asked for the run, kept from its first claim (or its
    # `buffered` record): it triggers only the `after` jobs linked by then (dependencies).
    asked_ms: int | None = None

    @property
    def run_id(self) -> str:
        return run_id(self.job_id, self.scheduled_ms)

    @property
    def started_ms(self) -> int | None:
        return self.attempts[0].started_ms if self.attempts else None

    @property
    def finished_ms(self) -> int | None:
        return self.attempts[-1].finished_ms if self.attempts else None

    @property
    def lateness_ms(self) -> int | None:
        return self.attempts[0].lateness_ms if self.attempts else None

    @property
    def early_wait_ms(self) -> int | None:
        return self.attempts[0].early_wait_ms if self.attempts else None

    @property
    def error(self) -> str | None:
        return self.attempts[-1].error if self.attempts else None


def refuse_ended(field: str, run: Run | None) -> None:
    """A one-off moved onto an instant its job already has an ended run at (or one waiting,
    `buffered`, which the same change ends `skipped`) would never run: a run id names one
    instant of a job, so its claim takes it for a copy of that run. Refused since 2026-11-30
    (it stayed `scheduled` for good: found by outside lifecycle audits)."""
    if run is not None and (
        run.status in TERMINAL_RUN_STATUSES or run.status == RunStatus.BUFFERED
    ):
        raise ValidationError(
            field,
            f"names {rfc3339_ms(run.scheduled_ms)}, where this job already has a run"
            f" ({run.status}): a job runs once an instant; choose another instant",
        )


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # execute the target
    DONE = "done"  # this delivery is a duplicate of finished work: drop it
    BUSY = "busy"  # another holder's lease is live: leave the message for later
    # The attempt recorded as running has no live holder (its lease ran out: the worker was
    # killed by a timeout, or crashed): that attempt failed, and counts as one.
    ABANDONED = "abandoned"
    # The store's, never decide_claim's: no answer to the claim's write nor to its check, so
    # whether it landed is unknown (the worker reads it again while the lease lasts).
    UNKNOWN = "unknown"


def decide_claim(existing: Run | None, claim: RunClaim) -> ClaimOutcome:
    """Timeline of the cases, for one run R:

    - no record: first delivery of attempt 1 (or of a retry whose record expired) -> CLAIMED.
    - R buffered (waiting for its job, overlap `buffer_one`): the gate admitted it -> CLAIMED.
    - R finished (succeeded/failed/skipped): any delivery is a duplicate -> DONE.
    - R retrying after attempt n: the retry message (attempt > n) -> CLAIMED; a stale copy of
      attempt <= n -> DONE (attempt n's outcome is already recorded).
    - R running attempt n:
        * a delivery of an older attempt -> DONE;
        * this very claim, already written by a request that was retried -> CLAIMED;
        * the lease's deadline has passed by the clock-skew allowance: its holder
          was killed or died -> ABANDONED (attempt n failed; the caller records it and retries
          or gives up as for any failure);
        * otherwise someone is executing it right now -> BUSY: whatever SQS says. A second
          delivery of the same message (a higher receive count) means only that SQS took the
          message's visibility back — a heartbeat failed, or the visibility ran out under a
          live holder — not that the holder is gone: the run record's lease decides.
    """
    if existing is None or existing.status == RunStatus.BUFFERED:
        return ClaimOutcome.CLAIMED
    if existing.status in TERMINAL_RUN_STATUSES:
        return ClaimOutcome.DONE
    if existing.status == RunStatus.RETRYING:
        return ClaimOutcome.CLAIMED if claim.attempt > existing.attempt else ClaimOutcome.DONE
    if claim.attempt < existing.attempt:
        return ClaimOutcome.DONE
    lease = existing.lease
    if lease == claim.lease:
        # This very claim, already written: the request answered with an error after the write
        # (a 500) and the SDK's retry then found the record ours. (Another delivery differs in
        # its message, its receive count or the instant its lease was computed.)
        return ClaimOutcome.CLAIMED
    if lease is None or lease.until_ms + claim.skew_allowance_ms <= claim.now_ms:
        return ClaimOutcome.ABANDONED
    return ClaimOutcome.BUSY


def holds(stored: Run | None, run: Run) -> bool:
    """Whether the record `stored` is `run` as its claim wrote it (the same lease and attempt):
    a claim whose answer was lost, read back."""
    return stored is not None and (stored.lease, stored.attempt) == (run.lease, run.attempt)


def shortened(attempts: tuple[Attempt, ...], *, keep_last: bool = False) -> tuple[Attempt, ...]:
    """Earlier attempts with their errors shortened (the last one whole with `keep_last`)."""
    cut = len(attempts) - 1 if keep_last else len(attempts)
    return tuple(
        replace(a, error=a.error[:EARLIER_ERROR_CHARS] if a.error and i < cut else a.error)
        for i, a in enumerate(attempts)
    )


def claimed_run(existing: Run | None, claim: RunClaim) -> Run:
    """The record after a successful claim."""
    previous = existing.attempts if existing is not None else ()
    # A reclaim of the same attempt (holder died) replaces that attempt's entry. The latest
    # error stays whole while the new attempt runs (a withdrawn claim ends the run with it).
    earlier = shortened(tuple(a for a in previous if a.number < claim.attempt), keep_last=True)
    # The first attempt stays (the run's start, lateness and early wait), then the latest.
    kept = earlier[:1] + earlier[1:][-(MAX_ATTEMPTS_KEPT - 2) :]
    attempt = Attempt(
        claim.attempt, claim.now_ms, claim.lateness_ms, early_wait_ms=claim.early_wait_ms
    )
    return Run(
        tenant=claim.tenant,
        job_id=claim.job_id,
        scheduled_ms=claim.scheduled_ms,
        status=RunStatus.RUNNING,
        attempt=claim.attempt,
        attempts=(*kept, attempt),
        lease=claim.lease,
        expires_at=claim.expires_at,
        job_name=claim.job_name,
        target_type=claim.target_type,
        priority=claim.priority,
        runtime=claim.runtime,
        version=existing.version + 1 if existing is not None else 1,
        due_ms=existing.due_ms if existing is not None and existing.due_ms else claim.due_ms,
        asked_ms=earliest(existing.asked_ms if existing is not None else None, claim.asked_ms),
    )


def started(run: Run, now_ms: int, due_ms: int) -> Run:
    """The claimed run as its target starts now: its attempt's start and lateness are the
    claim's (written before the target starts) unless the claim's write, or the read after a
    late one, took longer (until 2026-11-30 the claim's stayed: a 3 s write said on time).
    The outcome writes them."""
    last = run.attempts[-1]
    if now_ms <= last.started_ms:
        return run
    attempt = replace(last, started_ms=now_ms, lateness_ms=max(0, now_ms - due_ms))
    return replace(run, attempts=(*run.attempts[:-1], attempt))


@dataclass(frozen=True)
class RunOutcome:
    status: RunStatus  # succeeded, retrying or failed
    finished_ms: int
    error: str | None = None


def finished_run(run: Run, outcome: RunOutcome) -> Run:
    last = run.attempts[-1]
    error = outcome.error[:MAX_ERROR_CHARS] if outcome.error else None
    done = replace(last, finished_ms=outcome.finished_ms, error=error)
    return replace(
        run,
        status=outcome.status,
        attempts=(*shortened(run.attempts[:-1]), done),
        lease=None,
        version=run.version + 1,
    )


def abandoned_end(run: Run, now_ms: int) -> int:
    """When an attempt whose worker died ended, for a run that ends with it: by its lease's end
    at the latest, not when a delivery found the lease over, minutes later (until 2026-11-30: a
    90-minute `duration_ms` in the archive). A retrying run keeps the moment it was found: an
    overlap gate counts its holder active from then until the retry is due."""
    lease_end = run.lease.until_ms if run.lease else now_ms
    return max(min(now_ms, lease_end), run.attempts[-1].started_ms if run.attempts else 0)


def withdrawn(run: Run, reason: str | None) -> Run | None:
    """The record after a claim is withdrawn before its attempt started (its job was
    cancelled, paused or re-armed in the moment between the worker's read and its claim:
    duetime.services.execute). A first attempt leaves no record (None), as when the worker sees
    the change before claiming; a retry's run ends `failed` without the withdrawn attempt, its
    last attempt's error followed by `; not retried: <reason>`. Without a reason the claim is
    handed back (the worker stops): a retry's run is `retrying` again, as before its claim
    (until 2026-11-30 it ended `failed`, and the retry never ran; an outside fault audit)."""
    earlier = run.attempts[:-1]
    if not earlier:
        return None
    last = earlier[-1]
    if reason is None:
        back = replace(run, status=RunStatus.RETRYING, attempt=last.number, attempts=earlier)
        return replace(back, lease=None, version=run.version + 1)
    error = not_retried(last.error, reason)
    ended = last.finished_ms if last.finished_ms is not None else run.attempts[-1].started_ms
    before = replace(run, attempt=last.number, attempts=earlier)
    return finished_run(before, RunOutcome(RunStatus.FAILED, ended, error))


def stopped_by_its_job(run: Run) -> bool:
    """A run that its job's change (a cancel, a pause, a re-arm) ended before its next attempt,
    its error ending `not retried: the job …` (not_retried, with the worker's reasons): it
    triggers no `after` job. (Until 2026-12-01 `; not retried: ` anywhere in a target's own
    error matched: an outside audit.)"""
    return run.status == RunStatus.FAILED and bool(_STOPPED.search(run.error or ""))


_NOT_RETRIED = "not retried: "
_STOPPED = re.compile(r"(?:^|; )not retried: the job [a-z ]+\Z")


def not_retried(error: str | None, reason: str) -> str:
    """The error a run ends with when its job stops it before its next attempt: the last
    attempt's error, cut so that the reason fits in a record's MAX_ERROR_CHARS."""
    why = f"{_NOT_RETRIED}{reason}"
    if not error:
        return why
    return f"{error[: max(MAX_ERROR_CHARS - len(why) - 2, 0)]}; {why}"


def earliest(*asked: int | None) -> int | None:
    """The stricter of the asks known for one run (`Run.asked_ms`; None: not asked for): its
    record's and a delivery's may differ when two upstreams' runs share the run's id."""
    known = [a for a in asked if a is not None]
    return min(known) if known else None
