"""A model of the scheduling engine, checked by a hypothesis state machine.

`EngineMachine` drives the real services — `JobService`, `Coordinator` and `Sweeper` (with
their `Dispatcher`), `RunExecutor` — on the in-memory twins, with a clock that is an integer of
milliseconds moved only by the machine (and by the worker's own wait for a due instant). The
target of every job is a recording stand-in for a handler target: it sees each execution as the
outside world would (tenant, job, run, attempt, payload, when), and fails or stalls on request.

Faults are injected per invocation: each sweep or worker batch gets its collaborators through
proxies (`Calls`) that raise `Crash` — a BaseException, which no `except Exception` in duetime
stops — before or after the n-th call of one method, or run something else first (a second
sweep of the same shard, an API call, a nested batch of deliveries): that is how two sweeps
interleave, and how a run outlives its lease while another worker looks at it.

What the model knows, independently of duetime's schedule code: the occurrences of every job
(rates are anchor + k·P, crons are every k minutes in zones without daylight saving, one-offs
their instant), its run-now instants and its status history. What it is sure must have run
is decided after a **drain** (regular ticks, deliveries every 20 s, no faults): see
`EngineMachine._required`. The invariants are in `EngineMachine._check_execution`,
`every_run_record_has_its_job` and `_check_liveness`; docs/reliability.md ("Model-based test")
describes them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.errors import IllegalTransition, NotFound, ValidationError
from duetime.domain.jobs import JobStatus, Priority, Runtime, parse_job_spec
from duetime.domain.messages import RunMessage, delay_seconds
from duetime.domain.runs import TERMINAL_RUN_STATUSES, ClaimOutcome, RunStatus
from duetime.domain.targets import HandlerTarget, Target
from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms, to_ms
from duetime.observability import metrics
from duetime.ports import Delivery
from duetime.services.coordinator import Coordinator, InProcessLauncher
from duetime.services.execute import RunExecutor
from duetime.services.jobs import JobService
from duetime.services.results import Disposition, Result
from duetime.services.sweep import Sweeper
from duetime.settings import QueueUrls, Settings, queue_key
from duetime.targets import Invocation, TargetError

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 7, 250_000, tzinfo=UTC))
SHARDS = 2
# The third tenant is not a valid SQS message group id (a space, non-ASCII): it is hashed.
TENANTS = ("tenant-a", "tenant-b", "tenant ç")
MODEL_TARGET = "model.record"
VISIBILITY_SECONDS = 60  # shorter than a lease: SQS hands a running run's message out again
# The queues jobs use (a job's runtime and priority); workers poll all six.
QUEUES = [
    (Runtime.LAMBDA, Priority.NORMAL),
    (Runtime.LAMBDA, Priority.HIGH),
    (Runtime.FARGATE, Priority.NORMAL),
]
ALL_QUEUES = [(r, p) for r in Runtime for p in Priority]
# Time runs at most this far in one example: every missed occurrence of a catch-up `all` job
# (window 7 days) is still inside its window, and fewer than the 1,000 a sweep plans per job.
MAX_ELAPSED_MS = 4 * 3600_000

# A drain: ticks every minute and deliveries every 20 s, without faults. Occurrences from
# SETTLE_MS after its start are planned on time whatever the faults before left behind (a dead
# sweep's partition lease ends after 2 minutes; a timer parked after 4 stalls is retried a
# minute later), so every catch-up mode runs them; the model requires them up to CUTOFF_MS,
# and the drain runs on long enough for their retries and for every older run to be reclaimed
# (a dead holder's lease + the 2-minute clock-skew allowance, a visibility timeout).
DRAIN_STEP_MS = 20_000
SETTLE_MS = 6 * MINUTE_MS
CUTOFF_MS = 12 * MINUTE_MS
DRAIN_MS = 20 * MINUTE_MS
# A run due after a drain's settling point starts within this of its instant (the next
# delivery after SQS releases it; the sweep that planned it ran minutes before).
ON_TIME_MS = DRAIN_STEP_MS + 2_000


class Crash(BaseException):
    """The invocation dies here. A BaseException: no `except Exception` in duetime stops it."""


# --- the engine, and faults per invocation -------------------------------------------------------


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms

    def sleep(self, seconds: float) -> None:
        """The worker waiting for a due instant: simulated time passes."""
        self.now += math.ceil(seconds * 1000)


class RecordingQueue(MemoryQueue):
    """The queue twin, keeping every message sent (to deliver copies of them later)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock, visibility_timeout_seconds=VISIBILITY_SECONDS)
        self.sent: list[RunMessage] = []

    def send(self, messages: Any) -> None:
        super().send(messages)
        self.sent.extend(message for message, _ in messages)


@dataclass(frozen=True)
class Fault:
    """The invocation dies before (or right after) the `nth` call of `part.method`."""

    part: str
    method: str
    nth: int
    before: bool

    def __str__(self) -> str:
        return f"{'before' if self.before else 'after'} {self.part}.{self.method} #{self.nth}"


@dataclass
class Hook:
    """Before the `nth` call of `part.method`, `run` runs (once): something concurrent. What
    it raises is kept for the machine (the sweep would take it for a failed hand-over)."""

    part: str
    method: str
    nth: int
    run: Callable[[], None]
    ran: bool = False
    failure: Exception | None = None


class Calls:
    """The calls one invocation (a sweep, a worker's batch) makes to its collaborators, through
    proxies: counted per method, with at most one fault and one hook, and observed."""

    def __init__(
        self,
        fault: Fault | None = None,
        hook: Hook | None = None,
        observe: Callable[[str, str, Any, Any], None] | None = None,
    ) -> None:
        self.fault = fault
        self.hook = hook
        self.observe = observe
        self.counts: Counter[tuple[str, str]] = Counter()

    def wrap(self, part: str, inner: Any) -> Any:
        return _Proxy(part, inner, self)

    def call(self, part: str, method: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        self.counts[(part, method)] += 1
        here = (part, method, self.counts[(part, method)])
        hook, fault = self.hook, self.fault
        if hook is not None and not hook.ran and (hook.part, hook.method, hook.nth) == here:
            hook.ran = True
            try:
                hook.run()
            except Exception as exc:
                hook.failure = exc
        dies = fault is not None and (fault.part, fault.method, fault.nth) == here
        if dies and fault is not None and fault.before:
            raise Crash(str(fault))
        result = fn(*args, **kwargs)
        if self.observe is not None:
            self.observe(part, method, args, result)
        if dies:
            raise Crash(str(fault))
        return result


class _Proxy:
    def __init__(self, part: str, inner: Any, calls: Calls) -> None:
        self._part = part
        self._inner = inner
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._calls.call(self._part, name, value, args, kwargs)

        return call


class Engine:
    """The services on the in-memory twins, as one deployment."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        queues = {queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}") for r, p in ALL_QUEUES}
        self.settings = Settings("jobs", "timers", "runs", queues, timer_shards=SHARDS)
        self.jobs = MemoryJobStore()
        self.timers = MemoryTimerStore(shards=SHARDS)
        self.runs = MemoryRunStore()
        self.queue = RecordingQueue(clock)
        ids = itertools.count(1)
        self.service = JobService(
            self.jobs,
            self.timers,
            self.runs,
            self.queue,
            self.settings,
            clock=clock,
            entropy=lambda n: next(ids).to_bytes(n, "big"),
        )
        # The coordinator's launcher sweeps the shards one after another (one thread).
        sweeper = Sweeper(
            self.jobs, self.timers, self.queue, self.settings, clock=clock, parallelism=1
        )
        self.coordinator = Coordinator(
            self.timers, InProcessLauncher(sweeper, parallelism=1), self.settings, clock=clock
        )

    def sweeper(self, calls: Calls, offset_ms: int = 0) -> Sweeper:
        """One sweep invocation; its clock reads `offset_ms` off (a stale or early tick)."""
        return Sweeper(
            calls.wrap("jobs", self.jobs),
            calls.wrap("timers", self.timers),
            calls.wrap("queue", self.queue),
            self.settings,
            clock=lambda: self.clock.now + offset_ms,
            parallelism=1,
        )

    def executor(self, calls: Calls, target: ModelTarget) -> RunExecutor:
        return RunExecutor(
            calls.wrap("jobs", self.jobs),
            calls.wrap("runs", self.runs),
            calls.wrap("queue", self.queue),
            calls.wrap("target", target),
            self.settings,
            clock=self.clock,
            auth=self.queue.auth,
            sleep=self.clock.sleep,
            jitter=lambda: 0.5,
            read_linger_seconds=0,  # one run at a time: no one to wait for (real time)
        )


# --- the model -----------------------------------------------------------------------------------

RATES = (30, 60, 90, 300)
CRON_MINUTES = (1, 2, 5)
ZONES = ("UTC", "Asia/Kolkata")  # no daylight saving: */k minutes are the same instants as UTC


@dataclass(frozen=True)
class JobPlan:
    """What to submit, relative to the instant of submission."""

    kind: str  # at | delay | rate | cron
    offset_s: int  # at: the instant, from now; delay: the delay (negative: 0)
    rate_s: int
    cron_minutes: int
    zone: str
    start_s: int | None  # rate/cron start_at, from now
    end_s: int | None  # rate/cron end_at, from now
    catchup: str  # all (window 7 days) | all-short (window 5 minutes) | latest | none
    max_attempts: int
    fail_until: int  # the target fails while attempt < fail_until
    queue: tuple[Runtime, Priority]
    timeout_s: int

    @property
    def recurring(self) -> bool:
        return self.kind in ("rate", "cron")

    def body(self, now: int, payload: dict[str, Any]) -> dict[str, Any]:
        schedule: dict[str, Any]
        if self.kind == "at":
            schedule = {"at": rfc3339_ms(now + self.offset_s * 1000)}
        elif self.kind == "delay":
            schedule = {"delay_seconds": max(0, self.offset_s)}
        elif self.kind == "rate":
            schedule = {"rate_seconds": self.rate_s}
        else:
            schedule = {"cron": f"*/{self.cron_minutes} * * * *", "timezone": self.zone}
        if self.recurring:
            if self.start_s is not None:
                schedule["start_at"] = rfc3339_ms(now + self.start_s * 1000)
            if self.end_s is not None:
                schedule["end_at"] = rfc3339_ms(now + self.end_s * 1000)
        catchup = {
            "all": {"mode": "all", "window_seconds": 604_800},
            "all-short": {"mode": "all", "window_seconds": 300},
            "latest": {"mode": "latest"},
            "none": "none",
        }[self.catchup]
        runtime, priority = self.queue
        return {
            "schedule": schedule,
            "target": {"type": "handler", "name": MODEL_TARGET},
            "payload": payload,
            "retry": {
                "max_attempts": self.max_attempts,
                "backoff_seconds": 1,
                "max_backoff_seconds": 8,
            },
            "catchup": catchup,
            "runtime": runtime.value,
            "priority": priority.value,
            "timeout_seconds": self.timeout_s,
        }


@st.composite
def job_plans(draw: st.DrawFn, *, soon: bool = False) -> JobPlan:
    """Jobs of every kind; `soon`: one-offs due within the next four minutes."""
    kind = draw(st.sampled_from(["at", "delay"] if soon else ["at", "delay", "rate", "cron"]))
    start = end = None
    if kind in ("rate", "cron"):
        start = draw(st.none() | st.sampled_from([-600, -90, 0, 45, 150]))
        end = draw(st.none() | st.sampled_from([240, 600, 1500, 5400]))
        if start is not None and end is not None and end <= start:
            end = None
    return JobPlan(
        kind=kind,
        offset_s=draw(
            st.integers(0, 240)
            if soon
            else st.sampled_from([-3600, -1, 0, 5, 40, 900, 2400]) | st.integers(60, 300)
        ),
        rate_s=draw(st.sampled_from(RATES)),
        cron_minutes=draw(st.sampled_from(CRON_MINUTES)),
        zone=draw(st.sampled_from(ZONES)),
        start_s=start,
        end_s=end,
        catchup=draw(st.sampled_from(["all", "all", "all-short", "latest", "none"])),
        max_attempts=draw(st.sampled_from([1, 2, 3])),
        fail_until=draw(st.sampled_from([0, 0, 2, 9])),
        queue=draw(st.sampled_from(QUEUES)),
        timeout_s=draw(st.sampled_from([5, 30])),
    )


@dataclass(frozen=True)
class Change:
    seq: int  # when, in the machine's order of events
    ms: int
    status: str  # paused | scheduled (resumed) | cancelled


@dataclass
class ModelJob:
    tenant: str
    job_id: str
    plan: JobPlan
    created_ms: int
    payload: dict[str, Any]
    first_ms: int  # the first occurrence
    period_ms: int  # 0 for a one-off
    end_ms: int | None
    status: str = "scheduled"
    changes: list[Change] = field(default_factory=list)
    run_now: list[tuple[int, int]] = field(default_factory=list)  # (seq, instant)

    @classmethod
    def of(
        cls, tenant: str, job_id: str, plan: JobPlan, now: int, payload: dict[str, Any]
    ) -> ModelJob | None:
        """The model of a job submitted at `now`; None when its schedule has no occurrence."""
        end = now + plan.end_s * 1000 if plan.end_s is not None else None
        start = now + plan.start_s * 1000 if plan.start_s is not None else None
        if plan.kind == "at":
            first, period = now + plan.offset_s * 1000, 0
        elif plan.kind == "delay":
            first, period = now + max(0, plan.offset_s) * 1000, 0
        elif plan.kind == "rate":
            # Anchored at start_at (else one interval after creation); the first run is the
            # first point of that grid at or after creation.
            period = plan.rate_s * 1000
            anchor = start if start is not None else now + period
            first = anchor if anchor >= now else anchor - (anchor - now) // period * period
        else:  # the first whole k-minute mark at or after the later of creation and start_at
            period = plan.cron_minutes * MINUTE_MS
            first = -(-max(now, start or now) // period) * period
        if end is not None and first > end:
            return None
        return cls(tenant, job_id, plan, now, payload, first, period, end)

    @property
    def recurring(self) -> bool:
        return self.period_ms > 0

    def occurrences(self, low: int, high: int) -> list[int]:
        """The schedule's occurrences in [low, high]."""
        if not self.recurring:
            return [self.first_ms] if low <= self.first_ms <= high else []
        high = high if self.end_ms is None else min(high, self.end_ms)
        k = max(0, -(-(low - self.first_ms) // self.period_ms))
        return list(range(self.first_ms + k * self.period_ms, high + 1, self.period_ms))

    def may_run(self, scheduled_ms: int) -> bool:
        """An instant this job has a run for: an occurrence of its schedule, or a run-now."""
        if any(ms == scheduled_ms for _, ms in self.run_now):
            return True
        return self.occurrences(scheduled_ms, scheduled_ms) == [scheduled_ms]

    def paused_windows(self) -> list[tuple[Change, Change]]:
        """(pause, resume) pairs: the job was paused in between."""
        windows = []
        paused: Change | None = None
        for change in self.changes:
            if change.status == "paused" and paused is None:
                paused = change
            elif change.status == "scheduled" and paused is not None:
                windows.append((paused, change))
                paused = None
        return windows


@dataclass
class Execution:
    """One call of the target, as the target saw it, and what became of its outcome."""

    seq: int
    tenant: str
    job_id: str
    scheduled_ms: int
    attempt: int
    payload: Any
    target: Target
    started_ms: int
    status_at_start: str | None  # the model's status of the job when it started
    outcome: str = "running"  # ok | fail | crash
    # Whether its own worker wrote its outcome to the run record (None: still running).
    recorded: bool | None = None


@dataclass
class Handling:
    """One delivery being handled by one worker."""

    executions: list[Execution] = field(default_factory=list)
    claimed: bool = False
    recorded: bool = False  # RunStore.finish accepted an outcome


@dataclass
class RunTally:
    executions: int = 0
    # Executions that may be followed by another: a failure with attempts left (its retry),
    # or an execution whose outcome its worker did not record (crashed between executing and
    # recording, or lost its lease while it ran): the documented duplicate window.
    licences: int = 0
    retries: int = 0
    unrecorded: int = 0
    succeeded: bool = False  # an execution of it succeeded
    first_seq: int = 0
    first_start_ms: int = 0


@dataclass
class Figures:
    """Totals over the examples run (scripts/model_check.py prints them)."""

    examples: int = 0
    steps: int = 0
    runs: int = 0
    executions: int = 0
    duplicates: int = 0
    duplicates_explained: int = 0
    lost: int = 0
    required: int = 0
    dead_unexecuted: int = 0
    jobs: int = 0
    drains: int = 0
    sweeper_crashes: int = 0
    worker_crashes: int = 0
    interleavings: int = 0


FIGURES = Figures()


class ModelTarget:
    """The target of every job: records each execution, fails while attempt < the job's
    `fail_until`, and runs the machine's plan for the next execution (a long run, something
    concurrent, a crash) while it 'executes'."""

    def __init__(self, machine: EngineMachine, handling: Handling) -> None:
        self._machine = machine
        self._handling = handling

    def execute(self, target: Target, invocation: Invocation) -> None:
        machine = self._machine
        job = machine.model.get(invocation.job_id)
        execution = Execution(
            seq=machine.next_seq(),
            tenant=invocation.tenant,
            job_id=invocation.job_id,
            scheduled_ms=invocation.scheduled_ms,
            attempt=invocation.attempt,
            payload=invocation.payload,
            target=target,
            started_ms=machine.clock.now,
            status_at_start=job.status if job else None,
        )
        machine.executions.append(execution)
        self._handling.executions.append(execution)
        plan, machine.target_plan = machine.target_plan, None
        try:
            if plan is not None:
                plan()
        except Crash:
            execution.outcome = "crash"
            raise
        if job is not None and invocation.attempt < job.plan.fail_until:
            execution.outcome = "fail"
            raise TargetError(f"model: attempt {invocation.attempt} fails")
        execution.outcome = "ok"


# --- the machine ---------------------------------------------------------------------------------

SWEEP_POINTS = [
    ("timers", "raise_horizon"),
    ("timers", "partition_states"),
    ("timers", "read_due"),
    ("timers", "acquire"),
    ("timers", "advance"),
    ("timers", "put"),
    ("timers", "sweep_states"),
    ("timers", "advance_cursor"),
    ("timers", "parked_due"),
    ("timers", "park"),
    ("timers", "unpark"),
    ("timers", "raise_shard_count"),
    ("queue", "send"),
    ("jobs", "get_many"),
    ("jobs", "replace"),
]
# Around the claim, the execution and the recording twice as often as elsewhere.
# (A run reads its job with get_with_dependents, duetime.services.job_reads: an outside audit
# found that the model's `get` point alone never fired in the worker.)
WORKER_POINTS = [
    ("jobs", "get"),
    ("jobs", "get_with_dependents"),
    ("jobs", "get_with_dependents"),
    ("runs", "withdraw"),
    ("runs", "get"),
    ("runs", "claim"),
    ("runs", "claim"),
    ("target", "execute"),
    ("target", "execute"),
    ("runs", "finish"),
    ("runs", "finish"),
    ("queue", "send"),  # the retry, sent before the failure is recorded
    ("queue", "send_dead"),
    ("queue", "change_visibility"),
]


def faults(points: list[tuple[str, str]]) -> st.SearchStrategy[Fault]:
    return st.builds(
        lambda point, nth, before: Fault(point[0], point[1], nth, before),
        st.sampled_from(points),
        st.sampled_from([1, 1, 1, 2, 3]),
        st.booleans(),
    )


ADVANCES = st.one_of(
    st.integers(1, 20_000),  # within a minute
    st.integers(20_000, 150_000),  # a tick or two
    st.integers(5 * MINUTE_MS, 30 * MINUTE_MS),  # an outage
)
SWEEP_CLOCKS = [0, 0, 0, -60_000, 25_000, 90_000]
CONCURRENT = ["sweep", "stale sweep", "create", "pause", "resume", "cancel", "run now", "deliver"]


@dataclass(frozen=True)
class Drain:
    start_ms: int
    settle_ms: int
    cutoff_ms: int


class EngineMachine(RuleBasedStateMachine):
    """Jobs of three tenants submitted, changed and run through the real services, with
    faults; after every step the invariants hold, and after every drain each occurrence the
    model is sure of has run."""

    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock(T0)
        self.engine = Engine(self.clock)
        self.model: dict[str, ModelJob] = {}
        self.executions: list[Execution] = []
        self.tallies: dict[tuple[str, int], RunTally] = {}
        self.abandoned: set[tuple[str, int]] = set()  # runs whose holder died after its claim
        # Runs a sweep with a clock behind the true time sent: their delays are counted from
        # its clock, so they arrive late by as much (on AWS the clocks are synchronized).
        self.sent_by_slow_clock: set[tuple[str, int]] = set()
        self.target_plan: Callable[[], None] | None = None
        self.figures = Figures()
        self._seq = itertools.count(1)
        self._checked = 0
        self._serial = itertools.count(1)
        self._owners = itertools.count(1)
        self._since_drain = 0

    def next_seq(self) -> int:
        return next(self._seq)

    # --- the API ----------------------------------------------------------------------------

    @initialize(
        target=jobs,
        plans=st.lists(st.tuples(st.sampled_from(TENANTS), job_plans()), min_size=2, max_size=6),
    )
    def submit_some(self, plans: list[tuple[str, JobPlan]]) -> Any:
        self.figures.steps += 1
        created = [self._create(tenant, plan) for tenant, plan in plans]
        return multiple(*(job_id for job_id in created if job_id is not None))

    @rule(target=jobs, tenant=st.sampled_from(TENANTS), plan=job_plans())
    def create(self, tenant: str, plan: JobPlan) -> Any:
        self.figures.steps += 1
        job_id = self._create(tenant, plan)
        return job_id if job_id is not None else multiple()

    def _create(self, tenant: str, plan: JobPlan) -> str | None:
        now = self.clock.now
        payload = {"owner": tenant, "serial": next(self._serial), "text": "ç ✓"}
        try:
            job = self.engine.service.create(tenant, parse_job_spec(plan.body(now, payload)))
        except ValidationError:
            assert ModelJob.of(tenant, "-", plan, now, payload) is None, plan
            return None
        model = ModelJob.of(tenant, job.id, plan, now, payload)
        assert model is not None, f"{plan}: accepted, but the model finds no occurrence"
        assert job.next_due_ms == model.first_ms, (plan, job.next_due_ms, model.first_ms)
        self.model[job.id] = model
        self.figures.jobs += 1
        return job.id

    def _finished(self, job: ModelJob) -> bool:
        """Whether the service may see the job as finished (a one-off whose run ended, a
        recurring job whose schedule is over): a transition may then be refused."""
        if job.recurring:
            return job.end_ms is not None and job.end_ms < self.clock.now + 5 * MINUTE_MS
        ran = any(e.job_id == job.job_id for e in self.executions)
        return ran or (job.job_id, job.first_ms) in self._dead_runs()

    def _change(self, job: ModelJob, status: str) -> None:
        job.status = status
        job.changes.append(Change(self.next_seq(), self.clock.now, status))

    @rule(job=jobs)
    def cancel(self, job: str) -> None:
        self.figures.steps += 1
        self._cancel(job)

    def _cancel(self, job_id: str) -> None:
        job = self.model[job_id]
        try:
            view = self.engine.service.cancel(job.tenant, job_id)
        except IllegalTransition:
            assert job.status != "cancelled", job  # cancelling again is a no-op
            assert self._finished(job), job
            return
        assert view.status == JobStatus.CANCELLED
        if job.status != "cancelled":
            self._change(job, "cancelled")

    @rule(job=jobs)
    def pause(self, job: str) -> None:
        self.figures.steps += 1
        self._pause(job)

    def _pause(self, job_id: str) -> None:
        job = self.model[job_id]
        try:
            view = self.engine.service.pause(job.tenant, job_id)
        except IllegalTransition:
            assert not job.recurring or job.status == "cancelled" or self._finished(job), job
            return
        assert job.recurring, job
        assert job.status != "cancelled", job
        assert view.status == JobStatus.PAUSED
        if job.status != "paused":
            self._change(job, "paused")

    @rule(job=jobs)
    def resume(self, job: str) -> None:
        self.figures.steps += 1
        self._resume(job)

    def _resume(self, job_id: str) -> None:
        job = self.model[job_id]
        try:
            view = self.engine.service.resume(job.tenant, job_id)
        except IllegalTransition:
            assert job.status == "cancelled" or self._finished(job), job
            return
        assert job.status != "cancelled", job
        assert view.status in (JobStatus.SCHEDULED, JobStatus.COMPLETED), view.status
        if job.status == "paused":
            self._change(job, "scheduled")

    @rule(job=jobs)
    def run_now(self, job: str) -> None:
        self.figures.steps += 1
        self._run_now(job)

    def _run_now(self, job_id: str) -> None:
        job = self.model[job_id]
        try:
            instant = self.engine.service.run_now(job.tenant, job_id)
        except IllegalTransition:
            assert job.status != "scheduled" or self._finished(job), job
            return
        assert job.status == "scheduled", job
        # The moment asked, or the first millisecond after it that no other run of the job has
        # (the clock stands still between steps: run-nows in one millisecond are common here).
        assert self.clock.now <= instant < self.clock.now + 1_000, (instant, self.clock.now)
        assert instant not in {ms for _, ms in job.run_now}, (instant, job.run_now)
        job.run_now.append((self.next_seq(), instant))

    @rule(job=jobs, data=st.data())
    def other_tenants_cannot_touch(self, job: str, data: st.DataObject) -> None:
        """Invariant 4 at the API: another tenant finds no such job, whatever it asks."""
        self.figures.steps += 1
        owner = self.model[job].tenant
        other = data.draw(st.sampled_from([t for t in TENANTS if t != owner]))
        service = self.engine.service
        for operation in (service.get, service.cancel, service.pause, service.resume):
            try:
                operation(other, job)
            except NotFound:
                continue
            raise AssertionError(f"{other} reached {owner}'s job {job} with {operation}")
        try:
            service.run_now(other, job)
        except NotFound:
            return
        raise AssertionError(f"{other} ran {owner}'s job {job}")

    # --- time and sweeps ---------------------------------------------------------------------

    @precondition(lambda self: self.clock.now - T0 < MAX_ELAPSED_MS)
    @rule(ms=ADVANCES)
    def advance(self, ms: int) -> None:
        self.figures.steps += 1
        self.clock.advance(ms)

    @rule()
    def tick(self) -> None:
        """The EventBridge rule: the coordinator sweeps every shard."""
        self.figures.steps += 1
        self.engine.coordinator.tick()

    @rule(shard=st.integers(0, SHARDS - 1), offset=st.sampled_from(SWEEP_CLOCKS))
    def sweep(self, shard: int, offset: int) -> None:
        """One shard's sweep; its clock may be a minute behind (a stale tick delivered late)
        or ahead (by 25 s, or by 90 s: further than the horizon a writer assumes by itself)."""
        self.figures.steps += 1
        self._sweep(shard, Calls(), offset)

    @rule(shard=st.integers(0, SHARDS - 1), fault=faults(SWEEP_POINTS))
    def sweep_crashes(self, shard: int, fault: Fault) -> None:
        self.figures.steps += 1
        self._sweep(shard, Calls(fault=fault))

    @rule(
        shard=st.integers(0, SHARDS - 1),
        point=st.sampled_from(SWEEP_POINTS),
        nth=st.sampled_from([1, 1, 2, 3]),
        concurrent=st.sampled_from(CONCURRENT),
        offset=st.sampled_from([0, 0, 25_000, 90_000]),
        fault=st.none() | faults(SWEEP_POINTS),
        data=st.data(),
    )
    def sweeps_interleave(
        self,
        shard: int,
        point: tuple[str, str],
        nth: int,
        concurrent: str,
        offset: int,
        fault: Fault | None,
        data: st.DataObject,
    ) -> None:
        """A sweep of the shard (its clock on time or ahead) that, before the n-th call
        of one of its store or queue methods, lets something else happen: another sweep of the
        same shard (with the same or a stale clock), an API call (a submission whose timer
        falls in a bucket the sweep is reading), deliveries. The first sweep then goes on from
        what it had read, and may die too."""
        self.figures.steps += 1

        def meanwhile() -> None:
            self.figures.interleavings += 1
            self._concurrently(concurrent, shard, data)

        hook = Hook(point[0], point[1], nth, meanwhile)
        self._sweep(shard, Calls(fault=fault, hook=hook), offset)

    @rule(
        target=jobs,
        shard=st.integers(0, SHARDS - 1),
        # Calls a sweep makes after raising the horizon: before it reads the buckets, or
        # after (moving its cursor past them, looking at its stuck timers).
        point=st.sampled_from(
            [
                ("timers", "read_due"),
                ("timers", "advance_cursor"),
                ("timers", "parked_due"),
                ("timers", "parked_due"),
            ]
        ),
        offset=st.sampled_from([0, 25_000, 90_000, 90_000]),
        tenant=st.sampled_from(TENANTS),
        plan=job_plans(soon=True),
    )
    def submit_while_sweeping(
        self, shard: int, point: tuple[str, str], offset: int, tenant: str, plan: JobPlan
    ) -> Any:
        """The race the sweep protocol is about (duetime.services.sweep): a job submitted
        while a sweep (whose clock may run ahead) reads the buckets its first run falls in.
        Either the sweep's query sees the new timer, or the writer sees the raised horizon."""
        self.figures.steps += 1
        created: list[str] = []

        def meanwhile() -> None:
            self.figures.interleavings += 1
            job_id = self._create(tenant, plan)
            created.extend([job_id] if job_id is not None else [])

        self._sweep(shard, Calls(hook=Hook(point[0], point[1], 1, meanwhile)), offset)
        return multiple(*created)

    def _sweep(self, shard: int, calls: Calls, offset_ms: int = 0) -> None:
        sent = len(self.engine.queue.sent)
        try:
            self.engine.sweeper(calls, offset_ms).sweep_shard(shard, f"sweep-{next(self._owners)}")
        except Crash:
            self.figures.sweeper_crashes += 1
        finally:
            if offset_ms < 0:
                self.sent_by_slow_clock.update(
                    (m.job_id, m.scheduled_ms) for m in self.engine.queue.sent[sent:]
                )
        if calls.hook is not None and calls.hook.failure is not None:
            raise calls.hook.failure  # a check that failed in what ran concurrently

    def _concurrently(self, what: str, shard: int, data: st.DataObject) -> None:
        if what in ("sweep", "stale sweep"):
            self._sweep(shard, Calls(), -60_000 if what == "stale sweep" else 0)
        elif what == "create":
            self._create(data.draw(st.sampled_from(TENANTS)), data.draw(job_plans()))
        elif what == "deliver":
            self._deliver_everything()
        elif self.model:
            job = data.draw(st.sampled_from(sorted(self.model)))
            {
                "pause": self._pause,
                "resume": self._resume,
                "cancel": self._cancel,
                "run now": self._run_now,
            }[what](job)

    # --- deliveries --------------------------------------------------------------------------

    @rule(rnd=st.randoms(use_true_random=False), batch=st.integers(1, 10), lose=st.booleans())
    def deliver(self, rnd: Any, batch: int, lose: bool) -> None:
        """A worker takes a batch from each queue (queues and records in any order) and
        handles it; with `lose`, the delete of the first finished message is lost."""
        self.figures.steps += 1
        keys = list(ALL_QUEUES)
        rnd.shuffle(keys)
        for key in keys:
            self._deliver_batch(key, batch, Calls(), order=rnd, lose_first=lose)

    @rule(rnd=st.randoms(use_true_random=False), fault=faults(WORKER_POINTS))
    def deliver_crashes(self, rnd: Any, fault: Fault) -> None:
        """A worker invocation that dies at a chosen point: nothing of its batch is deleted."""
        self.figures.steps += 1
        keys = list(ALL_QUEUES)
        rnd.shuffle(keys)
        for key in keys:
            if self._deliver_batch(key, 10, Calls(fault=fault), order=rnd):
                return

    @rule(
        duration=st.sampled_from([2_000, 45_000, 90_000, 200_000, 400_000]),
        concurrent=st.sampled_from([*CONCURRENT, "nothing", "crash"]),
        data=st.data(),
    )
    def deliver_slowly(self, duration: int, concurrent: str, data: st.DataObject) -> None:
        """The next run to execute takes `duration` (past its message's visibility, past its
        lease), while other things happen: its own message comes back to another worker,
        other runs are delivered, sweeps run, its job is paused or cancelled, or its worker
        dies mid-run."""
        self.figures.steps += 1
        rnd = data.draw(st.randoms(use_true_random=False))

        def while_running() -> None:
            self.clock.advance(duration)
            if concurrent == "crash":
                raise Crash("the worker died while the target ran")
            if concurrent != "nothing":
                self.figures.interleavings += 1
                self._concurrently(concurrent, data.draw(st.integers(0, SHARDS - 1)), data)

        self.target_plan = while_running
        keys = list(ALL_QUEUES)
        rnd.shuffle(keys)
        for key in keys:
            self._deliver_batch(key, 1, Calls(), order=rnd)
            if self.target_plan is not while_running:  # a run took it, and has run
                break
        self.target_plan = None

    @rule(data=st.data())
    def duplicate_message(self, data: st.DataObject) -> None:
        """SQS delivers a message twice: a copy of one sent before (any attempt, any age)."""
        self.figures.steps += 1
        sent = self.engine.queue.sent
        if not sent:
            return
        message = sent[data.draw(st.integers(0, len(sent) - 1))]
        self.engine.queue.send([(message, delay_seconds(message.due_ms, self.clock.now))])

    def _deliver_batch(
        self,
        key: tuple[Runtime, Priority],
        limit: int,
        calls: Calls,
        *,
        order: Any = None,
        lose_first: bool = False,
    ) -> bool:
        """Receive a batch and handle its records. Returns whether the invocation died."""
        batch = self.engine.queue.receive(key[0], key[1], limit, 0)
        if order is not None:
            order.shuffle(batch)
        done: list[Delivery] = []
        for delivery in batch:
            result = self._handle(delivery, calls)
            if result is None:  # the invocation died: its whole batch comes back
                return True
            if result.disposition == Disposition.DONE:
                done.append(delivery)
        if lose_first and done:
            done = done[1:]
        self.engine.queue.delete(done)
        return False

    def _handle(self, delivery: Delivery, calls: Calls) -> Result | None:
        handling = Handling()

        def observe(part: str, method: str, args: Any, result: Any) -> None:
            if (part, method) == ("runs", "claim") and result[0] == ClaimOutcome.CLAIMED:
                handling.claimed = True
            elif (part, method) == ("runs", "finish") and result is not None:
                handling.recorded = True

        calls.observe = observe
        executor = self.engine.executor(calls, ModelTarget(self, handling))
        try:
            return executor.handle(delivery)
        except Crash:
            self.figures.worker_crashes += 1
            if handling.claimed and not handling.executions:
                message = self.engine.queue.auth.open(delivery.body)
                self.abandoned.add((message.job_id, message.scheduled_ms))
            return None
        finally:
            for execution in handling.executions:
                execution.recorded = handling.recorded and execution.outcome != "crash"

    def _deliver_everything(self) -> None:
        """Workers keep taking batches until no queue has a visible message."""
        for _ in range(10_000):
            received = 0
            for key in ALL_QUEUES:
                batch = self.engine.queue.receive(key[0], key[1], 10, 0)
                received += len(batch)
                done = []
                for delivery in batch:
                    result = self._handle(delivery, Calls())
                    if result is not None and result.disposition == Disposition.DONE:
                        done.append(delivery)
                self.engine.queue.delete(done)
            if not received:
                return
        raise AssertionError("the queues never went quiet")

    # --- drains and liveness -----------------------------------------------------------------

    @precondition(lambda self: self._since_drain >= 8)
    @rule()
    def drain(self) -> None:
        """Faults stop for a while: ticks every minute, deliveries every 20 s. Then every
        occurrence the model is sure of has run."""
        self.figures.steps += 1
        self._drain()

    def _drain(self) -> None:
        start = self.clock.now
        drain = Drain(start, start + SETTLE_MS, start + CUTOFF_MS)
        next_tick = start
        while self.clock.now < start + DRAIN_MS:
            if self.clock.now >= next_tick:
                self.engine.coordinator.tick()
                next_tick += MINUTE_MS
            self._deliver_everything()
            self.clock.advance(DRAIN_STEP_MS)
        self._deliver_everything()
        self._check_executions()
        self._check_liveness(drain)
        self.figures.drains += 1
        self._since_drain = 0

    def _required(self, job: ModelJob, drain: Drain) -> list[int]:
        """The runs of `job` the model is sure must have started by the end of `drain`.

        - Nothing of a job paused or cancelled now: a change drops the runs not yet started,
          whenever they were due (the worker reads the job before each run).
        - A one-off never cancelled: its instant. A run-now after the last change: its instant.
        - A recurring job with catch-up `all` (7-day window): every occurrence from its first
          (from its resume, if it was paused) to the cutoff: none is ever skipped.
        - Other catch-up modes: occurrences from the drain's settling point, planned on time.
        """
        if job.status != "scheduled":
            return []
        last = job.changes[-1] if job.changes else None
        wanted = [ms for seq, ms in job.run_now if last is None or seq > last.seq]
        since = job.first_ms if last is None else last.ms
        if job.recurring and job.plan.catchup != "all":
            since = max(since, drain.settle_ms)
        wanted += job.occurrences(since, drain.cutoff_ms)
        return sorted({ms for ms in wanted if ms <= drain.cutoff_ms})

    def _dead_runs(self) -> set[tuple[str, int]]:
        return {
            (message.job_id, message.scheduled_ms)
            for dead in self.engine.queue.dead.values()
            for message, _ in dead
        }

    def _check_liveness(self, drain: Drain) -> None:
        """Invariant 1: every occurrence the model is sure of ran at least once; those due
        after the settling point on time (unless a sweep whose clock was behind sent them). A
        run may instead be dead (in a DLQ with its reason) without running only if a worker
        died holding it, using up its last attempt."""
        dead = self._dead_runs()
        lost = []
        for job in self.model.values():
            for scheduled in self._required(job, drain):
                self.figures.required += 1
                tally = self.tallies.get((job.job_id, scheduled))
                if tally is not None:
                    late = tally.first_start_ms - scheduled
                    # A sweep plans a chain up to 10-odd minutes ahead (duetime.domain.planning):
                    # one whose clock was behind sent those runs late, whenever they fall.
                    slow = (job.job_id, scheduled) in self.sent_by_slow_clock
                    if scheduled >= drain.settle_ms and not slow:
                        assert late <= ON_TIME_MS, (
                            f"run {job.job_id}@{scheduled} of {job.plan} started {late} ms "
                            "late in a drain"
                        )
                    continue
                if (job.job_id, scheduled) in dead and (job.job_id, scheduled) in self.abandoned:
                    self.figures.dead_unexecuted += 1
                    continue
                lost.append((job.job_id, scheduled, job.plan, job.changes, job.run_now))
        self.figures.lost += len(lost)
        assert not lost, f"runs lost (never started): {lost}"
        # A run that started ends: it succeeds, or fails after its last attempt (the retry
        # budget), unless its job was paused or cancelled since (its retries are dropped).
        for key, tally in self.tallies.items():
            job = self.model[key[0]]
            changed = job.changes and job.changes[-1].seq > tally.first_seq
            if job.status != "scheduled" or changed or tally.first_start_ms > drain.cutoff_ms:
                continue
            record = self.engine.runs.get(*key)
            assert record is not None, key
            assert record.status in TERMINAL_RUN_STATUSES, (
                f"run {key} of {job.plan} started but never ended: {record}"
            )

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def every_execution_is_explained(self) -> None:
        self._since_drain += 1
        self._check_executions()

    def _check_executions(self) -> None:
        for execution in self.executions[self._checked :]:
            self._check_execution(execution)
        self._checked = len(self.executions)

    def _check_execution(self, execution: Execution) -> None:
        job = self.model.get(execution.job_id)
        assert job is not None, f"an execution of a job nobody submitted: {execution}"
        # 4. The target sees the job's owner and its payload, nobody else's.
        assert execution.tenant == job.tenant, execution
        assert execution.payload == job.payload, execution
        assert execution.target == HandlerTarget(MODEL_TARGET), execution
        # No run that the job does not have, and none before its instant.
        assert job.may_run(execution.scheduled_ms), f"unexpected run {execution} of {job}"
        assert execution.started_ms >= execution.scheduled_ms, f"started early: {execution}"
        # 2. Nothing starts while the job is paused or cancelled (the worker reads it first).
        assert execution.status_at_start == "scheduled", (execution, job.changes)
        # ... nor after a resume, if it fell due while paused: a pause drops what was handed
        # over before it (its messages carry the older generation).
        for paused, resumed in job.paused_windows():
            assert not paused.ms < execution.scheduled_ms < resumed.ms, (
                f"a run due while its job was paused ran: {execution}; {job.changes}"
            )
        # 3. A run executes again only after an execution that licences it: a failure with
        #    attempts left, or an execution whose outcome was never recorded by its worker.
        key = (execution.job_id, execution.scheduled_ms)
        tally = self.tallies.setdefault(key, RunTally())
        assert tally.executions <= tally.licences, (
            f"duplicate execution outside the documented windows: {execution}; "
            f"before it {tally}; all: {[e for e in self.executions if e.job_id == key[0]]}"
        )
        if not tally.executions:
            tally.first_seq, tally.first_start_ms = execution.seq, execution.started_ms
        tally.executions += 1
        tally.succeeded = tally.succeeded or execution.outcome == "ok"
        if execution.outcome == "fail" and execution.attempt < job.plan.max_attempts:
            tally.licences += 1
            tally.retries += 1
        elif not execution.recorded:
            tally.licences += 1
            tally.unrecorded += 1

    @invariant()
    def every_run_record_has_its_job(self) -> None:
        """5. No run record without its job (of the same tenant). And a run recorded as
        succeeded was executed successfully; one recorded as failed used its last attempt."""
        self._check_executions()  # the tallies, whatever order the invariants run in
        for run in self.engine.runs.all():
            job = self.engine.jobs.get(run.tenant, run.job_id)
            assert job is not None, f"a run record without a job: {run}"
            model = self.model.get(run.job_id)
            assert model is not None, run
            assert model.tenant == run.tenant, run
            if run.status == RunStatus.SUCCEEDED:
                tally = self.tallies.get((run.job_id, run.scheduled_ms), RunTally())
                assert tally.succeeded, f"recorded as succeeded, never executed: {run}"
            elif run.status == RunStatus.FAILED:
                # Or a retry dropped with its job (paused or cancelled before it): the run
                # ends failed with its last error (RunExecutor._end_dropped).
                last = run.attempts[-1].error if run.attempts else None
                if last is not None and "; not retried: the job " in last:
                    assert {"paused", "cancelled"} & {c.status for c in model.changes}, run
                    continue
                assert run.attempt == model.plan.max_attempts, f"failed early: {run}"

    @invariant()
    def dead_runs_used_their_attempts(self) -> None:
        """A run goes to its dead-letter queue only after its last attempt failed."""
        for dead in self.engine.queue.dead.values():
            for message, reason in dead:
                job = self.model[message.job_id]
                assert message.attempt == job.plan.max_attempts, (message, reason)
                assert reason.startswith(f"attempt {message.attempt} of {message.attempt}: ")

    def teardown(self) -> None:
        if _failing():
            return  # the failure is the report: no drain on top of it
        self._drain()
        figures = self.figures
        figures.examples = 1
        figures.executions = len(self.executions)
        figures.runs = len(self.tallies)
        for tally in self.tallies.values():
            duplicates = max(0, tally.executions - 1 - tally.retries)
            figures.duplicates += duplicates
            figures.duplicates_explained += min(duplicates, tally.unrecorded)
        for name in Figures.__dataclass_fields__:
            setattr(FIGURES, name, getattr(FIGURES, name) + getattr(figures, name))


def _failing() -> bool:
    """Whether teardown runs because a step or an invariant failed (hypothesis calls it in a
    `finally`, where the exception being raised is the one being handled)."""
    import sys

    return sys.exc_info()[0] is not None


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The services log every run and sweep and count metrics (printed as EMF every 100
    values): both are silenced while the machine runs."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    provider: Any = metrics.provider
    provider.add_metric = lambda *args, **kwargs: None
    try:
        yield
    finally:
        del provider.add_metric
        logging.disable(previous)
