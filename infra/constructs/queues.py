"""SQS queues: one per runtime × priority (or several: its lanes), each with its dead-letter
queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from duetime.domain.jobs import Priority, Runtime
from duetime.resources import DLQ_RETENTION_SECONDS, MAX_RECEIVE_COUNT
from duetime.settings import queue_key

if TYPE_CHECKING:
    from aws_cdk import aws_iam as iam

    from infra.props import SchedulerProps

# A message waits at most this long for a worker (the DLQ keeps it longer: SQS counts a
# message's age from its first enqueue, so the DLQ's retention must exceed the source's).
QUEUE_RETENTION = Duration.days(4)


@dataclass(frozen=True)
class RunQueue:
    """A runtime × priority's queue: its lanes (the first keeps the construct id of a queue
    without lanes, `LambdaHigh`; then `LambdaHighLane2`, ...) and their shared DLQ."""

    runtime: Runtime
    priority: Priority
    lanes: tuple[sqs.Queue, ...]
    dlq: sqs.Queue

    @property
    def key(self) -> str:
        return queue_key(self.runtime, self.priority)

    @property
    def queue(self) -> sqs.Queue:
        """The first lane (the queue, when there is one lane)."""
        return self.lanes[0]

    def grant(self, grantee: iam.IGrantable, *actions: str) -> None:
        """`actions` on every lane."""
        for lane in self.lanes:
            lane.grant(grantee, *actions)

    def visible(self, **options: Any) -> cloudwatch.IMetric:
        """Messages waiting, over every lane (their sum)."""
        return self._over_lanes("SUM", "metric_approximate_number_of_messages_visible", options)

    def oldest_age(self, **options: Any) -> cloudwatch.IMetric:
        """The oldest message's age, over every lane (their maximum)."""
        return self._over_lanes("MAX", "metric_approximate_age_of_oldest_message", options)

    def _over_lanes(
        self, function: str, metric: str, options: dict[str, Any]
    ) -> cloudwatch.IMetric:
        metrics = [getattr(lane, metric)(**options) for lane in self.lanes]
        if len(metrics) == 1:
            found: cloudwatch.IMetric = metrics[0]
            return found
        # Ids unique within a graph that shows several queues: e.g. sum_lambda_normal_2.
        ids = [f"{function}_{self.runtime.value}_{self.priority.value}_{i}".lower() for i in
               range(len(metrics))]  # fmt: skip
        return cloudwatch.MathExpression(
            expression=f"{function}([{', '.join(ids)}])",
            using_metrics=dict(zip(ids, metrics, strict=True)),
            label=options.get("label"),
            period=options.get("period"),
        )


class Queues(Construct):
    """Standard queues, SQS-managed encryption, TLS only. Messages carry the tenant as
    `MessageGroupId` (SQS fair queues), so one noisy tenant does not delay the others."""

    def __init__(self, scope: Construct, construct_id: str, props: SchedulerProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self.run_queues: tuple[RunQueue, ...] = tuple(
            self._run_queue(runtime, priority) for runtime in Runtime for priority in Priority
        )

    def get(self, runtime: Runtime, priority: Priority) -> RunQueue:
        return next(q for q in self.run_queues if (q.runtime, q.priority) == (runtime, priority))

    def of_runtime(self, runtime: Runtime) -> tuple[RunQueue, ...]:
        return tuple(q for q in self.run_queues if q.runtime == runtime)

    def settings_json(self) -> str:
        """The DUETIME_QUEUES value: {"lambda/normal": {"url": ..., "dlq": <name>}, ...}, a
        queue with lanes also "more_lanes": [names] (QueueUrls.from_json reads it). Names,
        not URLs, where the URL's account and region are the first lane's: the functions'
        environment holds 4 KB (docs/scaling.md, "Lanes")."""
        return Stack.of(self).to_json_string(
            {
                q.key: {"url": q.queue.queue_url, "dlq": q.dlq.queue_name}
                | ({"more_lanes": [n.queue_name for n in q.lanes[1:]]} if q.lanes[1:] else {})
                for q in self.run_queues
            }
        )

    def _run_queue(self, runtime: Runtime, priority: Priority) -> RunQueue:
        name = f"{runtime.value.capitalize()}{priority.value.capitalize()}"
        dlq = sqs.Queue(
            self,
            f"{name}Dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.seconds(DLQ_RETENTION_SECONDS),
        )
        # Each lane: the same settings, redriving to the one DLQ of the runtime × priority.
        lanes = tuple(
            sqs.Queue(
                self,
                name if n == 1 else f"{name}Lane{n}",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=QUEUE_RETENTION,
                visibility_timeout=Duration.seconds(self._props.visibility_timeout_seconds),
                dead_letter_queue=sqs.DeadLetterQueue(
                    queue=dlq, max_receive_count=MAX_RECEIVE_COUNT
                ),
            )
            for n in range(1, self._props.lanes_of(runtime, priority) + 1)
        )
        return RunQueue(runtime, priority, lanes, dlq)
