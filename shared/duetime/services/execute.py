"""The execution core shared by the Lambda worker and the Fargate worker.

For one delivery of one attempt of one run:
1. wait until the claim lead before the due instant (SQS may release a message up to a second
   early; Settings.claim_lead_ms, a second by default), or the job's staging if longer (a
   staged run's message is released that long ahead: docs/performance.md, "Staged runs");
2. drop it if the job was cancelled or paused (or deleted);
3. in a Lambda invocation, start only with time left for the job's timeout and the recording
   of its outcome (otherwise hand the message to another invocation, no attempt counted);
4. claim the run (a duplicate delivery of a claimed run does not execute the target again; an
   attempt whose holder was killed or died counts as a failed attempt, retried as any other);
5. on the due instant, execute the target within the job's timeout. Staging steps 2-4 before
   the instant takes their calls off a burst's start (docs/performance.md, "Staged claims"):
   a cancel, pause or update acknowledged before the claim stops the occurrence, one
   acknowledged later does not. A job with an overlap policy is claimed on its instant (its
   gate decides on what is running then). A claim written after the instant reads the job
   again: a change acknowledged between the two reads, so before the claim, withdraws it;
6. record the outcome; on failure send the retry (with backoff) or, after the last attempt,
   put the message on the DLQ with the reason. The follow-up message is sent *before* the
   outcome is recorded, so a crash in between can duplicate an attempt but never lose one;
7. once the run has finished for good, send the runs of its `after` jobs (services.
   dependencies), again on a duplicate delivery, so a crash in between loses no trigger.

What the result tells the worker (delete the message, or when it comes back): services.results.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from duetime.clock import wait_until
from duetime.domain.ids import run_id
from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.jobs import MAX_STAGE_SECONDS, RECORDING_MARGIN_SECONDS, Job
from duetime.domain.messages import (
    MessageAuth,
    RunMessage,
    UnauthenticatedMessage,
    delay_seconds,
    run_message,
)
from duetime.domain.retry import retry_delay_ms, should_retry
from duetime.domain.runs import (
    LEASE_MARGIN_MS,
    TERMINAL_RUN_STATUSES,
    ClaimOutcome,
    Lease,
    Run,
    RunClaim,
    RunOutcome,
    RunStatus,
    abandoned_end,
    earliest,
    started,
)
from duetime.observability import Metric, count, logger, milliseconds
from duetime.ports import Delivery, JobQueue, JobStore, RunStore, SecretsUnavailable, TargetRunner
from duetime.services.dependencies import Dependencies
from duetime.services.dropped import ABANDONED_ERROR, DroppedRuns
from duetime.services.job_reads import LINGER_SECONDS, Found, JobReads, may_start
from duetime.services.outcome import claim_landed, record_outcome, send_follow_up, withdraw_claim
from duetime.services.overlap import OverlapGuard, gated
from duetime.services.results import (
    Disposition,
    Result,
    after_the_lease,
    back_soon,
    dropped,
    soon,
)
from duetime.settings import Settings

# A message that arrives earlier than this (beyond its staging) is put back with a visibility
# timeout instead of holding a worker while it waits.
MAX_EARLY_WAIT_MS = 2_000
# Of the RECORDING_MARGIN_SECONDS a Lambda invocation keeps past a job's timeout, this much may
# go to the wait before the instant (an early message, a staged run): a job with the longest
# timeout the lambda runtime allows still starts, with the rest of the margin to record it.
PRE_START_ALLOWANCE_MS = MAX_EARLY_WAIT_MS + MAX_STAGE_SECONDS * 1000


# A retry that finds its attempt before still `running` comes back soon this many times (2,
# 4, 8 s: its holder is recording the outcome) before it waits for that attempt's lease.
RECORDING_RECEIVES = 3


class RunExecutor:
    def __init__(
        self,
        jobs: JobStore,
        runs: RunStore,
        queue: JobQueue,
        targets: TargetRunner,
        settings: Settings,
        *,
        clock: Callable[[], int],
        auth: MessageAuth,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        read_linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self._auth = auth  # a run message is run only if duetime signed it
        # Runs that wake together read their jobs together (real time: a linger of ~2 ms).
        self._reads = JobReads(jobs, linger=read_linger_seconds)
        # The read after a late claim does not linger: lingering, a batch's runs finished
        # together, and one crash caught them all unrecorded (docs/reliability.md).
        self._rereads = JobReads(jobs, linger=0)
        self._runs = runs
        self._record = partial(record_outcome, runs, clock=clock, sleep=sleep)  # a known outcome
        self._follow_up = partial(send_follow_up, queue, clock=clock, sleep=sleep)
        self._withdraw = partial(withdraw_claim, runs, clock=clock, sleep=sleep)
        self._landed = partial(claim_landed, runs, clock=clock, sleep=sleep)
        self._queue = queue
        self._targets = targets
        self._settings = settings
        self._clock = clock
        self._wait_until = partial(wait_until, clock=clock, sleep=sleep)
        self._jitter = jitter
        self._overlap = OverlapGuard(jobs, runs, queue, settings, clock=clock)
        self._dependencies = Dependencies(jobs, queue, clock=clock)
        self._dropped = DroppedRuns(
            runs,
            settings,
            clock=clock,
            after_the_lease=self._after_the_lease,
            finished=self._finished,
            overlap=self._overlap,
        )

    def handle(
        self,
        delivery: Delivery,
        *,
        remaining_ms: Callable[[], int] | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> Result:
        """`remaining_ms`: the time this invocation has left (Lambda's context); None where a
        run may take as long as its timeout (the Fargate worker). `stopping`: whether the
        worker is stopping (the Fargate worker's SIGTERM): a run not started yet is handed
        back (visibility 0, its claim withdrawn), not started in the stop's grace and then
        abandoned there (until 2026-11-30; an outside audit). An exception (a store call, say)
        is logged here with the run's keys and the delivery comes back soon; then it is raised
        (the worker loops logged it once the keys were gone, and no line carried the tenant,
        until 2026-11-30; an outside SRE audit)."""
        try:
            result = self._open(delivery, remaining_ms, stopping)
        except Exception as exc:
            logger.exception(
                "run processing failed",
                extra={"message_id": delivery.message_id, "receive_count": delivery.receive_count},
            )
            count(Metric.DELIVERIES_FAILED)
            back_soon(self._queue, delivery, exc)
            raise
        finally:
            logger.thread_safe_remove_keys(["tenant", "job_id", "run_id"])
        if result.soon:  # nothing else says when (an `after` job's run waited 90 minutes)
            back_soon(self._queue, delivery, result.cause)
        return result

    def _open(
        self,
        delivery: Delivery,
        remaining_ms: Callable[[], int] | None,
        stopping: Callable[[], bool] | None,
    ) -> Result:
        try:
            message = self._auth.open(delivery.body)
        except UnauthenticatedMessage as exc:
            # Not written by duetime (a target pointed at duetime's queue, say): never run,
            # whatever job and tenant it names; parked in the DLQ with the reason.
            logger.error("unauthenticated run message", extra={"message_id": delivery.message_id})
            count(Metric.MESSAGES_REFUSED)
            self._queue.send_dead(exc.message, f"refused: {exc}", signed=False)
            return Result(Disposition.DONE, f"refused: {exc}")
        except (ValueError, KeyError, TypeError) as exc:
            # Visible again at once: the redrive policy moves it to the DLQ after
            # maxReceiveCount deliveries, in seconds rather than visibility timeouts.
            logger.error("malformed message", extra={"message_id": delivery.message_id})
            self._queue.change_visibility(delivery, 0)
            return Result(Disposition.RETRY_LATER, f"malformed message: {exc}")
        # Thread-safe keys: the Lambda worker runs a batch's records on threads, the Fargate
        # worker several runs at once; each thread's log lines carry their own run's.
        logger.thread_safe_append_keys(
            tenant=message.tenant,
            job_id=message.job_id,
            run_id=run_id(message.job_id, message.scheduled_ms),
        )
        return self._handle(delivery, message, remaining_ms, stopping)

    def _handle(
        self,
        delivery: Delivery,
        message: RunMessage,
        remaining_ms: Callable[[], int] | None,
        stopping: Callable[[], bool] | None,
    ) -> Result:
        early = message.due_ms - self._clock()
        if early > MAX_EARLY_WAIT_MS + message.stage_ms:
            self._queue.change_visibility(
                delivery, delay_seconds(message.visible_ms, self._clock())
            )
            return Result(Disposition.RETRY_LATER, f"early by {early} ms")
        # The early wait: on Lambda, paid time (docs/performance.md, "Early wait"); the job is
        # read and the run claimed within its last claim_lead_ms (or its staging, if longer),
        # the target started after it.
        early_wait_ms = max(0, early)
        lead = max(self._settings.claim_lead_ms, message.stage_ms)
        if self._wait_until(message.due_ms - lead, stopping):
            return self._handed_back(delivery)
        found = self._reads.get(message.tenant, message.job_id)
        runnable = may_start(found, message)
        if isinstance(runnable, str):
            held = self._dropped.end(delivery, message, runnable, found)
            return held or dropped(f"dropped: {runnable}")
        job, dependents = runnable
        if message.generation is not None and message.generation < job.generation:
            # A one-off re-armed on the same instant keeps its run: the re-arm's first attempt
            # replaced the old one (its jitter, its lane), but a retry of the old generation
            # carries the run on (one sent by an attempt that was running during the update is
            # the only message that does; with the re-arm's, JobService._rearm, one claim makes
            # them one). It goes on as the job is now: its queue, its generation.
            carried = replace(
                run_message(job, message.scheduled_ms),
                attempt=message.attempt,
                due_ms=message.due_ms,
            )
            self._queue.send([(carried, delay_seconds(carried.visible_ms, self._clock()))])
            return Result(Disposition.DONE, "re-sent under the job's new settings")
        through_gate = gated(job.spec)
        if through_gate and self._wait_until(message.due_ms, stopping):
            return self._handed_back(delivery)
        ahead = max(0, message.due_ms - self._clock())
        needed = (
            job.spec.timeout_seconds * 1000
            + ahead
            + RECORDING_MARGIN_SECONDS * 1000
            - PRE_START_ALLOWANCE_MS
        )
        if remaining_ms is not None and remaining_ms() < needed:
            # This invocation would be killed before the outcome is recorded: another one
            # (with its whole timeout ahead) takes the message, which is visible again at once.
            self._queue.change_visibility(delivery, 0)
            return Result(Disposition.RETRY_LATER, "not enough time left in this invocation")
        if through_gate:
            grace = LEASE_MARGIN_MS + self._settings.clock_skew_allowance_seconds * 1000
            held = self._overlap.gate(delivery, job, message, grace)
            if held is not None:
                return held
        now = self._clock()
        start = max(now, message.due_ms)  # the attempt starts on the instant, or now if late
        claim = RunClaim(
            tenant=job.tenant,
            job_id=job.id,
            scheduled_ms=message.scheduled_ms,
            attempt=message.attempt,
            lease=Lease(
                delivery.message_id,
                delivery.receive_count,
                start + job.spec.timeout_seconds * 1000 + LEASE_MARGIN_MS,
            ),
            now_ms=start,
            lateness_ms=max(0, now - message.due_ms),
            # The hot window starts when the run happens (an `at` in the past runs now).
            expires_at=max(message.scheduled_ms, start) // 1000 + self._settings.run_ttl_seconds,
            job_name=job.spec.name,
            target_type=job.spec.target.type,
            priority=job.spec.priority.value,
            runtime=job.spec.runtime.value,
            skew_allowance_ms=self._settings.clock_skew_allowance_seconds * 1000,
            # The occurrence's due instant: a first attempt's message carries it (jittered, or
            # a run-now's own instant); a later attempt's is its backoff's end, so the job's
            # jitter tells (the run record keeps what its first claim wrote).
            due_ms=message.due_ms if message.attempt == 1 else job.due_ms(message.scheduled_ms),
            early_wait_ms=early_wait_ms,
            asked_ms=message.asked_ms,
        )
        outcome, run = self._runs.claim(claim)
        if outcome == ClaimOutcome.UNKNOWN and run is not None:  # no answer to it nor its check
            landed = self._landed(run)
            outcome, run = (ClaimOutcome.CLAIMED, run) if landed else (ClaimOutcome.BUSY, None)
        if outcome == ClaimOutcome.DONE:
            count(Metric.RUNS_DUPLICATE)
            if run is None:
                return Result(Disposition.DONE, "duplicate of finished work")
            return self._finished((job, dependents), message, run)
        if outcome == ClaimOutcome.ABANDONED and run is not None:
            # Its holder was killed or died mid-attempt: that attempt failed. Retry (or give up)
            # as for any failure; this delivery is done.
            logger.warning("attempt abandoned by its worker", extra={"attempt": run.attempt})
            return self._failed(
                job, dependents, replace(message, attempt=run.attempt), run, ABANDONED_ERROR, True
            )
        if outcome == ClaimOutcome.BUSY or run is None:
            count(Metric.RUNS_DUPLICATE)
            if run is None:
                return soon("another worker holds the run", run)
            if message.attempt > run.attempt and delivery.receive_count <= RECORDING_RECEIVES:
                # A retry exists only once its attempt's target has ended: its holder is
                # recording that outcome (a slow write). Soon, not after that attempt's lease
                # (until 2026-11-30: minutes late; an outside audit); then the lease, if it died.
                return soon("the attempt before is being recorded", run)
            return self._after_the_lease(delivery, run, "another worker holds the run")
        if self._clock() > message.due_ms:
            # Claimed after its instant: a change acknowledged between the read above and the
            # claim was acknowledged before the claim, and must stop the run. Read the job
            # again (without the first read's linger); a change in the moment since the claim
            # stops it too, as its target has not started. (Claimed before the instant, such a
            # change is within the claim lead, where it may not stop the run: as documented.)
            try:
                found = self._rereads.get(message.tenant, message.job_id)
            except Exception:  # not an attempt lost to an outage: it runs as first read
                logger.warning("could not read the job again after a late claim", exc_info=True)
                found = job, dependents
            runnable = may_start(found, message)
            if isinstance(runnable, str):
                if self._withdraw(run, runnable):
                    self._overlap.release(job, message.scheduled_ms)
                return dropped(f"dropped after the claim: {runnable}")
            job, dependents = runnable  # a change this run follows (its payload, its target)
        if self._wait_until(message.due_ms, stopping):
            self._withdraw(run, None)  # handed back: as it was before the claim
            return self._handed_back(delivery)
        if run.lease and self._clock() + job.spec.timeout_seconds * 1000 > run.lease.until_ms:
            # The claim (or the read after it) took longer than the lease's margin: the target
            # could outlive the lease, and another delivery run the next attempt beside it.
            # Claimed again with a fresh lease (until 2026-11-30 it started; a fault audit).
            self._withdraw(run, None)
            self._queue.change_visibility(delivery, 0)
            return Result(
                Disposition.RETRY_LATER, "the claim outlived its lease's margin: handed back"
            )
        count(Metric.RUNS_STARTED)
        milliseconds(Metric.EARLY_WAIT, early_wait_ms)
        return self._execute(job, dependents, message, run)

    def _handed_back(self, delivery: Delivery) -> Result:
        self._queue.change_visibility(delivery, 0)
        return Result(Disposition.RETRY_LATER, "handed back: the worker is stopping")

    def _execute(
        self, job: Job, dependents: tuple[str, ...], message: RunMessage, run: Run
    ) -> Result:
        invocation = Invocation(
            tenant=job.tenant,
            job_id=job.id,
            run_id=run.run_id,
            scheduled_ms=message.scheduled_ms,
            attempt=message.attempt,
            payload=job.spec.payload,
            timeout_seconds=float(job.spec.timeout_seconds),
            upstream_run_id=message.upstream_run_id,
        )
        run = started(run, self._clock(), message.due_ms)
        milliseconds(Metric.START_LATENESS, run.attempts[-1].lateness_ms)
        try:
            self._targets.execute(job.spec.target, invocation)
        except TargetError as exc:
            after = None if exc.retry_after_seconds is None else int(exc.retry_after_seconds * 1000)
            return self._failed(job, dependents, message, run, str(exc), exc.retryable, after)
        except SecretsUnavailable:  # passing, the target not called: the platform's, no attempt
            self._withdraw(run, None)  # (until 2026-12-01 it spent one; an outside fault audit)
            raise  # back soon (handle), as when the job cannot be read
        done = self._record(run, RunOutcome(RunStatus.SUCCEEDED, self._clock()))
        if done is not None:  # else the run was reclaimed: its new holder releases
            self._overlap.release(job, message.scheduled_ms)
        count(Metric.RUNS_SUCCEEDED)
        # DEBUG: a success is in its record and history; a line each is most of the logs' bill.
        logger.debug("run succeeded", extra={"attempt": message.attempt})
        if done is not None and (failed := self._trigger(job, dependents, done)):
            return soon("succeeded; dependents not triggered", done, failed)
        return Result(Disposition.DONE, "succeeded", done or run)

    def _finished(self, found: Found, message: RunMessage, run: Run) -> Result:
        """A delivery of a run found finished: what it may still owe is done again (the holder
        died, or a send failed, between its outcome and these)."""
        job, dependents = found
        run = replace(run, asked_ms=earliest(run.asked_ms, message.asked_ms))
        if run.status in TERMINAL_RUN_STATUSES:
            # Its gate, released now. (A stale copy of an attempt whose run is retrying or
            # running must not: the run still holds the gate, and its retry would find it
            # taken.)
            self._overlap.release(job, message.scheduled_ms)
        if failed := self._trigger(job, dependents, run):
            return soon("dependents not triggered yet", run, failed)
        return Result(Disposition.DONE, "duplicate of finished work", run)

    def _after_the_lease(self, delivery: Delivery, run: Run, detail: str) -> Result:
        return after_the_lease(self._queue, delivery, run, detail, self._clock(), self._settings)

    def _failed(
        self,
        job: Job,
        dependents: tuple[str, ...],
        message: RunMessage,
        run: Run,
        error: str,
        retryable: bool,
        retry_after_ms: int | None = None,
    ) -> Result:
        now = self._clock()
        if should_retry(job.spec.retry, message.attempt, retryable):
            wait = retry_delay_ms(job.spec.retry, message.attempt, self._jitter(), retry_after_ms)
            retry = replace(message, attempt=message.attempt + 1, due_ms=now + wait)
            self._follow_up(run, retry=(retry, delay_seconds(retry.visible_ms, now)))
            done = self._record(run, RunOutcome(RunStatus.RETRYING, self._clock(), error))
            count(Metric.RUNS_RETRIED)
            logger.warning(
                "run failed; retrying",
                extra={"attempt": message.attempt, "error": error, "retry_in_ms": wait},
            )
            return Result(Disposition.DONE, f"retrying: {error}", done or run)
        reason = f"attempt {message.attempt} of {job.spec.retry.max_attempts}: {error}"
        self._follow_up(run, dead=(message, reason))
        ended = self._clock()
        if error == ABANDONED_ERROR:  # its worker died: it ended by its lease's end at the latest
            ended = abandoned_end(run, ended)
        done = self._record(run, RunOutcome(RunStatus.FAILED, ended, error))
        if done is not None:
            self._overlap.release(job, message.scheduled_ms)
        count(Metric.RUNS_FAILED)
        count(Metric.RUNS_DEAD)
        logger.error("run failed", extra={"attempt": message.attempt, "error": error})
        if done is not None and (failed := self._trigger(job, dependents, done)):
            return soon("failed; dependents not triggered", done, failed)
        return Result(Disposition.DONE, f"failed: {error}", done or run)

    def _trigger(self, job: Job, dependents: tuple[str, ...], run: Run) -> Exception | None:
        """Send the runs of the jobs that run after this one's finished run
        (duetime.services.dependencies). The failure, if that failed: the message stays, and
        its next delivery, finding the run finished, triggers them again (same run ids)."""
        try:
            self._dependencies.trigger(job, run, dependents)
        except Exception as exc:
            logger.exception("triggering the dependents failed")
            return exc
        return None
