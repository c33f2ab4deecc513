"""What every target shares: the invocation, the one error type, AWS clients, and the executor."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import boto3
from botocore.config import Config

from duetime.domain.targets import (
    EventBridgeTarget,
    HandlerTarget,
    HttpTarget,
    LambdaTarget,
    OwnResources,
    SnsTarget,
    SqsTarget,
    Target,
)
from duetime.domain.timeutil import rfc3339_ms

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from duetime.targets.handlers import HandlerRegistry
    from duetime.targets.http import HttpDelivery
    from duetime.webhook_secrets import KmsClient, SigningSecrets

# Error messages end up in run records and API responses: keep them bounded.
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class Invocation:
    """One attempt at running one occurrence of a job."""

    tenant: str
    job_id: str
    run_id: str
    scheduled_ms: int  # the occurrence's due instant, epoch ms
    attempt: int  # 1-based
    payload: Any  # JSON value
    timeout_seconds: float


class TargetError(Exception):
    """The target failed. `retryable` False means retrying cannot help (e.g. refused address,
    unknown handler)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        message = truncate(message)
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __repr__(self) -> str:
        return f"TargetError({self.message!r}, retryable={self.retryable})"


def truncate(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def delivery_metadata(invocation: Invocation) -> dict[str, str]:
    """The identifying values sent with every delivery: HTTP headers, SQS/SNS attributes."""
    return {
        "duetime-job-id": invocation.job_id,
        "duetime-run-id": invocation.run_id,
        "duetime-scheduled-for": rfc3339_ms(invocation.scheduled_ms),
        "duetime-attempt": str(invocation.attempt),
    }


def envelope(invocation: Invocation) -> dict[str, Any]:
    """The JSON document for targets that carry no headers (EventBridge detail, Lambda event)."""
    return {
        "job_id": invocation.job_id,
        "run_id": invocation.run_id,
        "scheduled_for": rfc3339_ms(invocation.scheduled_ms),
        "attempt": invocation.attempt,
        "payload": invocation.payload,
    }


def to_json(value: Any) -> str:
    """Compact JSON, keeping non-ASCII text readable.

    A payload parsed from JSON may hold a lone surrogate (`"\\ud800"`), which has no UTF-8
    encoding; such a document is written with ASCII escapes instead, exactly as it arrived.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"payload is not JSON: {exc}", retryable=False) from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


# botocore retries throttling and 5xx itself; these bounds keep one delivery from hanging on a
# stalled connection for botocore's default 60 s per attempt.
_CLIENT_CONFIG = Config(
    connect_timeout=5,
    read_timeout=30,
    retries={"mode": "standard", "max_attempts": 3},
)
_CLIENT_NAMES = frozenset({"sqs", "sns", "events", "lambda_", "kms"})
_C = TypeVar("_C")


class AwsClients:
    """The AWS clients targets use, each built on first use and then reused.

    Building a client costs tens of milliseconds, so a Lambda container builds each one once.
    Tests inject ready clients by name: `AwsClients(sqs=..., sns=..., events=..., lambda_=...)`.
    `kms` opens the webhook secrets that sign HTTP deliveries (duetime.webhook_secrets).

    With `target_role_arn`, the target clients (sqs, sns, events, lambda) act as that role
    (AssumeRole, refreshed before the credentials expire): on AWS it may reach the operator's
    allowed targets and nothing of duetime's, so even a target that slipped past the checks
    cannot touch duetime's queues or functions. `kms` stays with the function's own role.
    """

    def __init__(
        self, session: boto3.Session | None = None, target_role_arn: str = "", **clients: Any
    ) -> None:
        if "lambda" in clients:  # `lambda` is a keyword, but `**{"lambda": c}` still reaches us
            clients["lambda_"] = clients.pop("lambda")
        unknown = set(clients) - _CLIENT_NAMES
        if unknown:
            raise TypeError(f"unknown AWS clients: {', '.join(sorted(unknown))}")
        self._session = session
        self._target_role_arn = target_role_arn
        self._target_session: boto3.Session | None = None
        self._clients: dict[str, Any] = dict(clients)
        # boto3 sessions are not thread-safe while building clients; built clients are.
        self._lock = threading.Lock()

    @property
    def sqs(self) -> SQSClient:
        return self._get("sqs", lambda s: s.client("sqs", config=_CLIENT_CONFIG), target=True)

    @property
    def sns(self) -> SNSClient:
        return self._get("sns", lambda s: s.client("sns", config=_CLIENT_CONFIG), target=True)

    @property
    def events(self) -> EventBridgeClient:
        return self._get("events", lambda s: s.client("events", config=_CLIENT_CONFIG), target=True)

    @property
    def lambda_(self) -> LambdaClient:
        return self._get(
            "lambda_", lambda s: s.client("lambda", config=_CLIENT_CONFIG), target=True
        )

    @property
    def kms(self) -> KmsClient:
        # No KMS stubs are installed: the client is typed by the calls duetime makes.
        client = self._get("kms", lambda session: session.client("kms", config=_CLIENT_CONFIG))
        return cast("KmsClient", client)

    def _get(self, name: str, build: Callable[[boto3.Session], _C], target: bool = False) -> _C:
        client = self._clients.get(name)
        if client is None:
            with self._lock:
                client = self._clients.get(name)
                if client is None:
                    if self._session is None:
                        self._session = boto3.Session()
                    session = self._session
                    if target and self._target_role_arn:
                        if self._target_session is None:
                            self._target_session = assumed_role_session(
                                session, self._target_role_arn
                            )
                        session = self._target_session
                    client = self._clients[name] = build(session)
        return cast(_C, client)


def assumed_role_session(session: boto3.Session, role_arn: str) -> boto3.Session:
    """A session acting as `role_arn`, its credentials fetched with the source session's and
    refreshed by botocore before they expire."""
    import botocore.session
    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

    source = session._session  # the botocore session: its credentials and config
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=source.create_client,
        source_credentials=source.get_credentials(),
        role_arn=role_arn,
        extra_args={"RoleSessionName": "duetime-targets"},
    )
    assumed = botocore.session.Session()
    assumed._credentials = DeferredRefreshableCredentials(  # type: ignore[attr-defined]
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
    return boto3.Session(botocore_session=assumed, region_name=session.region_name)


class TargetExecutor:
    """Runs one invocation against one target: returns on success, raises TargetError otherwise.

    `allow_private` turns the HTTP address guard off (local mode, where targets live on
    loopback); `require_https` refuses plain-http URLs (on AWS). `webhook_secrets` signs HTTP
    deliveries (Standard Webhooks headers); the composition root (duetime.wiring) always
    passes it; without it (tests, embedding) HTTP requests go unsigned.
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        require_https: bool = False,
        clients: AwsClients | None = None,
        handlers: HandlerRegistry | None = None,
        webhook_secrets: SigningSecrets | None = None,
        own: OwnResources | None = None,
    ) -> None:
        # Imported here rather than at the top: these modules import Invocation and TargetError
        # from this one.
        from duetime.targets.handlers import DEFAULT_HANDLERS
        from duetime.targets.http import HttpDelivery

        self._http: HttpDelivery = HttpDelivery(
            allow_private=allow_private,
            require_https=require_https,
            webhook_secrets=webhook_secrets,
        )
        self._clients = clients if clients is not None else AwsClients()
        self._handlers = handlers if handlers is not None else DEFAULT_HANDLERS
        self._own = own or OwnResources()

    def check(self, target: Target) -> None:
        """Refuse a target that reaches duetime's own resources (checked at submission too;
        again here for jobs stored before, or settings that changed since)."""
        refused = self._own.refusal(target)
        if refused is not None:
            raise TargetError(f"refused: target.{refused[0]} {refused[1]}", retryable=False)

    def execute(self, target: Target, invocation: Invocation) -> None:
        from duetime.targets import aws

        self.check(target)
        try:
            match target:
                case HttpTarget():
                    self._http.deliver(target, invocation)
                case SqsTarget():
                    aws.send_to_sqs(self._clients, target, invocation)
                case SnsTarget():
                    aws.publish_to_sns(self._clients, target, invocation)
                case EventBridgeTarget():
                    aws.put_to_eventbridge(self._clients, target, invocation)
                case LambdaTarget():
                    aws.invoke_lambda(self._clients, target, invocation)
                case HandlerTarget():
                    self._handlers.run(target.name, invocation)
                case _:
                    raise TargetError(
                        f"unsupported target type: {type(target).__name__}",
                        retryable=False,
                    )
        except TargetError:
            raise
        except Exception as exc:
            # Callers rely on one failure type to decide between retry and dead letter; an
            # unforeseen error (a bug here, or in a library) is retried and keeps its cause.
            raise TargetError(f"unexpected {type(exc).__name__}: {exc}") from exc
