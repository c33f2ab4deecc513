"""Worker Lambda: SQS event source mapping with ReportBatchItemFailures.

Only the records that must be delivered again are reported; the handler never raises out of
the batch (a raise would make SQS redeliver the whole batch, re-running finished work).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from duetime.observability import logger, metrics, tracer
from duetime.ports import Delivery
from duetime.services.execute import Disposition
from duetime.wiring import components

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class RetryLater(Exception):
    """Marks a record as failed so SQS delivers it again after its visibility timeout."""


def record_handler(record: SQSRecord) -> str:
    parts = components()
    delivery = Delivery(
        message_id=record.message_id,
        receipt_handle=record.receipt_handle,
        body=record.body,
        receive_count=int(record.attributes.approximate_receive_count or 1),
        queue=parts.queue.url_for_arn(record.event_source_arn),
    )
    result = parts.executor.handle(delivery)
    if result.disposition == Disposition.RETRY_LATER:
        raise RetryLater(result.detail)
    return result.detail


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(  # type: ignore[return-value]
        event=event, record_handler=record_handler, processor=processor, context=context
    )
