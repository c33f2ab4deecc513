"""Timers: the design's central idea, a pending occurrence waiting in its minute's partition.

duetime never scans its jobs for what is due. An occurrence that falls due after the minutes a
sweep may already be reading (the current one and the lookahead; a sooner one goes straight to
SQS with a delay) is written as a **timer**: one pending occurrence of one job, stored in the
(bucket minute, shard) partition of the timers table it falls due in. The bucket is the minute
of its due instant (`minute_of`), the shard crc32(job id) mod N (`shard_of`), so a busy minute
is spread over N partitions, each taking its own writes and swept on its own. Once a minute
every shard's sweep reads only the buckets that fall due, in due order, and hands their timers
over to SQS as run messages (duetime.domain.messages) delayed to the second; a worker claims
and runs each.

- A one-off job's timer carries its queue (runtime and priority): `Timer.message()` turns it
  into a run message without reading the job. A recurring job has one timer at a time, its
  next occurrence: the sweep that hands it over reads the job, enqueues what falls before the
  horizon and writes the chain's next timer (duetime.services.dispatch).
- A catch-up continuation (duetime.domain.planning), already due when written, is stored in
  the first bucket the next sweep of its shard reads instead of its own minute.
- The job's generation (bumped by pause and resume) is part of the timer's key: a timer of an
  older generation sits beside the newer one and is dropped when swept.
- Whoever writes a timer reads its shard's horizon afterwards and sends the occurrence itself
  if a sweep already reached the bucket: no timer slips between sweeps.

Keys (one DynamoDB table, duetime.adapters.dynamodb.timer_items): partition
`<yyyymmddHHMM>#<shard>` (`timer_partition`), sort key
`<due epoch ms, 13 digits>#<job id>#<generation>` (`timer_sort_key`), so reading a partition's
due timers is one range query.

The sweep's bookkeeping belongs to the same design: `PartitionState` (per partition: lease and
watermark), `SweepState` (per shard: cursor and horizon) and `StuckTimer` (a timer whose
hand-over failed on its own). docs/architecture.md tells the whole story.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.timeutil import MINUTE_MS


def minute_of(ms: int) -> int:
    """The bucket minute (minutes since the epoch) an instant falls in."""
    return ms // MINUTE_MS


def bucket_name(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y%m%d%H%M")


def timer_partition(minute: int, shard: int) -> str:
    """Timer partition key: `<yyyymmddHHMM>#<shard>`."""
    return f"{bucket_name(minute)}#{shard}"


def timer_sort_key(due_ms: int, job_id: str, generation: int) -> str:
    """Timer sort key: `<due epoch ms, 13 digits>#<job id>#<generation>`, so a range query is
    a time range. The generation is part of the key: a timer written for an older generation
    of a job (a chain from before a pause and resume) sits beside the newer one and is
    dropped when swept; it can never replace it."""
    return f"{due_ms:013d}#{job_id}#{generation}"


def parse_timer_sort_key(key: str) -> tuple[int, str, int | None]:
    """(due ms, job id, generation) of a timer sort key; generation None for a key written
    before the generation was part of it."""
    due, _, rest = key.partition("#")
    job_id, sep, generation = rest.partition("#")
    return int(due), job_id, int(generation) if sep else None


def shard_of(job_id: str, shards: int) -> int:
    """The shard of a job's timers, out of `shards`: crc32 of the job id, so a busy minute
    spreads evenly."""
    return zlib.crc32(job_id.encode()) % shards


@dataclass(frozen=True)
class Timer:
    """A pending occurrence, stored in a (bucket minute, shard) partition of the timers table.

    The bucket is the minute the occurrence falls due in, except for a catch-up continuation
    (duetime.domain.planning): an occurrence already in the past, stored in the first bucket
    the next sweep of its shard reads."""

    tenant: str
    job_id: str
    due_ms: int
    generation: int = 0
    bucket_minute: int | None = None  # None: minute_of(due_ms)
    # The size of the job item (bytes) when the timer was written: sweeps cut their pages at
    # a memory budget before reading the jobs. An estimate, not part of the timer's identity.
    job_bytes: int = field(default=0, compare=False)
    # A one-off job's queue: its timer becomes a message without the sweep reading the job
    # (the worker reads it, and drops the run of a cancelled job). None: a recurring job's
    # timer, whose sweep reads the job to plan the chain.
    runtime: Runtime | None = None
    priority: Priority | None = None
    # A one-off's jitter (Job.due_ms - due_ms): its message is due that long after the
    # instant, and its bucket is the minute of the jittered instant (duetime.services.dispatch).
    jitter_ms: int = field(default=0, compare=False)
    # A one-off's staging (its job's stage_seconds, in ms): its message carries it.
    stage_ms: int = field(default=0, compare=False)

    @property
    def sort_key(self) -> str:
        return timer_sort_key(self.due_ms, self.job_id, self.generation)

    @property
    def bucket(self) -> int:
        return minute_of(self.due_ms) if self.bucket_minute is None else self.bucket_minute

    def message(self) -> RunMessage | None:
        """The run message of a one-off timer (None: the job must be read first)."""
        if self.runtime is None or self.priority is None:
            return None
        return RunMessage(
            self.tenant,
            self.job_id,
            self.due_ms,
            1,
            self.due_ms + self.jitter_ms,
            self.runtime,
            self.priority,
            self.generation,
            stage_ms=self.stage_ms,
        )


@dataclass(frozen=True)
class PartitionState:
    """Sweep progress of one (bucket minute, shard) partition."""

    minute: int
    shard: int
    watermark: str | None = None  # sort key of the last timer handed to SQS
    complete: bool = False  # the whole minute was swept
    owner: str | None = None
    lease_until_ms: int = 0
    # Holders that died (their lease ran out unreleased) since the partition last made a
    # clean step: a sweep that keeps dying on one timer is found by shrinking its pages.
    stalls: int = 0


@dataclass(frozen=True)
class SweepState:
    """The sweep progress of one shard."""

    cursor_minute: int | None  # oldest bucket minute that may still hold unswept timers
    horizon_minute: int | None  # newest bucket minute any sweep of the shard has started reading


@dataclass(frozen=True)
class StuckTimer:
    """A timer whose hand-over to SQS failed on its own (not with the rest of its page).

    It is moved out of its partition's way (the partition's sweep moves past it) and retried
    by later sweeps of its shard with backoff; after `MAX_HANDOVER_ATTEMPTS` (see
    duetime.services.stuck) it is quarantined: kept, listed by `duetime timers stuck`, retried
    only on request."""

    timer: Timer
    shard: int
    attempts: int
    reason: str
    first_failed_ms: int
    last_failed_ms: int
    next_attempt_ms: int | None  # None: quarantined

    @property
    def quarantined(self) -> bool:
        return self.next_attempt_ms is None
