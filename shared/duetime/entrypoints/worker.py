"""Worker Lambda: SQS event source mapping with ReportBatchItemFailures.

Only the records that must be delivered again are reported; the handler never raises out of
the batch (a raise would make SQS redeliver the whole batch, re-running finished work).

The records of a batch run concurrently (one thread each): processed one after another, the
tenth job of a batch would start only when the nine before it had finished, late by nine
target durations.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime.observability import logger, metrics, serialized_metrics, tracer
from duetime.ports import Delivery
from duetime.services.results import Disposition
from duetime.wiring import Components, components

# One thread per record of the largest batch the event source mapping delivers (infra sets
# batch size 10): a batch's runs all start at once.
BATCH_THREADS = 10

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class RetryLater(Exception):
    """Marks a record as failed so SQS delivers it again after its visibility timeout."""


class _Worker:
    """One worker function's state: its batch processor holds the batch being processed, so
    hosts that invoke several at once (the local stack's pollers) make one each."""

    def __init__(self, parts: Callable[[], Components]) -> None:
        self._parts = parts
        self.processor = AsyncBatchProcessor(
            event_type=EventType.SQS, raise_on_entire_batch_failure=False
        )
        self._threads = ThreadPoolExecutor(BATCH_THREADS, thread_name_prefix="run")
        # Copies of one message in one batch (a re-sent batch after a crash) run one after
        # another, as they would in separate batches: the first runs the target, the next finds
        # it done and is deleted. Run concurrently, the next would find the run busy and come
        # back after the lease.
        self._copies_lock = threading.Lock()
        self._copies: dict[str, tuple[threading.Lock, int]] = {}  # body -> (lock, holders)

    async def record_handler(self, record: SQSRecord, lambda_context: LambdaContext) -> str:
        return await asyncio.get_running_loop().run_in_executor(
            self._threads,
            self.handle_in_turn,
            record,
            lambda_context.get_remaining_time_in_millis,
        )

    def handle_in_turn(self, record: SQSRecord, remaining_ms: Callable[[], int] | None) -> str:
        with self._copies_lock:
            lock, holders = self._copies.get(record.body, (threading.Lock(), 0))
            self._copies[record.body] = (lock, holders + 1)
        try:
            with lock:
                return self.handle_record(record, remaining_ms)
        finally:
            with self._copies_lock:
                lock, holders = self._copies[record.body]
                if holders == 1:
                    del self._copies[record.body]
                else:
                    self._copies[record.body] = (lock, holders - 1)

    def handle_record(self, record: SQSRecord, remaining_ms: Callable[[], int] | None) -> str:
        parts = self._parts()
        delivery = Delivery(
            message_id=record.message_id,
            receipt_handle=record.receipt_handle,
            body=record.body,
            receive_count=int(record.attributes.approximate_receive_count or 1),
            queue=parts.queue.url_for_arn(record.event_source_arn),
        )
        # A run starts only with time left for its timeout and recording (see RunExecutor). A
        # failure (a store call, say) is logged there and back in seconds, not after the
        # queue's visibility timeout (6 x the function's: 90 minutes as deployed); raised, it
        # is this record's failure in the batch's answer.
        result = parts.executor.handle(delivery, remaining_ms=remaining_ms)
        if result.disposition == Disposition.RETRY_LATER:
            raise RetryLater(result.detail)
        return result.detail


def make_handler(parts: Callable[[], Components]) -> Handler:
    """A worker function over the components `parts()` returns, with a batch processor and
    threads of its own (the local stack makes one per event source poller)."""
    worker = _Worker(parts)

    @logger.inject_lambda_context
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        # Built here, once an invocation: a worker that cannot be (a setting missing from its
        # environment) fails its invocation, seen as a Lambda error and by its alarm. Built
        # for each record, it failed every record silently (until 2026-11-30).
        parts()
        with serialized_metrics():  # the batch's threads share the process's metric set
            return async_process_partial_response(  # type: ignore[return-value]
                event=event,
                record_handler=worker.record_handler,
                processor=worker.processor,
                context=context,
            )

    return handler


# `components` is looked up at each invocation: a test may put its own components in its place.
handler = make_handler(lambda: components())  # noqa: PLW0108
