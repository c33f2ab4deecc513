"""The overlap policy at work (duetime.domain.overlap): the gate a worker passes before it
claims an occurrence of a `skip` or `buffer_one` job, and the release after the run finished.

Costs, per occurrence of such a job: one strongly consistent read of the gate, one read of
the holder's run record when another occurrence holds it (never a query of the job's runs),
one read of the occurrence's own run record when it does not start (a copy of one skipped
is dropped, one of a run claimed goes on to its claim, taking no place: `late_copy`,
`_beside`), and one conditional write when the gate changes; the
release is one read and one write, and, when an occurrence waits, a read of the job (a pause,
a cancel or a re-arm since drops it: the gate carries the job's generation) and of the
waiting occurrence's record (its own due instant). A race between two
occurrences is settled by the gate's version: the loser reads it again.

Never two at once, never a buffered occurrence lost:
- the buffered occurrence's message is sent *before* the gate names it holder (in a release,
  or when a later occurrence finds the holder gone), so a crash in between leaves a message
  that the gate admits (it is the buffered one) or buffers again, never a gate naming an
  occurrence nobody will deliver;
- a holder that dies after its outcome but before its release has its message delivered
  again: the gate admits it (it is the holder), its claim finds the run finished, and that
  delivery releases;
- a holder that never comes back (its messages dropped by a pause, say) stops counting as
  active once its lease, or its retry's backoff, plus the grace has passed
  (`holder_active`): the next occurrence hands the gate to the buffered one or takes it;
  if its message comes back later (a Lambda's, after the visibility timeout), its claim
  fails that attempt and retries it, beside whichever occurrence holds the gate then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from duetime.domain.jobs import Job, JobSpec, JobStatus
from duetime.domain.messages import RunMessage
from duetime.domain.overlap import (
    Admission,
    Overlap,
    admit,
    holder_active,
    late_copy,
    release,
    stale_buffered,
)
from duetime.domain.retry import longest_retry_wait_ms
from duetime.domain.runs import Run, RunStatus
from duetime.observability import Metric, count, logger
from duetime.ports import Delivery, JobQueue, JobStore, RunStore
from duetime.services.results import Disposition, Result
from duetime.settings import Settings

# The gate record outlives any run of its job (timeout <= 900 s, at most 20 attempts with
# backoffs <= 900 s: about 10 hours); a job idle this long starts from a fresh gate.
GATE_TTL_SECONDS = 2 * 86_400
ATTEMPTS_AT_THE_GATE = 5
# How many of a job's latest runs a PATCH from `allow` to `skip` looks at for an active one.
HOLD_LOOKBACK = 20
# A buffered occurrence of a job in these is dropped with the rest, never handed the gate.
_DROPPING = (JobStatus.PAUSED, JobStatus.CANCELLED)


def unclaimed(
    job: Job,
    scheduled_ms: int,
    status: RunStatus,
    now_ms: int,
    ttl_seconds: int,
    *,
    due_ms: int | None = None,
    asked_ms: int | None = None,
) -> Run:
    """The record of an occurrence no attempt claimed (`skipped`, `buffered`), kept for the
    hot window from its instant (or from now, if later)."""
    return Run(
        tenant=job.tenant,
        job_id=job.id,
        scheduled_ms=scheduled_ms,
        status=status,
        attempt=0,
        expires_at=max(scheduled_ms, now_ms) // 1000 + ttl_seconds,
        job_name=job.spec.name,
        target_type=job.spec.target.type,
        priority=job.spec.priority.value,
        runtime=job.spec.runtime.value,
        due_ms=due_ms,
        asked_ms=asked_ms,
    )


def _beside(own: Run | None, message: RunMessage) -> bool:
    """Whether `message` goes on to its claim beside the gate's holder, taking no place at the
    gate: a later attempt of its run, which waits for it (`retrying`); or a delivery of a run
    claimed before (`running`, `succeeded`, `failed`), which its claim answers: an attempt
    whose worker died is failed and retried, a finished run's dependents are sent again.
    Until 2026-12-01 those were dropped as late copies: a run whose Lambda died stayed
    `running` for good, and a trigger that had failed once was lost (an outside audit). So
    does a run `duetime dlq redrive` sent back, claimed before or not (a run dead-lettered
    unclaimed was recorded `skipped`, never run, though reported redriven; a lifecycle audit)."""
    if message.redriven:
        return True
    if own is None or own.status == RunStatus.RETRYING:
        return own is not None and message.attempt > own.attempt
    return own.status in (RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED)


def gated(spec: JobSpec) -> bool:
    """Whether a job's runs go through its overlap gate: a recurring one with a policy."""
    return spec.recurring and spec.overlap != Overlap.ALLOW


class OverlapGuard:
    def __init__(
        self,
        jobs: JobStore,
        runs: RunStore,
        queue: JobQueue,
        settings: Settings,
        *,
        clock: Callable[[], int],
    ) -> None:
        self._jobs = jobs
        self._runs = runs
        self._queue = queue
        self._settings = settings
        self._clock = clock

    def admit(self, job: Job, message: RunMessage, grace_ms: int) -> Admission:
        """Pass the gate (RUN) or record the occurrence `skipped` or `buffered`.

        `grace_ms`: how long past its lease a holder counts as active (the lease margin and
        the skew allowance), and how long a holder handed the gate has to claim its run."""
        scheduled = message.scheduled_ms
        for _ in range(ATTEMPTS_AT_THE_GATE):
            stored = self._jobs.gate(job.tenant, job.id)
            now = self._clock()
            gate = stored
            if stale_buffered(stored, job.generation):  # dropped by a pause or a re-arm
                self._drop_buffered(job, stored.buffered_ms, now)
                gate = replace(stored, buffered_ms=None)
            active = False
            # (Under buffer_one a pinned holder holds nothing: it would release no waiting one;
            # `unpin` frees it, and an occurrence before that must not buffer behind it.)
            pinned = gate.pinned and job.spec.overlap == Overlap.BUFFER_ONE
            if gate.holder_ms is not None and gate.holder_ms != scheduled and not pinned:
                holder = self._runs.get(job.id, gate.holder_ms)
                active = holder_active(
                    holder,
                    gate,
                    now,
                    grace_ms=grace_ms + job.spec.timeout_seconds * 1000,
                    max_backoff_ms=longest_retry_wait_ms(job.spec.retry),
                    generation=job.generation,
                )
            decision = admit(job.spec.overlap, gate, scheduled, active, now)
            late = beside = False
            if decision.admission in (Admission.SKIP, Admission.BUFFER):
                # A late copy of an occurrence that already ran must not take the one
                # buffered place (or be shown skipped): one read, only when not running.
                own = self._runs.get(job.id, scheduled)
                # Not a copy, though: a run's next attempt, which another occurrence took the
                # gate from (a run claimed under `allow` before a PATCH to this policy), or a
                # claimed run's delivery (`_beside`). It goes on, beside that one, and takes no
                # place at the gate (until 2026-11-30 a retry was dropped as a late copy, the
                # run `retrying` for good: an outside audit).
                beside = _beside(own, message)
                # (A redriven run takes no place either: it runs beside; a review.)
                late = (own is not None and own.status != RunStatus.BUFFERED) or message.redriven
                if late:
                    decision = late_copy(decision, gate)
            if decision.start_ms is not None:
                self._start(job, decision.start_ms)
            # The holder kept (its gate written for the one buffered) keeps its generation: one
            # of before a pause or a re-arm holds only while it runs (until 2026-12-01 it was
            # made current, and held while its dropped retry waited: an outside audit).
            kept = (decision.gate.holder_ms, decision.gate.since_ms) == (
                stored.holder_ms,
                stored.since_ms,
            )
            written = replace(
                decision.gate,
                generation=job.generation,
                holder_generation=stored.held_at if kept else job.generation,
                pinned=stored.pinned and kept,
            )
            if decision.gate != stored and not self._jobs.put_gate(
                job.tenant, job.id, written, now // 1000 + GATE_TTL_SECONDS
            ):
                continue  # another occurrence changed the gate: decide again
            if beside:
                logger.warning("goes on beside the gate's holder: it holds no gate")
                return Admission.RUN
            if decision.admission == Admission.SKIP:
                self._record(job, scheduled, RunStatus.SKIPPED, now, message)
                count(Metric.RUNS_SKIPPED)
                logger.info("occurrence skipped: another run of the job is active")
            elif decision.admission == Admission.BUFFER or (
                decision.admission == Admission.DUPLICATE and not late
            ):
                # A copy of the buffered one records it again: a crash may have come
                # between the gate's write and its record. It was counted and logged once.
                self._record(job, scheduled, RunStatus.BUFFERED, now, message)
                if decision.admission == Admission.BUFFER:
                    count(Metric.RUNS_BUFFERED)
                    logger.info("occurrence buffered: it starts when the active run finishes")
            return decision.admission
        # The gate kept changing under us: leave the message for a later delivery.
        raise GateContention(f"the overlap gate of job {job.id} kept changing")

    def gate(
        self, delivery: Delivery, job: Job, message: RunMessage, grace_ms: int
    ) -> Result | None:
        """The overlap policy (skip, buffer_one) at a delivery: None to go on and claim the run,
        or the result for an occurrence that does not start now (admit's `grace_ms`)."""
        try:
            admission = self.admit(job, message, grace_ms)
        except GateContention as exc:
            self._queue.change_visibility(delivery, 1)
            return Result(Disposition.RETRY_LATER, str(exc))
        if admission == Admission.RUN:
            return None
        if admission == Admission.SKIP:
            return Result(Disposition.DONE, "skipped: another run of the job is active")
        if admission == Admission.BUFFER:
            return Result(Disposition.DONE, "buffered: starts when the active run finishes")
        return Result(Disposition.DONE, "duplicate of a buffered or finished occurrence")

    def release(self, job: Job, scheduled_ms: int) -> None:
        """Occurrence `scheduled_ms` has finished (succeeded, failed, or found finished):
        start the buffered occurrence, if any, and free the gate (a recurring job's with an
        overlap policy: no other job has one). The job is read again
        first: a buffered occurrence that a pause, a cancel or a re-arming change dropped
        since is ended `skipped`, not handed the gate (its message would be dropped, and the
        gate held by an occurrence that never runs)."""
        if not gated(job.spec):
            return  # (a gate it had when PATCHed otherwise was lifted then: `lift`)
        for _ in range(ATTEMPTS_AT_THE_GATE):
            gate = self._jobs.gate(job.tenant, job.id)
            now = self._clock()
            after = release(gate, scheduled_ms, now)
            if after is None:
                return
            waiting = after.holder_ms
            if waiting is not None:
                current = self._jobs.get(job.tenant, job.id) or replace(
                    job, status=JobStatus.CANCELLED
                )
                if current.status in _DROPPING or stale_buffered(gate, current.generation):
                    self._drop_buffered(job, waiting, now)
                    after = replace(after, holder_ms=None)
                else:
                    self._start(current, waiting)
                    after = replace(
                        after, generation=current.generation, holder_generation=current.generation
                    )
            if self._jobs.put_gate(job.tenant, job.id, after, now // 1000 + GATE_TTL_SECONDS):
                return
        # Left held: the next occurrence finds this holder finished and hands over itself.
        logger.warning("the overlap gate kept changing during a release")

    def handed(self, job: Job, message: RunMessage) -> bool:
        """Whether no start is owed to `message`'s buffered occurrence any more: the gate
        names it holder at the message's generation (the start its release sent), or names it
        neither holder nor buffered (the start a `lift` sent, which cleared the gate: it
        showed `buffered` for good until 2026-12-01). Named holder at another generation, or
        still buffered, it waits for a start of its own."""
        gate = self._jobs.gate(job.tenant, job.id)
        if gate.holder_ms == message.scheduled_ms:
            return gate.held_at == message.generation
        return gate.buffered_ms != message.scheduled_ms

    def changed(self, job: Job, before: JobSpec | None = None) -> None:
        """`job` (as written) was PATCHed from `before` (None: a PATCH that changed nothing,
        which makes its policy's change again): into or out of its gate, `hold` or `lift` it;
        from `skip` to `buffer_one`, `unpin` it."""
        if before is not None and gated(before) == gated(job.spec):
            if (before.overlap, job.spec.overlap) == (Overlap.SKIP, Overlap.BUFFER_ONE):
                self.unpin(job)
        elif job.spec.overlap == Overlap.SKIP:
            self.hold(job)
        elif not gated(job.spec):
            self.lift(job)
        else:
            self.unpin(job)

    def unpin(self, job: Job) -> None:
        """`job` (as written) is `buffer_one`: a run that `hold` pinned to the gate (claimed
        under `allow`, before the holding PATCH) holds it no more. Its release does nothing (its
        worker's copy of the job says `allow`), so one buffered behind it waited for a later
        occurrence to hand it over, for good if none came (until 2026-12-01: allow, skip, then
        buffer_one during one long run; an outside lifecycle audit, round eight). The next
        occurrence runs beside it, as after a PATCH from `allow` straight to `buffer_one`."""
        for _ in range(ATTEMPTS_AT_THE_GATE):
            gate = self._jobs.gate(job.tenant, job.id)
            if not gate.pinned or gate.buffered_ms is not None:
                return  # claimed through the gate (or handed it): its release frees it
            freed = replace(gate, holder_ms=None, pinned=False)
            now = self._clock()
            if self._jobs.put_gate(job.tenant, job.id, freed, now // 1000 + GATE_TTL_SECONDS):
                return

    def hold(self, job: Job) -> None:
        """`job` (as written) is `skip` since a PATCH from `allow`: a run of it still active
        (among its latest few) holds a free gate, so the next occurrences are skipped while it
        is (until 2026-11-30 the gate knew no run claimed under `allow`, and the next ran beside
        it: an outside lifecycle audit). A run claimed before the job was last re-armed (this
        PATCH, a pause and resume, an earlier re-arming PATCH) holds it as one of the generation
        before, only while it runs: its retry, dropped by that change, holds nothing (until
        2026-12-01 only this PATCH's re-arm was seen, and a retry an earlier change dropped
        held the gate until its message came, minutes of occurrences skipped with nothing
        running: an outside lifecycle audit, round eight). Not under `buffer_one`: that run,
        claimed under `allow`, releases no gate, so one buffered behind it would wait for a
        later occurrence to hand it over."""
        wait = longest_retry_wait_ms(job.spec.retry)

        def current(run: Run) -> bool:  # claimed since the job's generation began
            # (received since: a claim before its instant records the instant as its start)
            last = run.attempts[-1] if run.attempts else None
            received = last.started_ms - (last.early_wait_ms or 0) if last else 0
            return last is not None and received >= (job.generation_ms or 0)

        def until(run: Run) -> int:  # when it stops counting as active, at the latest
            if run.status == RunStatus.RETRYING:
                return (run.finished_ms or 0) + wait
            return run.lease.until_ms if run.lease is not None else 0

        # The one active longest among the latest HOLD_LOOKBACK (the newest of the latest five
        # until 2026-11-30, and a retry waiting out a Retry-After behind newer runs was not
        # held: an outside lifecycle audit, round six). Runs active at once beside it hold
        # nothing (one holder a gate): their retries are made beside the next occurrences.
        recent = self._runs.list(job.id, HOLD_LOOKBACK, None).items
        lasting = [
            r
            for r in recent
            if r.status == RunStatus.RUNNING or (r.status == RunStatus.RETRYING and current(r))
        ]
        active = sorted(lasting, key=until)
        for _ in range(ATTEMPTS_AT_THE_GATE if active else 0):
            gate = self._jobs.gate(job.tenant, job.id)
            if gate.holder_ms is not None and not gate.pinned:
                # Taken through the gate (or handed it): that occurrence holds it, and releases
                # it. (A repeated PATCH pinned such a holder until 2026-12-01: a lifecycle audit.)
                return
            now = self._clock()
            holder = active[-1].scheduled_ms
            generation = job.generation - (not current(active[-1]))
            held = replace(
                gate,
                holder_ms=holder,
                since_ms=now,
                generation=generation,
                holder_generation=generation,
                pinned=True,
            )
            if self._jobs.put_gate(job.tenant, job.id, held, now // 1000 + GATE_TTL_SECONDS):
                return

    def lift(self, job: Job) -> None:
        """`job` (as written) no longer goes through its gate (a PATCH to `allow`, or to a
        schedule that does not recur): the occurrence waiting behind the active run starts
        now, as `allow` starts any, or ends `skipped` if the job is paused or re-armed since;
        the gate keeps none waiting, and no holder. Until 2026-11-30 the active run's release
        read the new policy and did nothing: the waiting one stayed `buffered`, owed and never
        run (an outside lifecycle audit)."""
        for _ in range(ATTEMPTS_AT_THE_GATE):
            gate = self._jobs.gate(job.tenant, job.id)
            if gate.holder_ms is None and gate.buffered_ms is None:
                return
            now = self._clock()
            dropped = job.status in _DROPPING or stale_buffered(gate, job.generation)
            if gate.buffered_ms is None:
                pass
            elif dropped or not job.spec.recurring:
                self._drop_buffered(job, gate.buffered_ms, now)
            else:
                self._start(job, gate.buffered_ms)
            # Nor a holder: its run, or its retry, is claimed under the new policy and releases
            # nothing; a policy set again would buffer behind it for good (until 2026-11-30; an
            # outside lifecycle audit, round six).
            lifted = replace(
                gate, holder_ms=None, buffered_ms=None, holder_generation=None, pinned=False
            )
            if self._jobs.put_gate(job.tenant, job.id, lifted, now // 1000 + GATE_TTL_SECONDS):
                return
        logger.warning("the overlap gate kept changing while its policy was lifted")

    def _start(self, job: Job, scheduled_ms: int) -> None:
        """Send the buffered occurrence's first attempt, visible now. It carries the
        occurrence's own due instant, as its `buffered` record keeps it (a run-now's or a
        backfill's is its instant, not jittered: until 2026-11-30 the job's jitter was added,
        and the run started up to `jitter_seconds` after the active one ended), so its record's
        `due_at` is the occurrence's and its `lateness_ms` says how long it waited; and a
        run-now's or a backfill's ask (buffered again, its record kept none: an audit)."""
        buffered = self._runs.get(job.id, scheduled_ms)
        due = buffered.due_ms if buffered is not None and buffered.due_ms is not None else None
        start = RunMessage(
            tenant=job.tenant,
            job_id=job.id,
            scheduled_ms=scheduled_ms,
            attempt=1,
            due_ms=job.due_ms(scheduled_ms) if due is None else due,
            runtime=job.spec.runtime,
            priority=job.spec.priority,
            generation=job.generation,
            asked_ms=buffered.asked_ms if buffered is not None else None,
        )
        self._queue.send([(start, 0)])

    def _drop_buffered(self, job: Job, scheduled_ms: int | None, now: int) -> None:
        """A buffered occurrence dropped with the rest by a pause, a cancel or a re-arming
        change: its record ends `skipped` (it showed `buffered` for good)."""
        if scheduled_ms is not None:  # its own due instant and ask kept (a run-now's: no jitter)
            own = self._runs.get(job.id, scheduled_ms)
            kept = (own.due_ms, own.asked_ms) if own is not None else (None, None)
            self._record(job, scheduled_ms, RunStatus.SKIPPED, now, kept=kept)
            logger.info("buffered occurrence dropped: the job was paused or changed since")

    def _record(
        self,
        job: Job,
        scheduled_ms: int,
        status: RunStatus,
        now: int,
        message: RunMessage | None = None,
        *,
        kept: tuple[int | None, int | None] = (None, None),
    ) -> None:
        """A run record the gate decided (`skipped`, `buffered`): it keeps its message's due
        instant and ask (a buffered one's start message is written again from them: `_start`);
        without one (a buffered one dropped), those `kept` from its record, else the job's
        jittered instant (until 2026-12-01 `scheduled_for`: an outside lifecycle audit)."""
        self._runs.record(
            unclaimed(
                job,
                scheduled_ms,
                status,
                now,
                self._settings.run_ttl_seconds,
                due_ms=message.due_ms if message else kept[0] or job.due_ms(scheduled_ms),
                asked_ms=message.asked_ms if message else kept[1],
            )
        )


class GateContention(Exception):
    """The gate changed under every attempt: the delivery is tried again later."""
