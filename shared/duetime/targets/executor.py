"""The executor: runs one invocation against one target, whatever its kind (HTTP, SQS, SNS,
EventBridge, Lambda, or an in-process handler). The services see it as a TargetRunner
(duetime.ports); the composition root (duetime.wiring) builds it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.reach import OwnResources, TenantTargets
from duetime.domain.targets import (
    EventBridgeTarget,
    HandlerTarget,
    HttpTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    Target,
)
from duetime.ports import SecretsUnavailable
from duetime.targets import aws
from duetime.targets.clients import AwsClients
from duetime.targets.handlers import DEFAULT_HANDLERS, HandlerRegistry
from duetime.targets.http import HttpDelivery

if TYPE_CHECKING:
    from duetime.ports import SigningSecrets


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
        tenant_targets: TenantTargets | None = None,
        emulator_port: int | None = None,
    ) -> None:
        """`emulator_port`: the local stack's moto server's, refused to HTTP targets."""
        self._http = HttpDelivery(
            allow_private=allow_private,
            require_https=require_https,
            webhook_secrets=webhook_secrets,
            emulator_port=emulator_port,
        )
        self._clients = clients if clients is not None else AwsClients()
        self._handlers = handlers if handlers is not None else DEFAULT_HANDLERS
        self._own = own or OwnResources()
        self._tenant_targets = tenant_targets or TenantTargets()

    def check(self, target: Target, tenant: str) -> None:
        """Refuse a target that reaches duetime's own resources, or a resource that is not
        the tenant's (checked at submission too; again here for jobs stored before, or
        settings that changed since)."""
        refused = self._own.refusal(target) or self._tenant_targets.refusal(target, tenant)
        if refused is not None:
            raise TargetError(f"refused: target.{refused[0]} {refused[1]}", retryable=False)

    def execute(self, target: Target, invocation: Invocation) -> None:
        self.check(target, invocation.tenant)
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
        except (TargetError, SecretsUnavailable):  # a passing one: the run's claim goes back
            raise
        except Exception as exc:
            # Callers rely on one failure type to decide between retry and dead letter; an
            # unforeseen error (a bug here, or in a library) is retried and keeps its cause.
            raise TargetError(f"unexpected {type(exc).__name__}: {exc}") from exc
