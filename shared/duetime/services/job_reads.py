"""Where a run's job is read: the reads of runs that wake together, merged.

Before its claim, every run reads its job (the cancel check, the target, the payload) and the
ids of the jobs that run after it (duetime.services.dependencies): its job item, and the
dependents' item only for a job marked as having dependents (`JobStore.get_with_dependents`).
The runs of a burst wake on the same instant, each on its own thread (the records of a Lambda
batch, the Fargate worker's slots), so their reads are merged: one read is in flight at a time,
and the first run to ask waits `linger` (2 ms) for the others before it reads for all of them
(one BatchGetItem per 100 jobs, and one for the marked jobs' dependents); the runs that ask
while a read is in flight wait for the next. The records of a batch start on their threads
within a millisecond or two of each other: without the linger, each would find the previous
read done and read alone. Each run still reads its job when it wakes (its claim lead before
its instant), so a cancel acknowledged before that is seen (duetime.services.execute).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from duetime.domain.jobs import Job, JobStatus
from duetime.domain.messages import RunMessage
from duetime.ports import JobStore, StoreError

Key = tuple[str, str]  # (tenant, job id)
Found = tuple[Job, tuple[str, ...]]  # a job and the ids of its dependents


@dataclass
class _Read:
    keys: list[Key] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    found: dict[Key, Found] | None = None  # None until the read succeeded
    error: str = "the read was interrupted"
    led: bool = False
    alone: bool = False  # it failed on an item: each of its runs reads its own job alone
    passing: bool = True  # it failed as a passing StoreError (a throttle, no answer)


def undecodable(exc: BaseException) -> bool:
    """Whether a read failed on an item that does not decode (a corrupted attribute), not on
    the store: throttling and timeouts (the SDK's errors, StoreError) are the store's, and a
    read of each key alone would only multiply them (found by review)."""
    decoding = ValueError | KeyError | TypeError | ArithmeticError
    return isinstance(exc, decoding) and not isinstance(exc, StoreError)


# How long the first run to ask waits for the others (a read takes a few milliseconds).
LINGER_SECONDS = 0.002


class JobReads:
    def __init__(
        self,
        jobs: JobStore,
        *,
        linger: float = LINGER_SECONDS,
    ) -> None:
        self._jobs = jobs
        self._linger = linger
        self._lock = threading.Lock()  # guards _next
        self._in_flight = threading.Lock()  # held by the read being made
        self._next = _Read()  # the read that requests join

    def get(self, tenant: str, job_id: str) -> Found | None:
        """The job (None when it does not exist) and its dependents' ids."""
        key = (tenant, job_id)
        with self._lock:
            read = self._next
            read.keys.append(key)
            leads, read.led = not read.led, True
        if leads:
            # The first to ask makes the read, once the one in flight is done; whoever asks
            # while it waits joins it.
            with self._in_flight:
                if self._linger > 0:
                    time.sleep(self._linger)
                with self._lock:
                    self._next = _Read()
                try:
                    read.found = self._jobs.get_with_dependents(read.keys)
                except Exception as exc:
                    read.error = f"{type(exc).__name__}: {exc}"
                    read.passing = isinstance(exc, StoreError) and exc.transient
                    read.alone = undecodable(exc) and len(set(read.keys)) > 1
                    if not read.alone:
                        raise
                finally:
                    read.done.set()
        else:
            read.done.wait()
        if read.found is not None:
            return read.found.get(key)
        if read.alone:
            # An item that does not decode failed the read of all: each run reads its own job
            # alone, so only that job's runs fail, not their neighbours in the batch.
            return self._jobs.get_with_dependents([key]).get(key)
        # Every run of a failed read fails as its own read would (passing or not: its message
        # comes back as the leader's does; until 2026-12-01 always passing).
        raise StoreError(f"reading job {job_id} failed: {read.error}", transient=read.passing)


def may_start(found: Found | None, message: RunMessage) -> Found | str:
    """The job as read (and its dependents) if the occurrence of `message` may start, else
    why it must not.

    Only a cancel or a pause stops a run that was handed over (a recurring job reaching its
    end_at is marked completed while its last occurrences are still on their way: those run),
    and a pause or re-arm made after the message was sent: a pause drops what it stopped, even
    once resumed (the resumed chain sends its own runs, from the resume on). A one-off re-armed
    on the same instant keeps a retry (duetime.services.execute carries it on)."""
    if found is None:
        return "the job is missing"
    job = found[0]
    if job.status in (JobStatus.CANCELLED, JobStatus.PAUSED):
        return f"the job is {job.status}"
    if (
        message.generation is not None
        and message.generation < job.generation
        and (job.spec.recurring or job.next_due_ms != message.scheduled_ms or message.attempt == 1)
    ):
        return "the job was paused or changed since"
    return found
