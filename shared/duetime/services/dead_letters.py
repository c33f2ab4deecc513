"""Dead runs: the runs parked in the dead-letter queues, read, and sent back (`duetime dlq`).

A run reaches a DLQ in one of two ways (docs/reliability.md): a worker put it there after its
last attempt failed, with the reason as the `duetime-reason` message attribute; or the queue's
redrive policy moved it after `maxReceiveCount` receives that never finished (a worker died on
it every time, or its body could not be read), with no reason.

`read` lists the DLQs without consuming them: SQS cannot peek, so each message is received
with a short visibility timeout and made visible again at once.

`redrive` sends runs back to their job's queue (its runtime and priority now) as
**one more attempt**: attempt numbers continue (n + 1), they are not reset. The worker's claim
rule lets a run be claimed only by an attempt newer than the one recorded, so a reset attempt
would be dropped as a duplicate; continuing keeps the run record's attempt history truthful.
A run that failed is first reopened (its record goes from `failed` to `retrying`); if the
extra attempt fails too, the run returns to the DLQ with its new reason. A message is deleted
from the DLQ only after the queue accepted the new one: a crash in between leaves a copy in the
DLQ (which a later redrive skips or runs once more, the claim absorbing the rest), never
neither.

`delete` removes the named messages for good (a dead run an operator has looked at and will not
send back: its job is gone, its body is no run message). Its run record stays as it ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from duetime.domain.ids import run_id
from duetime.domain.jobs import JobStatus, Priority, Runtime
from duetime.domain.messages import (
    MessageAuth,
    RunMessage,
    UnauthenticatedMessage,
    UnverifiedSignature,
)
from duetime.domain.runs import CLOCK_SKEW_ALLOWANCE_MS, RunOutcome, RunStatus
from duetime.ports import DeadLetter, DeadLetters, JobQueue, JobStore, RunStore
from duetime.services.dropped import ABANDONED_ERROR
from duetime.settings import queue_key

QUEUE_KEYS = [queue_key(r, p) for r in Runtime for p in Priority]
# How long a read or redriven message stays hidden while the service works on it.
HOLD_SECONDS = 60


@dataclass(frozen=True)
class DeadRun:
    """One DLQ message, read."""

    letter: DeadLetter
    message: RunMessage | None  # None: the body is not a run message
    # Signed by duetime (duetime.domain.messages.MessageAuth): may be sent back.
    signed: bool = False

    @property
    def queue(self) -> str:
        """The queue key, e.g. lambda/high."""
        return self.letter.queue

    @property
    def run_id(self) -> str | None:
        return run_id(self.message.job_id, self.message.scheduled_ms) if self.message else None


@dataclass
class RedriveReport:
    redriven: list[tuple[DeadRun, int, str]]  # with the new attempt and the queue it went to
    skipped: list[tuple[DeadRun, str]]
    deferred: list[DeadRun] = field(default_factory=list)  # wanted, left by the limit


class DeadRuns:
    """Reads the dead-letter queues and redrives their runs; see the module docstring."""

    def __init__(
        self,
        jobs: JobStore,
        runs: RunStore,
        queue: JobQueue,
        letters: DeadLetters,
        auth: MessageAuth,
    ) -> None:
        self._jobs = jobs
        self._runs = runs
        self._queue = queue
        self._letters = letters
        self._auth = auth

    def read(self, queues: Sequence[str], limit: int) -> tuple[list[DeadRun], int]:
        """Up to `limit` dead runs of the queues, oldest first, and about how many there are:
        up to `limit` read from each queue, the oldest of them kept (SQS's own order within a
        queue is best effort; until 2026-11-30 the first queues filled the limit)."""
        dead: list[DeadRun] = []
        total = 0
        for key in queues:
            count = self._letters.approximate_count(key)
            total += count
            held: list[DeadLetter] = []
            try:
                while len(held) < min(count, limit):
                    batch = self._letters.receive(key, min(10, limit - len(held)), HOLD_SECONDS)
                    if not batch:
                        break
                    held += batch
                    dead += [self._dead_run(letter) for letter in batch]
            finally:
                self._letters.release(held)
        dead.sort(key=lambda d: d.letter.sent_ms)
        return dead[:limit], total

    def redrive(
        self,
        queues: Sequence[str],
        *,
        run_ids: set[str] | None,
        limit: int | None,
        now_ms: int,
        report: RedriveReport | None = None,
    ) -> RedriveReport:
        """Send the selected dead runs back; see the module docstring for the rules. `report`,
        filled as it goes, keeps what was done when an error (or Ctrl-C) stops it."""
        report = RedriveReport([], []) if report is None else report
        left: list[DeadLetter] = []  # read from the batch in hand, not yet dealt with
        for key in queues:
            # What is there now: reading stops there (no trailing long poll on an emptied queue).
            budget = self._letters.approximate_count(key)
            held: list[DeadLetter] = []  # read and not redriven: made visible again at the end
            try:
                while budget > 0 and (limit is None or len(report.redriven) < limit):
                    batch = self._letters.receive(key, 10, HOLD_SECONDS)
                    if not batch:
                        break
                    budget -= len(batch)
                    left = list(batch)
                    while left:
                        letter = left[0]
                        dead = self._dead_run(letter)
                        unwanted = run_ids is not None and dead.run_id not in run_ids
                        if unwanted or (limit is not None and len(report.redriven) >= limit):
                            held.append(letter)
                            if not unwanted:
                                report.deferred.append(dead)
                        else:
                            why = self._redrive_one(dead, now_ms, report)
                            if why is not None:
                                report.skipped.append((dead, why))
                                held.append(letter)
                        left.pop(0)
            finally:
                # Not sent back, the one that failed included: visible in the DLQ again at
                # once (the rest of its batch too: it was hidden for HOLD_SECONDS).
                self._letters.release(held + left)
        return report

    def delete(self, queues: Sequence[str], ids: set[str]) -> list[DeadRun]:
        """Delete from the DLQs the messages whose run id or SQS message id is in `ids`; the
        dead runs deleted (a run id twice in a DLQ: both copies)."""
        deleted: list[DeadRun] = []
        for key in queues:
            budget = self._letters.approximate_count(key)
            held: list[DeadLetter] = []
            try:
                while budget > 0:
                    batch = self._letters.receive(key, 10, HOLD_SECONDS)
                    if not batch:
                        break
                    budget -= len(batch)
                    for letter in batch:
                        dead = self._dead_run(letter)
                        if {dead.run_id, letter.message_id} & ids:
                            self._letters.delete(letter)
                            deleted.append(dead)
                        else:
                            held.append(letter)
            finally:
                self._letters.release(held)
        return deleted

    def _redrive_one(self, dead: DeadRun, now_ms: int, report: RedriveReport) -> str | None:
        """Redrive one message; the reason it was skipped, or None when it was sent back."""
        message = dead.message
        if message is None:
            return "the body is not a run message"
        if not dead.signed:
            # Not written by duetime (or signed with a retired key): sending it back would sign
            # it, and a worker would run whatever job and tenant it names.
            return "the message is not signed by duetime: never sent back"
        job = self._jobs.get(message.tenant, message.job_id)
        if job is None or job.status in (JobStatus.CANCELLED, JobStatus.PAUSED):
            # The worker drops runs of cancelled or paused jobs: sending it would do nothing.
            return f"job is {job.status.value if job else 'gone'}"
        run = self._runs.get(message.job_id, message.scheduled_ms)
        reopened_here = False  # this redrive reopened the run
        if run is not None and run.status == RunStatus.SUCCEEDED:
            if not job.has_dependents:
                return "the run already succeeded"
            # Its `after` jobs' runs may never have gone out (it came here while they could
            # not be sent): sent back as it was, the worker finds the run finished and sends
            # them, their run ids keeping them once (until 2026-11-30 it was skipped, and they
            # were lost; found by an outside audit).
            self._send_back(dead, replace(message, generation=job.generation), report)
            return None
        if run is not None and run.status == RunStatus.RUNNING:
            # Moved by the redrive policy while its attempt is recorded as running: a worker
            # died on it (or, with a live lease, is running it now: leave it).
            if run.lease is not None and run.lease.until_ms + CLOCK_SKEW_ALLOWANCE_MS > now_ms:
                return "the run is running now"
            reopened = self._runs.finish(
                run, RunOutcome(RunStatus.RETRYING, now_ms, ABANDONED_ERROR)
            )
            if reopened is None:
                return "the run changed meanwhile; try again"
            run, reopened_here = reopened, True
        if run is not None and run.status == RunStatus.FAILED:
            # Reopen: a failed run is final for the claim rule; `retrying` admits attempt n + 1.
            reopened = self._runs.finish(
                run, RunOutcome(RunStatus.RETRYING, run.finished_ms or now_ms, run.error)
            )
            if reopened is None:
                return "the run changed meanwhile; try again"
            run, reopened_here = reopened, True
        # The next attempt after the record's; one that never reached its claim (no record, or
        # a retry newer than it) keeps its number (it was "attempt 2 of 1"; an outside audit).
        last = run.attempt if run is not None else 0
        attempt = message.attempt if message.attempt > last else last + 1
        # Sent back for the job as it is now: a redrive is asked for after any pause, and goes
        # by the job's queue (a job moved to fargate for a longer timeout could never run on
        # the lambda queue it died on: found by an outside audit) and staging.
        again = replace(
            message,
            attempt=attempt,
            due_ms=now_ms,
            generation=job.generation,
            runtime=job.spec.runtime,
            priority=job.spec.priority,
            stage_ms=job.spec.stage_seconds * 1000,
            redriven=True,  # beside an overlap gate's holder, claimed before or not
        )
        try:
            self._send_back(dead, again, report)
        except BaseException:  # (a Ctrl-C too: a copy it sent finds the run failed, and drops)
            if run is not None and reopened_here:  # not sent back: `failed` again, as the DLQ says
                # (until 2026-12-01 it stayed `retrying`, no retry coming; a fault audit)
                ended = run.attempts[-1].finished_ms if run.attempts else None
                self._runs.finish(run, RunOutcome(RunStatus.FAILED, ended or now_ms, run.error))
            raise
        return None

    def _send_back(self, dead: DeadRun, again: RunMessage, report: RedriveReport) -> None:
        self._queue.send([(again, 0)])
        self._letters.delete(dead.letter)  # only now: the copy is in the source queue
        report.redriven.append((dead, again.attempt, queue_key(again.runtime, again.priority)))

    def _dead_run(self, letter: DeadLetter) -> DeadRun:
        try:
            return DeadRun(letter, self._auth.open(letter.body), signed=True)
        except (UnauthenticatedMessage, UnverifiedSignature) as exc:  # (not sent back)
            return DeadRun(letter, exc.message)
        except (ValueError, KeyError, TypeError):
            return DeadRun(letter, None)
