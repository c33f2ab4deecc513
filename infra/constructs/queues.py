"""SQS queues: one per runtime × priority, each with its dead-letter queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Duration, Stack
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from duetime.domain.jobs import Priority, Runtime
from duetime.resources import DLQ_RETENTION_SECONDS, MAX_RECEIVE_COUNT
from duetime.settings import queue_key

if TYPE_CHECKING:
    from infra.props import SchedulerProps

# A message waits at most this long for a worker (the DLQ keeps it longer: SQS counts a
# message's age from its first enqueue, so the DLQ's retention must exceed the source's).
QUEUE_RETENTION = Duration.days(4)


@dataclass(frozen=True)
class RunQueue:
    runtime: Runtime
    priority: Priority
    queue: sqs.Queue
    dlq: sqs.Queue

    @property
    def key(self) -> str:
        return queue_key(self.runtime, self.priority)


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
        """The DUETIME_QUEUES value: {"lambda/normal": {"url": ..., "dlq_url": ...}, ...}."""
        return Stack.of(self).to_json_string(
            {q.key: {"url": q.queue.queue_url, "dlq_url": q.dlq.queue_url} for q in self.run_queues}
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
        queue = sqs.Queue(
            self,
            name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=QUEUE_RETENTION,
            visibility_timeout=Duration.seconds(self._props.visibility_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=MAX_RECEIVE_COUNT),
        )
        return RunQueue(runtime, priority, queue, dlq)
