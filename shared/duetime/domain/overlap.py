"""Overlap policy of a recurring job: what an occurrence does while another run of its job is
still active (`allow`, `skip`, `buffer_one`), and the gate that decides it.

Under `skip` and `buffer_one` each job has one small gate record (`Gate`) beside it: the
occurrence that holds the job (`holder_ms`, since `since_ms`) and the one waiting for it
(`buffered_ms`, `buffer_one` only). Whether the holder is still active is read from the
holder's run record (one get, never a scan of the job's runs) and bounded in time, so a gate
whose holder died, or whose messages a pause dropped, frees itself (`holder_active`).

`admit` is the pure rule a worker applies before claiming an occurrence, and `release` the
one it applies once its run has finished; the stores write the result with a compare-and-set
on the gate's version.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from duetime.domain.runs import Run, RunStatus


class Overlap(StrEnum):
    ALLOW = "allow"  # every occurrence runs, whatever else runs (the default)
    SKIP = "skip"  # an occurrence while a run is active is recorded `skipped`
    BUFFER_ONE = "buffer_one"  # at most one waits (`buffered`) and starts when it is free


@dataclass(frozen=True)
class Gate:
    holder_ms: int | None = None  # the occurrence that holds the job
    since_ms: int = 0  # when it took (or was handed) the gate
    buffered_ms: int | None = None  # the occurrence waiting for it (buffer_one)
    version: int = 0  # 0: never stored; stores compare-and-set on it
    generation: int | None = None  # the job's generation when written (None: an older gate)
    # The job's generation when the holder took the gate or was handed it (None: `generation`,
    # as written before 2026-12-01, when buffering behind an older holder made it current).
    holder_generation: int | None = None
    # The holder is a run claimed under `allow`, pinned by a PATCH to `skip`: it releases
    # nothing (duetime.services.overlap: `hold`, `unpin`).
    pinned: bool = False

    @property
    def held_at(self) -> int | None:
        """The job's generation the holder holds the gate at."""
        return self.generation if self.holder_generation is None else self.holder_generation


def stale_buffered(gate: Gate, generation: int) -> bool:
    """Whether the gate's buffered occurrence is from before a pause, resume or re-arming
    change of the job (now at `generation`): dropped with the rest, it never runs (until
    2026-11-30 it ran after the resume, or was handed the gate and dropped, leaving a holder
    that kept the resumed job's occurrences out for minutes; found by an outside audit)."""
    return (
        gate.buffered_ms is not None
        and gate.generation is not None
        and gate.generation < generation
    )


class Admission(StrEnum):
    RUN = "run"  # claim and execute this occurrence
    SKIP = "skip"  # record it `skipped`, do not run it
    BUFFER = "buffer"  # record it `buffered`: the holder's release starts it
    DUPLICATE = "duplicate"  # this occurrence is already the buffered one: drop the copy


@dataclass(frozen=True)
class Decision:
    admission: Admission
    gate: Gate  # the gate to write (unchanged when nothing changes)
    # A buffered occurrence that must be (re)started now: its holder finished without
    # handing over (it died between its outcome and its release).
    start_ms: int | None = None


def holder_active(
    run: Run | None,
    gate: Gate,
    now_ms: int,
    *,
    grace_ms: int,
    max_backoff_ms: int,
    generation: int | None = None,
) -> bool:
    """Whether the gate's holder still counts as active (the job now at `generation`).

    - a gate from before a pause, resume or re-arming change (`stale_buffered`): only while
      it runs (as below); its retry or its hand-over message is dropped by that change.

    - running: while its lease (plus `grace_ms`, the skew allowance) lasts; a holder that died
      is reclaimed by its own redelivery, which the gate admits (it is the holder).
    - retrying: until its retry is due and claimed (`max_backoff_ms` after the attempt ended,
      plus `grace_ms`: callers pass the longest a retry can wait, a target's Retry-After
      included, duetime.domain.retry.longest_retry_wait_ms; until 2026-11-30 the backoff's
      cap, and a retry held back longer found the next occurrence holding the gate); a retry
      dropped by a pause frees the gate then.
    - no record yet, or `buffered` (handed the gate, its message on the way): for `grace_ms`
      after `since_ms`.
    - succeeded, failed, skipped: not active.
    """
    stale = generation is not None and gate.held_at is not None and gate.held_at < generation
    if stale and (run is None or run.status != RunStatus.RUNNING):
        return False
    if run is None or run.status == RunStatus.BUFFERED:
        return now_ms < gate.since_ms + grace_ms
    if run.status == RunStatus.RUNNING:
        until = run.lease.until_ms if run.lease is not None else gate.since_ms
        return now_ms < until + grace_ms
    if run.status == RunStatus.RETRYING:
        ended = run.finished_ms if run.finished_ms is not None else gate.since_ms
        return now_ms < ended + max_backoff_ms + grace_ms
    return False


def admit(policy: Overlap, gate: Gate, scheduled_ms: int, active: bool, now_ms: int) -> Decision:
    """The decision for occurrence `scheduled_ms` given the gate and whether its holder is
    active (`holder_active`; ignored when this occurrence is the holder)."""
    if gate.holder_ms == scheduled_ms:
        return Decision(Admission.RUN, gate)  # a retry or a redelivery of the holder
    if gate.holder_ms is None or not active:
        waiting = gate.buffered_ms
        if waiting is None or waiting == scheduled_ms:
            return Decision(Admission.RUN, Gate(scheduled_ms, now_ms, None, gate.version))
        # The buffered occurrence goes first; this one waits behind it (or is skipped).
        if policy == Overlap.BUFFER_ONE:
            handed = Gate(waiting, now_ms, scheduled_ms, gate.version)
            return Decision(Admission.BUFFER, handed, start_ms=waiting)
        return Decision(Admission.SKIP, Gate(waiting, now_ms, None, gate.version), waiting)
    if policy == Overlap.BUFFER_ONE:
        if gate.buffered_ms is None:
            return Decision(
                Admission.BUFFER,
                Gate(gate.holder_ms, gate.since_ms, scheduled_ms, gate.version),
            )
        if gate.buffered_ms == scheduled_ms:
            return Decision(Admission.DUPLICATE, gate)
    return Decision(Admission.SKIP, gate)


def late_copy(decision: Decision, gate: Gate) -> Decision:
    """The decision for a late copy of an occurrence that already ran (its run record is
    past `buffered`) where `decision` said skip or buffer: it takes no place at the gate (a
    buffered place would start it again and turn a real occurrence away) and is not recorded;
    a hand-over the decision makes (`start_ms`: the holder died) still happens."""
    if decision.start_ms is None:
        return Decision(Admission.DUPLICATE, gate)
    return Decision(
        Admission.DUPLICATE, replace(decision.gate, buffered_ms=None), decision.start_ms
    )


def release(gate: Gate, scheduled_ms: int, now_ms: int) -> Gate | None:
    """The gate after occurrence `scheduled_ms` finished (succeeded or failed for good): the
    buffered occurrence, if any, becomes the holder (its message is sent before this is
    written). None when `scheduled_ms` no longer holds the gate: nothing to release."""
    if gate.holder_ms != scheduled_ms:
        return None
    return Gate(gate.buffered_ms, now_ms, None, gate.version)
