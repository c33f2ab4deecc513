"""The AWS clients targets use (and the KMS client that opens webhook secrets), built once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

    from duetime.adapters.kms import KmsClient

# botocore retries throttling and 5xx itself; these bounds keep one delivery from hanging on a
# stalled connection for botocore's default 60 s per attempt.
_CLIENT_CONFIG = Config(
    connect_timeout=5,
    read_timeout=30,
    retries={"mode": "standard", "max_attempts": 3},
)
# KMS (a webhook's secret, read by a worker or the API): calls of milliseconds, given up
# within ~24 s, inside the API function's 29 s (until 2026-11-30 the targets' bounds, ~140 s
# at worst: a review).
_KMS_CONFIG = Config(
    connect_timeout=2, read_timeout=5, retries={"mode": "standard", "total_max_attempts": 3}
)
_CLIENT_NAMES = frozenset({"sqs", "sns", "events", "lambda_", "kms"})
_C = TypeVar("_C")


class AwsClients:
    """The AWS clients targets use, each built on first use and then reused.

    Building a client costs tens of milliseconds, so a Lambda container builds each one once.
    Tests inject ready clients by name: `AwsClients(sqs=..., sns=..., events=..., lambda_=...)`.
    `kms` opens the webhook secrets that sign HTTP deliveries (duetime.services.webhook_secrets).

    With `target_role_arn`, the target clients (sqs, sns, events, lambda) act as that role
    (AssumeRole, refreshed before the credentials expire): on AWS it may reach the operator's
    allowed targets and nothing of duetime's, so even a target that slipped past the checks
    cannot touch duetime's queues or functions. `kms` stays with the function's own role.
    With `endpoint_url` (the local stack's moto server), every client is built to call it.
    """

    def __init__(
        self,
        session: boto3.Session | None = None,
        target_role_arn: str = "",
        *,
        endpoint_url: str | None = None,
        **clients: Any,
    ) -> None:
        if "lambda" in clients:  # `lambda` is a keyword, but `**{"lambda": c}` still reaches us
            clients["lambda_"] = clients.pop("lambda")
        unknown = set(clients) - _CLIENT_NAMES
        if unknown:
            raise TypeError(f"unknown AWS clients: {', '.join(sorted(unknown))}")
        self._session = session
        self._target_role_arn = target_role_arn
        self._endpoint_url = endpoint_url
        self._target_session: boto3.Session | None = None
        self._clients: dict[str, Any] = dict(clients)
        # boto3 sessions are not thread-safe while building clients; built clients are.
        self._lock = threading.Lock()

    @property
    def sqs(self) -> SQSClient:
        return self._get("sqs", lambda s: s.client("sqs", **self._options), target=True)

    @property
    def sns(self) -> SNSClient:
        return self._get("sns", lambda s: s.client("sns", **self._options), target=True)

    @property
    def events(self) -> EventBridgeClient:
        return self._get("events", lambda s: s.client("events", **self._options), target=True)

    @property
    def lambda_(self) -> LambdaClient:
        return self._get("lambda_", lambda s: s.client("lambda", **self._options), target=True)

    @property
    def kms(self) -> KmsClient:
        # No KMS stubs are installed: the client is typed by the calls duetime makes.
        aws = {"config": _KMS_CONFIG} if self._endpoint_url is None else {}  # (moto: as is)
        options = self._options | aws
        client = self._get("kms", lambda session: session.client("kms", **options))
        return cast("KmsClient", client)

    @property
    def _options(self) -> dict[str, Any]:
        return {"config": _CLIENT_CONFIG, "endpoint_url": self._endpoint_url}

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
