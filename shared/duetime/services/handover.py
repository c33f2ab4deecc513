"""Handing timers over to SQS, for the sweeper (duetime.services.sweep).

A one-off's timer carries its queue and becomes a message as it is; a recurring job's timer
needs the job, to plan its chain (duetime.services.dispatch). Timers go a group at a time, and
a group whose hand-over raises is split in halves until the timers that fail on their own are
found: the sweeper parks those, and the rest of the page goes through. When SQS itself cannot
take requests (QueueUnavailable), no timer is to blame: the hand-over stops there and says so.
So when no message can be signed, its key unreadable (the SQS adapter's QueueUnavailable too).

A store that fails with a passing error (a transient StoreError: throttling, a 5xx, no answer)
is no timer's fault either, but may be one tenant's (its throttled jobs partition) or the
table's (down). Such a group is split by tenant, its one-offs on their own (they read no job),
and a tenant's chains that fail so are parked *passing*: no attempt counted, tried again by the
next sweep, never quarantined for it (until 2026-11-30 every chain swept in a jobs-table outage
was parked as failing on its own, and quarantined after two hours of it; found by an outside
audit). Once the chains of OUTAGE_TENANTS tenants have failed so and none has gone through,
the table is taken for down: the page's other chains are parked passing untried, its one-offs
still sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from duetime.domain.jobs import Job, JobStatus
from duetime.domain.messages import delay_seconds
from duetime.domain.timers import Timer
from duetime.observability import logger
from duetime.ports import (
    JobQueue,
    JobStore,
    QueueUnavailable,
    RunSender,
    StoreError,
    TimerStore,
)
from duetime.services.dispatch import Dispatcher
from duetime.services.release import ReleasedSender
from duetime.settings import Settings

# Timers handed over at once: 16 SendMessageBatch calls, as many as the SQS adapter sends in
# parallel (a recurring job's read is chunked by 100). The deadline is checked between groups.
HANDOVER_GROUP = 160
# Job statuses whose chain timers are handed over. A completed job's timer of its own
# generation still holds its last rounds: a job resumed after its end (Dispatcher.arm) is
# completed before its pending timer is swept.
_CHAINED = (JobStatus.SCHEDULED, JobStatus.COMPLETED)
# Tenants whose chains fail with a passing store error, none going through, that make an outage.
OUTAGE_TENANTS = 3


class Tally(Protocol):
    """What a hand-over counts (the sweep's report, SweepReport). Internal to the sweeper, not
    a port: it stays here, out of duetime.ports."""

    timers_read: int
    messages_sent: int
    skipped: int
    jobs_completed: int


@dataclass(frozen=True)
class Handed:
    """What a hand-over dealt with: its first `done` timers, those among them that failed on
    their own (`failed`, with the reason: the caller parks them) or for a store's passing
    failure (`passing`: parked without counting an attempt), and, if it stopped because SQS
    could not take requests, that error (`unavailable`: the caller stops there)."""

    done: int
    failed: list[tuple[Timer, str]]
    unavailable: QueueUnavailable | None = None
    passing: list[tuple[Timer, str]] = field(default_factory=list)


class HandOver:
    """The sweeper's hand-over of due timers (one-offs as messages, chains planned on)."""

    def __init__(
        self,
        jobs: JobStore,
        timers: TimerStore,
        queue: JobQueue,
        settings: Settings,
        *,
        clock: Callable[[], int],
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """`sleep`: hold each send to its release moment (duetime.services.release) on this
        clock; None sends at once (tests on a clock that does not run)."""
        self._jobs = jobs
        self._released = None if sleep is None else ReleasedSender(queue, clock=clock, sleep=sleep)
        self._queue: RunSender = self._released or queue
        self._clock = clock
        self._dispatcher = Dispatcher(
            jobs, timers, self._queue, settings, clock=clock, plan_ahead=True
        )

    def hold_at_most(self, ms: int | None) -> None:
        """Bound this thread's holds over its sends (ReleasedSender.hold_at_most)."""
        if self._released is not None:
            self._released.hold_at_most(ms)

    def hand_over(self, timers: Sequence[Timer], deadline: int, report: Tally) -> Handed:
        """Send `timers` to SQS in order, a group at a time, and continue the chains of
        recurring jobs. Returns how many were dealt with (a prefix: the rest met the deadline,
        or SQS could not take requests) and those among them whose hand-over failed on its
        own, or for a store's passing failure, with the reason.

        A group whose hand-over raises is split in halves, each tried again, until the
        failing timers are alone (by tenant, for a store's passing failure: see above). Work
        done by a failed attempt (a chain's next timer, sent messages) is repeated by the
        next: the same keys and run ids absorb it."""
        groups = deque(
            timers[i : i + HANDOVER_GROUP] for i in range(0, len(timers), HANDOVER_GROUP)
        )
        done = 0  # the page's prefix dealt with (its last timer is the sweep's watermark)
        # The timers dealt with: a tenant's part goes ahead of the page's order, so a stop
        # after it must not count the timers it jumped (until 2026-11-30 it did, and the
        # watermark moved past chains never handed over: an outside fault audit).
        dealt: set[str] = set()
        failed: list[tuple[Timer, str]] = []
        passing: list[tuple[Timer, str]] = []
        chain_through = False  # a chain went through: the table answers
        down: dict[str, str] = {}  # tenants whose chains failed with a passing store error
        while groups:
            if done and self._clock() > deadline:
                break
            group = groups.popleft()
            try:
                if len(down) >= OUTAGE_TENANTS and not chain_through:
                    # The table is down: the chains are parked untried, the one-offs go out.
                    self._dispatch([t for t in group if t.message()], report)
                    why = next(iter(down.values()))
                    reason = f"not tried: the store failed for {len(down)} tenants ({why})"
                    passing += [(t, reason) for t in group if not t.message()]
                else:
                    self._dispatch(group, report)
                    chain_through = chain_through or any(not t.message() for t in group)
            except QueueUnavailable as exc:
                # SQS is down or throttling, not failing these timers: no timer is to blame,
                # none is parked; the caller stops and the next sweep resumes here.
                return _handed(timers, done, failed, passing, exc)
            except Exception as exc:
                if not (isinstance(exc, StoreError) and exc.transient):
                    self._split(groups, group, failed, exc)
                    if len(group) > 1:
                        continue
                elif len(parts := _by_tenant(group)) > 1:  # each tenant's chains on their own
                    groups.extendleft(reversed(parts))
                    continue
                else:  # one tenant's chains (its jobs partition throttled, or the table down)
                    logger.warning(
                        "handing a tenant's timers over failed: its store is throttled or down",
                        extra={"tenant": group[0].tenant, "timers": len(group)},
                        exc_info=exc,
                    )
                    reason = down.setdefault(group[0].tenant, f"{type(exc).__name__}: {exc}")
                    passing += [(t, reason) for t in group]
            dealt.update(t.sort_key for t in group)
            while done < len(timers) and timers[done].sort_key in dealt:
                done += 1
        return _handed(timers, done, failed, passing)

    @staticmethod
    def _split(
        groups: deque[Sequence[Timer]],
        group: Sequence[Timer],
        failed: list[tuple[Timer, str]],
        exc: Exception,
    ) -> None:
        """A group that failed: its halves are tried again; a timer alone failed on its own."""
        if len(group) > 1:
            half = len(group) // 2
            groups.extendleft([group[half:], group[:half]])
            return
        logger.warning(
            "handing a timer over failed",
            extra={"tenant": group[0].tenant, "job_id": group[0].job_id, "due_ms": group[0].due_ms},
            exc_info=exc,
        )
        failed.append((group[0], f"{type(exc).__name__}: {exc}"))

    def _dispatch(self, timers: Sequence[Timer], report: Tally) -> None:
        """One-off timers carry their queue: they become messages without reading the job
        (the worker reads it, and drops the run of a job cancelled meanwhile). A recurring
        job's timer needs the job, to plan its chain."""
        report.timers_read += len(timers)
        now = self._clock()
        messages = [(m, delay_seconds(m.visible_ms, now)) for t in timers if (m := t.message())]
        chains = [t for t in timers if t.message() is None]
        if messages:
            self._queue.send(messages)
            report.messages_sent += len(messages)
        if not chains:
            return
        if any(not t.tenant for t in chains):  # an item salvaged without its tenant: parked
            raise ValueError("the timer item names no tenant: its job cannot be read")
        jobs = self._jobs.get_many([(t.tenant, t.job_id) for t in chains])
        due: list[tuple[Job, int]] = []
        for timer in chains:
            job = jobs.get(timer.job_id)
            if job is None or job.tenant != timer.tenant or job.status not in _CHAINED:
                report.skipped += 1  # cancelled, paused, or never acknowledged
            elif job.generation != timer.generation:
                report.skipped += 1  # a chain from before a pause/resume
            else:
                due.append((job, timer.due_ms))
        if due:
            dispatched = self._dispatcher.dispatch(due)
            report.messages_sent += dispatched.messages
            report.skipped += dispatched.skipped
            report.jobs_completed += dispatched.completed


def _handed(
    timers: Sequence[Timer],
    done: int,
    failed: list[tuple[Timer, str]],
    passing: list[tuple[Timer, str]],
    unavailable: QueueUnavailable | None = None,
) -> Handed:
    """What a hand-over dealt with, its page's first `done` timers: a timer to park past them
    is met again by the next sweep, and parked then (parked now too, it would be twice)."""
    kept = {t.sort_key for t in timers[:done]}
    return Handed(
        done,
        [(t, why) for t, why in failed if t.sort_key in kept],
        unavailable,
        [(t, why) for t, why in passing if t.sort_key in kept],
    )


def _by_tenant(group: Sequence[Timer]) -> list[list[Timer]]:
    """The one-offs (they read no job), then each tenant's chains, in order."""
    parts: dict[str | None, list[Timer]] = {None: []}
    for timer in group:
        parts.setdefault(None if timer.message() else timer.tenant, []).append(timer)
    return [part for part in parts.values() if part]
