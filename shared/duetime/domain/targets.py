"""What a job runs: target specifications and their validation.

Execution lives in duetime.targets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from duetime.domain.errors import ValidationError, unknown_field
from duetime.domain.text import checked_text
from duetime.domain.urls import MAX_URL_CHARS, checked_url, split_url

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Headers duetime sets itself; a job may not override them.
RESERVED_HEADER_PREFIXES = ("duetime-", "webhook-")
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
# Every pattern below is matched whole (fullmatch: `$` would let a trailing newline through).
# A header name is an RFC 9110 token; a value holds visible US-ASCII, SP and HTAB only (what
# RFC 9110 §5.5 recommends: no control characters, and no obs-text, which receivers decode
# differently and http.client cannot send beyond Latin-1).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
MAX_HEADER_VALUE_CHARS = 4096
_HANDLER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
MAX_HEADERS = 20
# AWS resource names, in AWS's own character sets: `%`, spaces and look-alikes are never part
# of one, so the own-resource check (OwnResources) sees the name AWS would act on.
# An ARN is `arn:<partition>:<service>:<region>:<account>:<resource>`.
_ARN = r"arn:aws(?:-[a-z]+)*:{service}:[a-z0-9-]+:[0-9]{{12}}:"  # an account id: 12 digits
# An SQS queue name: 1-80 letters, digits, `-` or `_`, `.fifo` at the end of a FIFO queue's.
SQS_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.fifo)?")
MAX_SQS_QUEUE_NAME_CHARS = 80
# An SQS queue URL's path: `/<account>/<name>` (an emulator may put other segments first;
# the account is never left out). On an AWS host exactly that, the account in digits: AWS
# reads the queue from it, and a longer path would be judged by a name it does not act on.
# `/<account>/<queue>` on AWS's hosts; on another (an emulator's: ElasticMQ's `/queue/<name>`)
# one segment before the queue (until 2026-11-30 any number: only the last was read as the
# queue's name, so a tenant could name another's queue before its own).
_SQS_PATH = re.compile(r"/[A-Za-z0-9_.-]+/(?P<name>[^/]+)/?")
_SQS_AWS_PATH = re.compile(r"/[0-9]+/(?P<name>[^/]+)/?")
_AWS_HOST = re.compile(r"(?:.+\.)?amazonaws\.com(?:\.cn)?|(?:.+\.)?api\.aws")
# An SNS topic: 1-256 letters, digits, `-` or `_`, `.fifo` at the end of a FIFO topic's.
SNS_TOPIC_ARN = re.compile(_ARN.format(service="sns") + r"(?P<name>[A-Za-z0-9_-]+(?:\.fifo)?)")
MAX_SNS_TOPIC_NAME_CHARS = 256
# A Lambda function: a name of 1-64 letters, digits, `-` or `_`, then optionally a qualifier
# (a version, an alias or $LATEST).
LAMBDA_FUNCTION_ARN = re.compile(
    _ARN.format(service="lambda") + r"function:[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9$_-]{1,128})?"
)
# An EventBridge bus: its name (1-256 of `/ . - _`, letters and digits) or its ARN.
EVENT_BUS = re.compile(
    "(?:" + _ARN.format(service="events") + r"event-bus/)?[/.\-_A-Za-z0-9]{1,256}"
)


@dataclass(frozen=True)
class HttpTarget:
    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    type: str = "http"


@dataclass(frozen=True)
class SqsTarget:
    queue_url: str
    type: str = "sqs"


@dataclass(frozen=True)
class SnsTarget:
    topic_arn: str
    type: str = "sns"


@dataclass(frozen=True)
class EventBridgeTarget:
    source: str
    detail_type: str
    event_bus: str = "default"
    type: str = "eventbridge"


@dataclass(frozen=True)
class LambdaTarget:
    function_arn: str
    type: str = "lambda"


@dataclass(frozen=True)
class HandlerTarget:
    name: str
    type: str = "handler"


Target = HttpTarget | SqsTarget | SnsTarget | EventBridgeTarget | LambdaTarget | HandlerTarget


def parse_target(raw: object, path: str = "target") -> Target:
    """Validate a target from a request; raise ValidationError naming the bad field.

    Whatever it accepts can be delivered: an HTTP URL and headers that http.client sends as
    they are, AWS names in AWS's own character sets (docs/targets.md)."""
    return _parse(raw, path, strict=True)


def read_target(raw: object, path: str = "target") -> Target:
    """A target as stored with its job: its structure is checked, but not the formats that
    `parse_target` may have made stricter since the job was submitted, so that a job stored
    under older rules stays readable (listed, cancelled, updated with a new target). What it
    holds that cannot be delivered fails its runs at delivery, and the own-resource check
    (OwnResources) runs again before every attempt."""
    return _parse(raw, path, strict=False)


def _parse(raw: object, path: str, *, strict: bool) -> Target:
    obj = _object(raw, path)
    kind = obj.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        said = "is required: one of" if kind is None else "must be one of"
        raise ValidationError(f"{path}.type", f"{said} {', '.join(sorted(_PARSERS))}")
    return parser(obj, path, strict)


def target_to_dict(target: Target) -> dict[str, Any]:
    match target:
        case HttpTarget():
            return {
                "type": "http",
                "url": target.url,
                "method": target.method,
                "headers": dict(target.headers),
            }
        case SqsTarget():
            return {"type": "sqs", "queue_url": target.queue_url}
        case SnsTarget():
            return {"type": "sns", "topic_arn": target.topic_arn}
        case EventBridgeTarget():
            return {
                "type": "eventbridge",
                "source": target.source,
                "detail_type": target.detail_type,
                "event_bus": target.event_bus,
            }
        case LambdaTarget():
            return {"type": "lambda", "function_arn": target.function_arn}
        case HandlerTarget():
            return {"type": "handler", "name": target.name}


def _object(raw: object, path: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise ValidationError(path, "must be an object")
    return raw


def _only(obj: Mapping[str, object], path: str, allowed: set[str]) -> None:
    for key in obj:
        if key not in allowed:
            raise ValidationError(f"{path}.{key}", unknown_field(key, allowed))


def _text(obj: Mapping[str, object], path: str, key: str, max_len: int = 2048) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{path}.{key}", "required, a non-empty string")
    if len(value) > max_len:
        raise ValidationError(f"{path}.{key}", f"at most {max_len} characters")
    return value


def _arn(obj: Mapping[str, object], path: str, key: str, service: str) -> str:
    value = _text(obj, path, key)
    if not value.startswith("arn:") or f":{service}:" not in value:
        raise ValidationError(
            f"{path}.{key}", f"must be an ARN of {service}: arn:aws:{service}:<region>:..."
        )
    return value


def _header_value(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE_CHARS:
        raise ValidationError(
            where, f"must be a single-line string of at most {MAX_HEADER_VALUE_CHARS} characters"
        )
    if not HEADER_VALUE.fullmatch(value):
        raise ValidationError(
            where, "must hold only visible ASCII characters, spaces and tabs (RFC 9110)"
        )
    return value


def _http(obj: Mapping[str, object], path: str, strict: bool) -> HttpTarget:
    _only(obj, path, {"type", "url", "method", "headers"})
    url = _text(obj, path, "url", MAX_URL_CHARS)
    checked_url(url, f"{path}.url", strict=strict)
    method = obj.get("method", "POST")
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        raise ValidationError(f"{path}.method", f"must be one of {', '.join(HTTP_METHODS)}")
    headers_raw = obj.get("headers", {})
    if not isinstance(headers_raw, Mapping):
        raise ValidationError(f"{path}.headers", "must be an object of strings")
    if len(headers_raw) > MAX_HEADERS:
        raise ValidationError(f"{path}.headers", f"at most {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in headers_raw.items():
        where = f"{path}.headers.{name}"
        if not isinstance(name, str) or (strict and not HEADER_NAME.fullmatch(name)):
            raise ValidationError(where, "not a valid header name (an RFC 9110 token)")
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIXES):
            raise ValidationError(where, "is set by duetime and cannot be overridden")
        if strict and lowered in seen:  # one of them would be sent, the other dropped
            raise ValidationError(where, "repeats a header name (names are case-insensitive)")
        seen.add(lowered)
        if strict:
            _header_value(value, where)
        elif not isinstance(value, str):
            raise ValidationError(where, "must be a string")
        headers[name] = value
    return HttpTarget(url=url, method=method.upper(), headers=headers)


def _sqs(obj: Mapping[str, object], path: str, strict: bool) -> SqsTarget:
    _only(obj, path, {"type", "queue_url"})
    where = f"{path}.queue_url"
    url = _text(obj, path, "queue_url", MAX_URL_CHARS)
    if strict and url.startswith("arn:"):  # the queue's ARN, a common slip: say what to give
        raise ValidationError(where, "must be the queue's URL (https://...), not its ARN")
    if not strict:
        if split_url(url, where).scheme not in ("http", "https"):
            raise ValidationError(where, "must be an SQS queue URL")
        return SqsTarget(queue_url=url)
    parts = checked_url(url, where)
    aws_host = _AWS_HOST.fullmatch((parts.hostname or "").rstrip(".").lower())
    queue = (_SQS_AWS_PATH if aws_host else _SQS_PATH).fullmatch(parts.path)
    if parts.query or parts.fragment or queue is None:
        raise ValidationError(where, "must be an SQS queue URL: https://<host>/<account>/<queue>")
    name = queue.group("name")
    if len(name) > MAX_SQS_QUEUE_NAME_CHARS or not SQS_QUEUE_NAME.fullmatch(name):
        raise ValidationError(
            where,
            f"the queue name must be 1 to {MAX_SQS_QUEUE_NAME_CHARS} letters, digits, - or _ "
            "(ending in .fifo for a FIFO queue)",
        )
    return SqsTarget(queue_url=url)


def _sns(obj: Mapping[str, object], path: str, strict: bool) -> SnsTarget:
    _only(obj, path, {"type", "topic_arn"})
    arn = _arn(obj, path, "topic_arn", "sns")
    topic = SNS_TOPIC_ARN.fullmatch(arn)
    if strict and (topic is None or len(topic.group("name")) > MAX_SNS_TOPIC_NAME_CHARS):
        raise ValidationError(
            f"{path}.topic_arn",
            "must be an SNS topic ARN, arn:aws:sns:<region>:<account>:<topic>, the topic "
            f"1 to {MAX_SNS_TOPIC_NAME_CHARS} letters, digits, - or _ (ending in .fifo for "
            "a FIFO topic)",
        )
    return SnsTarget(topic_arn=arn)


def _eventbridge(obj: Mapping[str, object], path: str, strict: bool) -> EventBridgeTarget:
    _only(obj, path, {"type", "source", "detail_type", "event_bus"})
    bus = obj.get("event_bus", "default")
    if not isinstance(bus, str) or not bus or (strict and not EVENT_BUS.fullmatch(bus)):
        raise ValidationError(
            f"{path}.event_bus",
            "must be an event bus name (1 to 256 letters, digits, / . - or _) or its ARN, "
            "arn:aws:events:<region>:<account>:event-bus/<name>",
        )
    source = _text(obj, path, "source", 256)
    detail_type = _text(obj, path, "detail_type", 128)
    if strict:
        # What PutEvents fails an entry for: a source AWS reserves for its services. The
        # control characters and overrides a name may not hold are refused too.
        if source.startswith("aws."):
            raise ValidationError(f"{path}.source", "the aws. prefix is reserved for AWS services")
        checked_text(source, f"{path}.source")
        checked_text(detail_type, f"{path}.detail_type")
    return EventBridgeTarget(source=source, detail_type=detail_type, event_bus=bus)


def _lambda(obj: Mapping[str, object], path: str, strict: bool) -> LambdaTarget:
    _only(obj, path, {"type", "function_arn"})
    arn = _arn(obj, path, "function_arn", "lambda")
    if strict and not LAMBDA_FUNCTION_ARN.fullmatch(arn):
        raise ValidationError(
            f"{path}.function_arn",
            "must be a Lambda function ARN, arn:aws:lambda:<region>:<account>:function:<name>"
            "[:<version or alias>], the name 1 to 64 letters, digits, - or _",
        )
    return LambdaTarget(function_arn=arn)


def _handler(obj: Mapping[str, object], path: str, strict: bool) -> HandlerTarget:
    _only(obj, path, {"type", "name"})
    name = _text(obj, path, "name", 128)
    if strict and not _HANDLER_NAME.fullmatch(name):
        raise ValidationError(f"{path}.name", "must be a dotted handler name such as duetime.noop")
    return HandlerTarget(name=name)


_PARSERS: dict[str, Callable[[Mapping[str, object], str, bool], Target]] = {
    "http": _http,
    "sqs": _sqs,
    "sns": _sns,
    "eventbridge": _eventbridge,
    "lambda": _lambda,
    "handler": _handler,
}
