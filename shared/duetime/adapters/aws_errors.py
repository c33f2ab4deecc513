"""Which AWS errors describe a passing condition (throttling, a server error, no answer), for
the calls that decide between trying again later and giving up: the AWS targets
(duetime.targets.aws) and the run queues' sends (duetime.adapters.sqs)."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

# Error codes that describe a passing condition. Anything else in 4xx (access denied, not
# found, validation, KMS key disabled) needs a person to fix it, so retrying only delays the
# dead letter.
RETRYABLE_ERROR_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "SlowDown",
        "KMSThrottling",  # SNS
        "KMSThrottlingException",
        "KmsThrottled",  # SQS (HTTP 400)
        "KMS.ThrottlingException",  # SQS's newer spelling
        "EC2ThrottledException",
        "ProvisionedThroughputExceededException",
        "TransactionConflictException",  # DynamoDB: another transaction on the item, a moment
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalError",
        "InternalFailure",
        "InternalException",
        "InternalServerError",
        "InternalServiceError",
        "RequestTimeout",
        "RequestTimeoutException",
        "RequestExpired",
        "ExpiredToken",
        "ExpiredTokenException",
        "ResourceConflictException",  # Lambda: the function is being updated
        "ResourceNotReadyException",  # Lambda: the function is still being created
    }
)


def is_retryable(code: str, http_status: int) -> bool:
    return code in RETRYABLE_ERROR_CODES or http_status == 429 or http_status >= 500


def is_transient(exc: Exception) -> bool:
    """Whether a boto3 call's exception (after the SDK's own retries) describes a passing
    condition: an error code of RETRYABLE_ERROR_CODES, a 429 or 5xx, or no answer at all
    (connection, timeout). Not a request the SDK refused to send (ParamValidationError)."""
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return is_retryable(code, status)
    return isinstance(exc, BotoCoreError) and not isinstance(exc, ParamValidationError)
