"""AWS targets: SQS, SNS, EventBridge and Lambda, through clients built once (AwsClients)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypedDict

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from duetime.adapters.aws_errors import is_retryable
from duetime.domain.invocation import Invocation, TargetError, delivery_metadata, envelope, to_json
from duetime.domain.targets import EventBridgeTarget, LambdaTarget, SnsTarget, SqsTarget
from duetime.observability import logger
from duetime.targets.clients import AwsClients

if TYPE_CHECKING:
    from mypy_boto3_sns.type_defs import MessageAttributeValueTypeDef as SnsAttribute
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef as SqsAttribute


@contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Translate botocore's exceptions into TargetError at the boundary, keeping the cause."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        message = str(error.get("Message", "")) or str(exc)
        if "AccessDenied" in code or code == "AuthorizationError":
            # AWS's words name the operator's account and the target role (the tenant reads
            # the run's error); the operator's log keeps them. (An outside audit's note.)
            logger.warning("a target refused the target role", extra={"aws_message": message})
            message = "the deployment's target role may not reach it (targetResourceArns)"
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        raise TargetError(
            f"{action} failed: {code}: {message}", retryable=is_retryable(code, status)
        ) from exc
    except ParamValidationError as exc:
        raise TargetError(f"{action} failed: {exc}", retryable=False) from exc
    except BotoCoreError as exc:
        # Connection and read timeouts, endpoint errors, credential fetching: all transient.
        raise TargetError(f"{action} failed: {exc}") from exc


class Fifo(TypedDict, total=False):
    MessageGroupId: str
    MessageDeduplicationId: str


def fifo(name: str, invocation: Invocation) -> Fifo:
    """What a FIFO queue or topic (its name ends in `.fifo`) needs besides: a message group, the
    job's (its runs in order), and a deduplication id, the attempt's (a copy sent within the
    5-minute window is dropped; a retry is a message of its own). Until 2026-11-30 neither was
    sent, and every run to a FIFO target failed at once."""
    if not name.endswith(".fifo"):
        return Fifo()
    dedup = f"{invocation.run_id}-{invocation.attempt}"
    return Fifo(MessageGroupId=invocation.job_id, MessageDeduplicationId=dedup)


def send_to_sqs(clients: AwsClients, target: SqsTarget, invocation: Invocation) -> None:
    attributes: dict[str, SqsAttribute] = {
        name: {"DataType": "String", "StringValue": value}
        for name, value in delivery_metadata(invocation).items()
    }
    with aws_errors(f"SQS SendMessage to {target.queue_url}"):
        clients.sqs.send_message(
            QueueUrl=target.queue_url,
            MessageBody=to_json(invocation.payload),
            MessageAttributes=attributes,
            **fifo(target.queue_url.rstrip("/"), invocation),
        )


def publish_to_sns(clients: AwsClients, target: SnsTarget, invocation: Invocation) -> None:
    attributes: dict[str, SnsAttribute] = {
        name: {"DataType": "String", "StringValue": value}
        for name, value in delivery_metadata(invocation).items()
    }
    with aws_errors(f"SNS Publish to {target.topic_arn}"):
        clients.sns.publish(
            TopicArn=target.topic_arn,
            Message=to_json(invocation.payload),
            MessageAttributes=attributes,
            **fifo(target.topic_arn, invocation),
        )


def put_to_eventbridge(
    clients: AwsClients, target: EventBridgeTarget, invocation: Invocation
) -> None:
    action = f"EventBridge PutEvents to {target.event_bus}"
    with aws_errors(action):
        response = clients.events.put_events(
            Entries=[
                {
                    "Source": target.source,
                    "DetailType": target.detail_type,
                    "EventBusName": target.event_bus,
                    "Detail": to_json(envelope(invocation)),
                }
            ]
        )
    # PutEvents answers 200 even when it rejects an entry; the entry says why.
    if response.get("FailedEntryCount", 0) > 0:
        entry = (response.get("Entries") or [{}])[0]
        code = entry.get("ErrorCode", "Unknown")
        message = entry.get("ErrorMessage", "")
        raise TargetError(f"{action} failed: {code}: {message}", retryable=is_retryable(code, 0))


def invoke_lambda(clients: AwsClients, target: LambdaTarget, invocation: Invocation) -> None:
    action = f"Lambda Invoke of {target.function_arn}"
    with aws_errors(action):
        response = clients.lambda_.invoke(
            FunctionName=target.function_arn,
            # Asynchronous: Lambda queues the event (202) and runs the function with its own
            # retries; the worker is not held for the function's duration.
            InvocationType="Event",
            Payload=to_json(envelope(invocation)).encode(),
        )
    status = response.get("StatusCode", 0)
    if not 200 <= status < 300:
        raise TargetError(f"{action} failed: status {status}", retryable=is_retryable("", status))
