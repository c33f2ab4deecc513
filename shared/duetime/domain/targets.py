"""What a job runs: target specifications and their validation.

Execution lives in duetime.targets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from duetime.domain.errors import ValidationError

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Headers duetime sets itself; a job may not override them.
RESERVED_HEADER_PREFIXES = ("duetime-", "webhook-")
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
_HANDLER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
MAX_HEADERS = 20


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
    obj = _object(raw, path)
    kind = obj.get("type")
    parser: Callable[[Mapping[str, object], str], Target] | None = (
        _PARSERS.get(kind) if isinstance(kind, str) else None
    )
    if parser is None:
        raise ValidationError(f"{path}.type", f"must be one of {', '.join(sorted(_PARSERS))}")
    return parser(obj, path)


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


@dataclass(frozen=True)
class OwnResources:
    """duetime's own queues, topics, functions and buses: never a job's target.

    A target that reaches them would let a tenant act as duetime (send another tenant's run
    to a run queue, invoke the worker with a forged event). Named by `queue_names` (every run
    queue and DLQ) and by `name_prefix`: on AWS the stack name, with which CloudFormation
    begins every name it generates (`<stack>-<logical id>-<suffix>`); locally `duetime`.
    Names compare without regard to case (a refused look-alike costs nothing)."""

    queue_names: frozenset[str] = frozenset()
    name_prefix: str = ""

    def refusal(self, target: Target) -> tuple[str, str] | None:
        """(the target's field, why) when `target` reaches one of duetime's own resources."""
        match target:
            case SqsTarget(queue_url=url):
                field_name, kind, name = "queue_url", "queue", _queue_name(url)
            case SnsTarget(topic_arn=arn):
                field_name, kind, name = "topic_arn", "topic", _arn_resource(arn, 5)
            case LambdaTarget(function_arn=arn):
                field_name, kind, name = "function_arn", "function", _arn_resource(arn, 6)
            case EventBridgeTarget(event_bus=bus):
                field_name, kind = "event_bus", "event bus"
                name = bus.rsplit("event-bus/", 1)[-1] if bus.startswith("arn:") else bus
            case _:
                return None
        folded = name.casefold()
        prefix = self.name_prefix.casefold()
        if folded in {q.casefold() for q in self.queue_names} or (
            prefix and folded.startswith(prefix + "-")
        ):
            return field_name, f"is one of duetime's own {kind}s: not a job target"
        return None


def _queue_name(url: str) -> str:
    """The queue name of an SQS queue URL (`.../<account>/<name>`), however spelled."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return ""
    segments = [unquote(s) for s in path.split("/") if s]
    return segments[-1] if segments else ""


def _arn_resource(arn: str, index: int) -> str:
    parts = arn.split(":")
    return parts[index] if len(parts) > index else ""


def _object(raw: object, path: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise ValidationError(path, "must be an object")
    return raw


def _only(obj: Mapping[str, object], path: str, allowed: set[str]) -> None:
    for key in obj:
        if key not in allowed:
            raise ValidationError(f"{path}.{key}", "unknown field")


def _text(obj: Mapping[str, object], path: str, key: str, max_len: int = 2048) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{path}.{key}", "required, a non-empty string")
    if len(value) > max_len:
        raise ValidationError(f"{path}.{key}", f"at most {max_len} characters")
    return value


def _split(url: str, where: str) -> SplitResult:
    """urlsplit, whose ValueError (a bracketed host that is not an IP address, an unclosed
    bracket) is the client's mistake, not a server error."""
    try:
        return urlsplit(url)
    except ValueError:
        raise ValidationError(where, "not a valid URL") from None


def _arn(obj: Mapping[str, object], path: str, key: str, service: str) -> str:
    value = _text(obj, path, key)
    if not value.startswith("arn:") or f":{service}:" not in value:
        raise ValidationError(f"{path}.{key}", f"must be an {service} ARN")
    return value


def _http(obj: Mapping[str, object], path: str) -> HttpTarget:
    _only(obj, path, {"type", "url", "method", "headers"})
    url = _text(obj, path, "url")
    parts = _split(url, f"{path}.url")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{path}.url", "must be an absolute http(s) URL")
    try:
        _ = parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        raise ValidationError(f"{path}.url", "the port must be a number from 0 to 65535") from None
    if parts.username or parts.password:
        raise ValidationError(f"{path}.url", "must not carry credentials")
    method = obj.get("method", "POST")
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        raise ValidationError(f"{path}.method", f"must be one of {', '.join(HTTP_METHODS)}")
    headers_raw = obj.get("headers", {})
    if not isinstance(headers_raw, Mapping):
        raise ValidationError(f"{path}.headers", "must be an object of strings")
    if len(headers_raw) > MAX_HEADERS:
        raise ValidationError(f"{path}.headers", f"at most {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for name, value in headers_raw.items():
        where = f"{path}.headers.{name}"
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ValidationError(where, "not a valid header name")
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIXES):
            raise ValidationError(where, "is set by duetime and cannot be overridden")
        if not isinstance(value, str) or len(value) > 4096 or "\r" in value or "\n" in value:
            raise ValidationError(where, "must be a single-line string of at most 4096 characters")
        headers[name] = value
    return HttpTarget(url=url, method=method.upper(), headers=headers)


def _sqs(obj: Mapping[str, object], path: str) -> SqsTarget:
    _only(obj, path, {"type", "queue_url"})
    url = _text(obj, path, "queue_url")
    if _split(url, f"{path}.queue_url").scheme not in ("http", "https"):
        raise ValidationError(f"{path}.queue_url", "must be an SQS queue URL")
    return SqsTarget(queue_url=url)


def _sns(obj: Mapping[str, object], path: str) -> SnsTarget:
    _only(obj, path, {"type", "topic_arn"})
    return SnsTarget(topic_arn=_arn(obj, path, "topic_arn", "sns"))


def _eventbridge(obj: Mapping[str, object], path: str) -> EventBridgeTarget:
    _only(obj, path, {"type", "source", "detail_type", "event_bus"})
    bus = obj.get("event_bus", "default")
    if not isinstance(bus, str) or not bus:
        raise ValidationError(f"{path}.event_bus", "must be an event bus name or ARN")
    return EventBridgeTarget(
        source=_text(obj, path, "source", 256),
        detail_type=_text(obj, path, "detail_type", 128),
        event_bus=bus,
    )


def _lambda(obj: Mapping[str, object], path: str) -> LambdaTarget:
    _only(obj, path, {"type", "function_arn"})
    return LambdaTarget(function_arn=_arn(obj, path, "function_arn", "lambda"))


def _handler(obj: Mapping[str, object], path: str) -> HandlerTarget:
    _only(obj, path, {"type", "name"})
    name = _text(obj, path, "name", 128)
    if not _HANDLER_NAME.match(name):
        raise ValidationError(f"{path}.name", "must be a dotted handler name such as duetime.noop")
    return HandlerTarget(name=name)


_PARSERS: dict[str, Callable[[Mapping[str, object], str], Target]] = {
    "http": _http,
    "sqs": _sqs,
    "sns": _sns,
    "eventbridge": _eventbridge,
    "lambda": _lambda,
    "handler": _handler,
}
