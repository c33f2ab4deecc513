"""The scheduling engine on Lambda: the once-a-minute coordinator and the shard sweeps it
starts, the daily reconciler, and the SQS worker.

    EventBridge rate(1 minute) ──▶ coordinator ──(async invoke, {"shard": n}, per shard)──▶ sweeper
    EventBridge rate(1 day)    ──▶ reconciler (re-arms recurring jobs without a live timer)
    lambda run queues ──(event source mappings)──▶ worker
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from duetime.domain.jobs import Runtime
from duetime.settings import Env

if TYPE_CHECKING:
    from infra.constructs.data import Data
    from infra.constructs.functions import FunctionFactory
    from infra.constructs.queues import Queues
    from infra.props import SchedulerProps

# DynamoDB actions per table, from what each role's code calls (duetime.adapters.dynamodb):
# the coordinator reads the shard count (and raises it after a deployment added shards) and
# every shard's sweep state.
COORDINATOR_TIMERS_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem")
# A shard sweep reads jobs in batches and rewrites them conditionally (a recurring job's next
# occurrence, a completed chain: the tenant's recurring-job counter updated, the job read
# again when it changed meanwhile); it reads, leases and advances its shard's partitions, writes
# the next timers, and parks a timer whose hand-over failed (re-keyed with each attempt,
# removed once handed over).
SWEEPER_JOBS_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)
SWEEPER_TIMERS_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)
# The reconciler scans the jobs table for scheduled jobs, marks a chain whose schedule is over
# completed (as the sweep does) and sets each tenant's recurring-job counter to what it found;
# it looks for each chain's live timer (batch get), lists the stuck timers
# (query), and re-arms a broken chain through the dispatcher (timers written, the shard's
# sweep state read and moved).
RECONCILER_JOBS_ACTIONS = (
    "dynamodb:Scan",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)
RECONCILER_TIMERS_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:UpdateItem",
)
# ...and whether a day's overdue one-offs have a run record (batch get).
RECONCILER_RUNS_ACTIONS = ("dynamodb:BatchGetItem",)
# The worker reads the job and its dependents' item together (cancel/pause check; batch get,
# shared by the runs that wake together), the dependents' jobs it triggers (batch get), and
# an overlap job's gate (get, conditional put); it claims/records its run (conditional puts)
# and reads the run holding a gate. It reads the tenant's webhook secret (an item of the jobs
# table) to sign HTTP deliveries and creates it, with a conditional put, if the tenant has
# none yet. A claim withdrawn before its target starts (its job changed before the claim, or
# the worker stops) deletes a first attempt's record (DeleteItem; missing until 2026-11-30).
# tests/integration/test_grants_cover_calls.py checks these against the calls.
WORKER_JOBS_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem")
WORKER_RUNS_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem")
SEND = "sqs:SendMessage"  # also authorizes SendMessageBatch
CHANGE_VISIBILITY = "sqs:ChangeMessageVisibility"
INVOKE = "lambda:InvokeFunction"

SWEEP_SCHEDULE = events.Schedule.rate(Duration.minutes(1))
RECONCILE_SCHEDULE = events.Schedule.rate(Duration.days(1))
# A tick older than this is dropped: the next one (a minute later) does its work.
TICK_MAX_AGE = Duration.minutes(2)
RECONCILER_MEMORY_MIB = 1024  # parallel scan segments and timer look-ups
# The coordinator's reservation, when the sweeps have one: a tick's invocation and one
# overlapping it.
COORDINATOR_RESERVED_CONCURRENCY = 2
# The worker's memory, chosen from a measurement (scripts/worker_footprint.py) by the rule in
# docs/performance.md ("Worker memory"; scripts/scale_model.py `worker_memory_rule`): 1.5 × its
# peak RSS, and the CPU share (1 vCPU at 1,769 MB) that does a batch's CPU work within the
# batch's busy time.
WORKER_MEMORY_MIB = 768


class Engine(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        factory: FunctionFactory,
        data: Data,
        queues: Queues,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self._factory = factory
        self._data = data
        self._queues = queues
        self.sweeper = self._sweeper()
        self.coordinator = self._coordinator()
        self.sweep_rule = self._sweep_rule()
        self.reconciler = self._reconciler()
        self.reconcile_rule = self._reconcile_rule()
        self.worker = self._worker()
        self.worker_sources = self._worker_sources()

    def _sweeper(self) -> lambda_.Function:
        """One shard's sweep per invocation, started by the coordinator (no schedule)."""
        props, data = self._props, self._data
        sweeper = self._factory.create(
            self,
            "Sweeper",
            name="sweeper",
            description="duetime sweeper: hands one shard's timers due soon to SQS "
            "(started by the coordinator, once a minute per shard)",
            timeout_seconds=props.sweeper_timeout_seconds,
            memory_mib=props.sweeper_memory_mib,  # parallel partition queries: memory buys CPU
            # No DUETIME_SWEEPER_FUNCTION here: it would name the function in its own
            # environment (a circular reference); only the coordinator starts sweeps.
            environment=self._factory.engine_env,
            reserved_concurrency=props.sweeper_reserved_concurrency,
        )
        # A failed or late shard sweep is not retried: the next tick resumes it from the
        # shard's watermarks, and an old sweep replayed later would only overlap it.
        sweeper.configure_async_invoke(retry_attempts=0, max_event_age=TICK_MAX_AGE)
        data.jobs.grant(sweeper, *SWEEPER_JOBS_ACTIONS)
        data.timers.grant(sweeper, *SWEEPER_TIMERS_ACTIONS)
        for run_queue in self._queues.run_queues:  # recurring jobs of every runtime/priority
            run_queue.grant(sweeper, SEND)
        return sweeper

    def _coordinator(self) -> lambda_.Function:
        """Once a minute: one asynchronous sweeper invocation per shard."""
        props = self._props
        coordinator = self._factory.create(
            self,
            "Coordinator",
            name="coordinator",
            description="duetime coordinator: starts one sweep per timer shard, once a minute",
            timeout_seconds=props.coordinator_timeout_seconds,
            # Without the run-message key (so without its grant): it signs and reads none.
            environment={
                **{
                    k: v
                    for k, v in self._factory.engine_env.items()
                    if k != Env.RUN_SIGNING_SECRET_ARN
                },
                Env.SWEEPER_FUNCTION: self.sweeper.function_name,
            },
            # Reserved with the sweeps it starts, else a burst of workers emptying the account's
            # pool would stop every sweep with it (until 2026-11-30: an outside audit).
            reserved_concurrency=(
                COORDINATOR_RESERVED_CONCURRENCY
                if props.sweeper_reserved_concurrency is not None
                else None
            ),
        )
        # Not retried either: a retry would start every shard again; the next tick does.
        coordinator.configure_async_invoke(retry_attempts=0, max_event_age=TICK_MAX_AGE)
        self._data.timers.grant(coordinator, *COORDINATOR_TIMERS_ACTIONS)
        # The unqualified function only (the coordinator invokes $LATEST by name): not
        # `grant_invoke`, which adds its versions and aliases (`<arn>:*`).
        iam.Grant.add_to_principal(
            grantee=coordinator, actions=[INVOKE], resource_arns=[self.sweeper.function_arn]
        )
        return coordinator

    def _sweep_rule(self) -> events.Rule:
        rule = events.Rule(
            self,
            "SweepSchedule",
            description="duetime: run the sweep coordinator every minute",
            schedule=SWEEP_SCHEDULE,
        )
        rule.add_target(
            targets.LambdaFunction(self.coordinator, retry_attempts=2, max_event_age=TICK_MAX_AGE)
        )
        return rule

    def _reconciler(self) -> lambda_.Function:
        props, data = self._props, self._data
        reconciler = self._factory.create(
            self,
            "Reconciler",
            name="reconciler",
            description="duetime reconciler: re-arms recurring jobs without a live timer and "
            "overdue one-offs that never ran, daily",
            timeout_seconds=props.reconciler_timeout_seconds,
            memory_mib=RECONCILER_MEMORY_MIB,
            environment=self._factory.engine_env,
        )
        # A failed run is not retried at once (it would scan the whole table again): the
        # next day's run re-arms what this one could not, and the errors alarm tells.
        reconciler.configure_async_invoke(retry_attempts=0)
        data.jobs.grant(reconciler, *RECONCILER_JOBS_ACTIONS)
        data.timers.grant(reconciler, *RECONCILER_TIMERS_ACTIONS)
        data.runs.grant(reconciler, *RECONCILER_RUNS_ACTIONS)
        for run_queue in self._queues.run_queues:  # a re-armed chain's due occurrences
            run_queue.grant(reconciler, SEND)
        return reconciler

    def _reconcile_rule(self) -> events.Rule:
        rule = events.Rule(
            self,
            "ReconcileSchedule",
            description="duetime: re-arm broken recurring chains once a day",
            schedule=RECONCILE_SCHEDULE,
        )
        rule.add_target(targets.LambdaFunction(self.reconciler, retry_attempts=2))
        return rule

    def _worker(self) -> lambda_.Function:
        props, data = self._props, self._data
        worker = self._factory.create(
            self,
            "Worker",
            name="worker",
            description="duetime worker: claims, executes and records runs from the lambda queues",
            timeout_seconds=props.worker_timeout_seconds,
            memory_mib=WORKER_MEMORY_MIB,
            environment=self._factory.worker_env,
            reserved_concurrency=props.worker_reserved_concurrency,
        )
        data.jobs.grant(worker, *WORKER_JOBS_ACTIONS)
        data.runs.grant(worker, *WORKER_RUNS_ACTIONS)
        data.grant_secrets(worker)  # sign HTTP deliveries
        for run_queue in self._queues.of_runtime(Runtime.LAMBDA):
            # Retries go back to the run's own queue; early or busy runs change visibility.
            run_queue.grant(worker, SEND, CHANGE_VISIBILITY)
            run_queue.dlq.grant(worker, SEND)  # a run out of attempts, with its reason
        for run_queue in self._queues.of_runtime(Runtime.FARGATE):
            run_queue.grant(worker, SEND)  # a dependent on the other runtime: its run
        if worker.role is None:  # a Function built without a role of its own: never here
            raise RuntimeError("the worker function has no role")
        self._factory.reach_targets(worker.role)  # targets: as the target role only
        return worker

    def _worker_sources(self) -> dict[str, list[sources.SqsEventSource]]:
        """One event source mapping per lambda queue (per lane of it: `queue_lanes`), partial
        batch responses on (the handler reports only the records to deliver again). Standard
        mode caps concurrency per priority, per lane; a priority with `worker_pollers` gets
        provisioned mode instead (dedicated pollers: the two are mutually exclusive)."""
        props = self._props
        mappings: dict[str, list[sources.SqsEventSource]] = {}
        for run_queue, lane in (
            (q, lane) for q in self._queues.of_runtime(Runtime.LAMBDA) for lane in q.lanes
        ):
            pollers = props.pollers_of(run_queue.priority)
            source = sources.SqsEventSource(
                lane,
                batch_size=props.worker_batch_size,
                report_batch_item_failures=True,
                max_concurrency=(
                    props.worker_max_concurrency.of(run_queue.priority) if pollers is None else None
                ),
                provisioned_poller_config=(
                    None
                    if pollers is None
                    else lambda_.ProvisionedPollerConfig(
                        minimum_pollers=pollers.minimum, maximum_pollers=pollers.maximum
                    )
                ),
            )
            self.worker.add_event_source(source)
            mappings.setdefault(run_queue.key, []).append(source)
        return mappings
