"""Stuck timers: where a timer whose hand-over failed on its own is parked, retried and
quarantined (the sweep, duetime.services.sweep, moves its partition past it).

- Parked: moved to its shard's stuck list with the reason, its first attempt counted, and
  tried again by the shard's later sweeps (`retry_due`) after 1, 2, 4, 8, 16, 30, 30 …
  minutes (`retry_backoff_ms`).
- Every attempt is counted *before* it is made (`_begin_attempt`): an attempt that kills the
  sweep (a timeout, out of memory) counts like one that fails, so such a timer backs off
  and is quarantined like any other, and the parked timers behind it get their turn (until
  2026-11-30 every sweep of the shard tried it first and died, and the others waited; found
  by an outside audit). The timers are tried one at a time, so one cannot fail another.
- Parked *passing* when a store failed with a passing error (throttling, a 5xx, no answer;
  duetime.services.handover): no attempt counted, tried again by the sweep after
  PASSING_RETRY_MS, as often as it takes. A retry that fails so counts none either.
- Quarantined after `MAX_HANDOVER_ATTEMPTS`: kept, counted (`TimersQuarantined`), listed and
  retried only on request (`duetime timers stuck [--retry]`); each sweep reports how many its
  shard holds (`TimersInQuarantine`, the alarm's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from duetime.domain.timers import StuckTimer, Timer
from duetime.domain.timeutil import MINUTE_MS
from duetime.observability import Metric, count, logger
from duetime.ports import ConditionFailed, QueueUnavailable, StoreError, TimerStore
from duetime.services.handover import HandOver, Tally

# A parked timer is retried this many times in all (with backoff), then quarantined.
MAX_HANDOVER_ATTEMPTS = 8
MAX_RETRY_BACKOFF_MINUTES = 30
# When a timer parked for a store's passing failure is tried again: by the shard's next sweep.
PASSING_RETRY_MS = 30_000
# Each sweep reports how many of its shard's timers are quarantined, counted up to this.
QUARANTINE_COUNT_LIMIT = 1000


def retry_backoff_ms(attempts: int) -> int:
    """How long after its `attempts`-th failed hand-over a parked timer is tried again:
    1, 2, 4, 8, 16, 30, 30 … minutes (about two hours over eight attempts)."""
    return int(min(2 ** (attempts - 1), MAX_RETRY_BACKOFF_MINUTES)) * MINUTE_MS


class StuckTally(Tally, Protocol):
    """What the stuck timers count (the sweep's report, duetime.services.sweep.SweepReport)."""

    parked: int
    unparked: int
    quarantined: int
    errors: list[str]


class StuckTimers:
    def __init__(
        self,
        timers: TimerStore,
        handover: HandOver,
        *,
        clock: Callable[[], int],
        page_size: int,
    ) -> None:
        self._timers = timers
        self._handover = handover
        self._clock = clock
        self._page_size = page_size

    def park(
        self, shard: int, timer: Timer, reason: str, report: StuckTally, *, passing: bool = False
    ) -> None:
        """Move a timer whose hand-over failed (its first attempt; `passing`: none, a store's
        passing failure) to its shard's stuck list."""
        now = self._clock()
        stuck = StuckTimer(timer, shard, 0, reason, now, now, now)
        if passing:
            self._timers.park(replace(stuck, next_attempt_ms=now + PASSING_RETRY_MS))
        else:
            self._record_failure(stuck, reason, report)
        report.parked += 1
        count(Metric.TIMERS_PARKED)

    def retry_due(self, shard: int, deadline: int, report: StuckTally) -> None:
        """Try the shard's parked timers that are due for another attempt, oldest first, and
        report how long the oldest parked passing (no attempt counted) that failed again has
        been failing (`TimersParkedAgeMinutes`): such a timer is tried at every sweep and never
        quarantined, and this level is what its alarm sees (until 2026-11-30 none did; an
        outside SRE audit). One that counts attempts is quarantined in time."""
        now = self._clock()
        oldest = now
        try:
            while self._clock() <= deadline:
                due = self._timers.parked_due(shard, now, self._page_size)
                if not due:
                    return
                results = self.retry(due, deadline, report)
                failed = [e.first_failed_ms for e, why in results if why and not e.attempts]
                oldest = min([oldest, *failed])
                if len(results) < len(due):
                    return  # out of time
        except (QueueUnavailable, StoreError) as exc:  # SQS (no attempt counted), or the table
            # The sweep's work stands (until 2026-12-01 a throttled park failed the invocation,
            # its metrics and log line lost; an outside audit): the next sweep retries them.
            logger.warning("retrying parked timers stopped", extra={"error": str(exc)})
            report.errors.append(f"parked timers of shard {shard}: {exc}")
        finally:
            count(Metric.TIMERS_PARKED_AGE, (now - oldest) // MINUTE_MS)

    def count_quarantined(self, shard: int) -> None:
        """Report the shard's quarantined timers (`TimersInQuarantine`): a level, which keeps
        its alarm on while any is left (`TimersQuarantined` counts each once, when it happens;
        until 2026-11-30 that was the alarm's, which went back to OK within ten minutes, and
        missed a quarantine made by `duetime timers stuck --retry`: found by an outside audit).
        A count that fails is logged, the sweep's work stands (the metric is left out)."""
        try:
            held = self._timers.quarantined(shard, QUARANTINE_COUNT_LIMIT)
        except Exception:
            logger.exception("counting the quarantined timers failed", extra={"shard": shard})
            return
        count(Metric.TIMERS_IN_QUARANTINE, held)

    def retry(
        self, stuck: Sequence[StuckTimer], deadline: int, report: StuckTally
    ) -> list[tuple[StuckTimer, str | None]]:
        """Hand stuck timers over again, one at a time, each attempt counted before it is made:
        each that goes through is forgotten; each that fails keeps the attempt (a quarantined
        one stays quarantined, with the new reason). Returns the entries dealt with (a prefix,
        when the deadline came) and why each failed (None: handed over). Raises
        QueueUnavailable, once those dealt with are recorded, when SQS stopped taking
        requests: that attempt is not counted."""
        results: list[tuple[StuckTimer, str | None]] = []
        for entry in stuck:
            if self._clock() > deadline:
                break
            trying = self._begin_attempt(entry, report)
            if trying is None:
                results.append((entry, "not tried: quarantined, or retried by another"))
                continue
            handed = self._handover.hand_over([entry.timer], deadline, report)
            if handed.unavailable is not None or not handed.done:
                self._uncount(entry, trying)  # not the timer's doing
                if handed.unavailable is not None:
                    raise handed.unavailable
                break  # out of time
            if handed.passing:  # a store's passing failure: uncounted, tried again soon
                why = handed.passing[0][1]
                later = None if entry.quarantined else self._clock() + PASSING_RETRY_MS
                self._uncount(replace(entry, reason=why, next_attempt_ms=later), trying)
                results.append((entry, why))
                continue
            reason = handed.failed[0][1] if handed.failed else None
            if reason is None:
                self._timers.unpark(trying)
                report.unparked += 1
            else:
                try:
                    self._record_failure(trying, reason, report, previous=True, counted=True)
                except ConditionFailed:
                    _changed_meanwhile(entry)
            results.append((entry, reason))
        return results

    def _uncount(self, entry: StuckTimer, trying: StuckTimer) -> None:
        """Take back the attempt `trying` counted. Another retry that took the entry meanwhile
        (`duetime timers stuck --retry` beside the sweep's) has the last word: until 2026-11-30
        its write made this one raise, and the shard's sweep failed (an outside fault audit)."""
        try:
            self._timers.park(entry, replacing=trying)
        except ConditionFailed:
            _changed_meanwhile(entry)

    def _begin_attempt(self, stuck: StuckTimer, report: StuckTally) -> StuckTimer | None:
        """Count an attempt before making it. Returns the entry as written, or None: out of
        attempts that never ended (quarantined now), or another retry has it."""
        try:
            if stuck.attempts >= MAX_HANDOVER_ATTEMPTS and not stuck.quarantined:
                reason = f"{stuck.reason} (attempts that never ended: the sweep stopped)"
                self._record_failure(stuck, reason, report, previous=True, counted=True)
                return None
            attempts = stuck.attempts + 1
            retry_at = None if stuck.quarantined else self._clock() + retry_backoff_ms(attempts)
            trying = replace(stuck, attempts=attempts, next_attempt_ms=retry_at)
            self._timers.park(trying, replacing=stuck)
        except ConditionFailed:
            _changed_meanwhile(stuck)
            return None
        return trying

    def _record_failure(
        self,
        stuck: StuckTimer,
        reason: str,
        report: StuckTally,
        *,
        previous: bool = False,
        counted: bool = False,
    ) -> None:
        """Record a failed attempt (`counted`: already counted by `_begin_attempt`): retry
        later, or quarantine when out of attempts."""
        now = self._clock()
        attempts = stuck.attempts + (0 if counted else 1)
        out = attempts >= MAX_HANDOVER_ATTEMPTS or stuck.quarantined
        failed = StuckTimer(
            stuck.timer,
            stuck.shard,
            attempts,
            reason,
            stuck.first_failed_ms,
            now,
            None if out else now + retry_backoff_ms(attempts),
        )
        self._timers.park(failed, replacing=stuck if previous else None)
        if out and not stuck.quarantined:
            report.quarantined += 1
            count(Metric.TIMERS_QUARANTINED)
            logger.error(
                "timer quarantined: its hand-over kept failing",
                extra={
                    "tenant": stuck.timer.tenant,
                    "job_id": stuck.timer.job_id,
                    "attempts": attempts,
                    "reason": reason,
                },
            )


def _changed_meanwhile(stuck: StuckTimer) -> None:
    """Another retry dealt with a stuck timer during ours: theirs stands."""
    logger.info("a stuck timer changed during its retry", extra={"job_id": stuck.timer.job_id})
