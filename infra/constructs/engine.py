"""The scheduling engine on Lambda: the once-a-minute sweeper and the SQS worker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from duetime.domain.jobs import Runtime
from infra.constructs.functions import grant_targets

if TYPE_CHECKING:
    from infra.constructs.data import Data
    from infra.constructs.functions import FunctionFactory
    from infra.constructs.queues import Queues
    from infra.scheduler import SchedulerProps

# DynamoDB actions per table, from what each role's code calls (duetime.adapters.dynamodb):
# the sweeper reads jobs in batches and rewrites them conditionally (a recurring job's next
# occurrence, a completed chain); it reads, leases and advances timer partitions and writes
# the next timers.
SWEEPER_JOBS_ACTIONS = ("dynamodb:BatchGetItem", "dynamodb:PutItem")
SWEEPER_TIMERS_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:UpdateItem",
)
# The worker reads the job (cancel/pause check) and claims/records its run (conditional puts).
# It reads the tenant's webhook secret (an item of the jobs table) to sign HTTP deliveries and
# creates it, with a conditional put, if the tenant has none yet.
WORKER_JOBS_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem")
WORKER_RUNS_ACTIONS = ("dynamodb:PutItem",)
SEND = "sqs:SendMessage"  # also authorizes SendMessageBatch
CHANGE_VISIBILITY = "sqs:ChangeMessageVisibility"

SWEEP_SCHEDULE = events.Schedule.rate(Duration.minutes(1))


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
        self.sweep_rule = self._sweep_rule()
        self.worker = self._worker()
        self.worker_sources = self._worker_sources()

    def _sweeper(self) -> lambda_.Function:
        props, data = self._props, self._data
        sweeper = self._factory.create(
            self,
            "Sweeper",
            name="sweeper",
            description="duetime sweeper: hands timers due soon to SQS, once a minute",
            timeout_seconds=props.sweeper_timeout_seconds,
            memory_mib=1024,  # parallel partition queries: more memory, more CPU
            environment=self._factory.engine_env,
            reserved_concurrency=props.sweeper_reserved_concurrency,
        )
        # A failed or late tick is not retried: the next sweep resumes from the watermarks,
        # and an old tick replayed later would only overlap it.
        sweeper.configure_async_invoke(retry_attempts=0, max_event_age=Duration.minutes(2))
        data.jobs.grant(sweeper, *SWEEPER_JOBS_ACTIONS)
        data.timers.grant(sweeper, *SWEEPER_TIMERS_ACTIONS)
        for run_queue in self._queues.run_queues:  # recurring jobs of every runtime/priority
            run_queue.queue.grant(sweeper, SEND)
        return sweeper

    def _sweep_rule(self) -> events.Rule:
        rule = events.Rule(
            self,
            "SweepSchedule",
            description="duetime: run the sweeper every minute",
            schedule=SWEEP_SCHEDULE,
        )
        rule.add_target(
            targets.LambdaFunction(
                self.sweeper, retry_attempts=2, max_event_age=Duration.minutes(2)
            )
        )
        return rule

    def _worker(self) -> lambda_.Function:
        props, data = self._props, self._data
        worker = self._factory.create(
            self,
            "Worker",
            name="worker",
            description="duetime worker: claims, executes and records runs from the lambda queues",
            timeout_seconds=props.worker_timeout_seconds,
            environment=self._factory.engine_env,
            reserved_concurrency=props.worker_reserved_concurrency,
        )
        data.jobs.grant(worker, *WORKER_JOBS_ACTIONS)
        data.runs.grant(worker, *WORKER_RUNS_ACTIONS)
        data.grant_secrets(worker)  # sign HTTP deliveries
        for run_queue in self._queues.of_runtime(Runtime.LAMBDA):
            # Retries go back to the run's own queue; early or busy runs change visibility.
            run_queue.queue.grant(worker, SEND, CHANGE_VISIBILITY)
            run_queue.dlq.grant(worker, SEND)  # a run out of attempts, with its reason
        grant_targets(worker, props.target_resource_arns, props.target_kms_key_arns)
        return worker

    def _worker_sources(self) -> dict[str, sources.SqsEventSource]:
        """One event source mapping per lambda queue, partial batch responses on (the handler
        reports only the records to deliver again), concurrency capped per priority."""
        props = self._props
        mappings: dict[str, sources.SqsEventSource] = {}
        for run_queue in self._queues.of_runtime(Runtime.LAMBDA):
            source = sources.SqsEventSource(
                run_queue.queue,
                batch_size=props.worker_batch_size,
                report_batch_item_failures=True,
                max_concurrency=props.worker_max_concurrency.of(run_queue.priority),
            )
            self.worker.add_event_source(source)
            mappings[run_queue.key] = source
        return mappings
