"""Which AWS resources a job may name as its target: none of duetime's own (OwnResources),
only its tenant's when the operator scopes them (TenantTargets), and only in the deployment's
region (region_refusal). The submission checks them all at create and PATCH; the worker
checks the first two again before every attempt (a job stored before a rule; a target in
another region fails there on its own)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from duetime.domain.targets import (
    EventBridgeTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    Target,
)


@dataclass(frozen=True)
class OwnResources:
    """duetime's own queues, topics, functions and buses: never a job's target.

    A target that reaches them would let a tenant act as duetime (send another tenant's run
    to a run queue, invoke the worker with a forged event). Named by `queue_names` (every run
    queue and DLQ) and by `name_prefix`: on AWS the stack name, with which CloudFormation
    begins every name it generates (`<stack>-<logical id>-<suffix>`); locally `duetime`.
    Names compare without regard to case (a refused look-alike costs nothing), after
    percent-decoding, repeated (a submission refuses `%` in these names, but a job stored
    before that rule is checked here again before every attempt)."""

    queue_names: frozenset[str] = frozenset()
    name_prefix: str = ""

    def refusal(self, target: Target) -> tuple[str, str] | None:
        """(the target's field, why) when `target` reaches one of duetime's own resources."""
        named = _aws_resource(target)
        if named is None:
            return None
        field_name, kind, name = named
        folded = name.casefold()
        prefix = self.name_prefix.casefold()
        if folded in {q.casefold() for q in self.queue_names} or (
            prefix and folded.startswith(prefix + "-")
        ):
            return field_name, f"is one of duetime's own {kind}: not a job target"
        return None


TENANT = "{tenant}"
# A pattern of tenant names: `{tenant}` once, `*`, and what AWS names are made of.
_TENANT_PATTERN = re.compile(r"[A-Za-z0-9_.*/-]*")


@dataclass(frozen=True)
class TenantTargets:
    """Which AWS resources a tenant's jobs may name, when the operator scopes them by name
    (Env.TENANT_TARGET_NAMES, e.g. `{tenant}-*`): the name of the queue, topic, function or
    event bus must match `pattern` whole, `{tenant}` standing for the job's tenant exactly
    (case included) and `*` for any run of characters. Without a pattern every tenant may
    name every resource the deployment's target role reaches (targetResourceArns)."""

    pattern: str = ""

    def __post_init__(self) -> None:
        if self.pattern and (
            self.pattern.count(TENANT) != 1
            or not _TENANT_PATTERN.fullmatch(self.pattern.replace(TENANT, ""))
        ):
            raise ValueError(
                f"{self.pattern!r}: holds {TENANT} once, and otherwise only letters, digits, "
                "`-`, `_`, `.`, `/` and `*`"
            )

    def refusal(self, target: Target, tenant: str) -> tuple[str, str] | None:
        """(the target's field, why) when `target` names a resource `tenant` may not reach."""
        named = _aws_resource(target) if self.pattern else None
        if named is None:
            return None
        field_name, kind, name = named
        before, after = (
            ".*".join(map(re.escape, side.split("*"))) for side in self.pattern.split(TENANT)
        )
        if re.fullmatch(before + re.escape(tenant) + after, name, flags=re.DOTALL):
            return None
        shown = self.pattern.replace(TENANT, tenant)
        return field_name, f"is not one of this tenant's {kind}: its name must match {shown!r}"


# An SQS queue URL's host names its region: sqs.<region>.amazonaws.com (or .api.aws, or
# sqs-fips.<region>), a VPC endpoint's <id>.sqs.<region>.vpce.amazonaws.com, the legacy
# <region>.queue.amazonaws.com (and .com.cn in China); queue.amazonaws.com is us-east-1.
_SQS_HOST = re.compile(
    r"(?:(?:[a-z0-9-]+\.)?sqs(?:-fips)?\.([a-z0-9-]+)(?:\.vpce)?|([a-z0-9-]+)\.queue)"
    r"\.(?:amazonaws\.com(?:\.cn)?|api\.aws)"
)


def sqs_region(url: str) -> str | None:
    """The region an SQS queue URL names (None: not an AWS one, as the emulator's)."""
    try:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return None
    if host == "queue.amazonaws.com":
        return "us-east-1"
    found = _SQS_HOST.fullmatch(host)
    return (found.group(1) or found.group(2)) if found else None


def region_refusal(target: Target, region: str | None) -> tuple[str, str] | None:
    """(the target's field, why) when an AWS target is in another region than the
    deployment's (`region`; None: unknown, as on the local stack): the workers call targets in
    theirs, so each of its runs would fail (until 2026-11-30 it was created all the same; an
    outside infrastructure audit). An event bus named without an ARN is the deployment's."""
    match target:
        case SqsTarget(queue_url=url):
            field_name, theirs = "queue_url", sqs_region(url)
        case SnsTarget(topic_arn=arn):
            field_name, theirs = "topic_arn", _arn_resource(arn, 3)
        case LambdaTarget(function_arn=arn):
            field_name, theirs = "function_arn", _arn_resource(arn, 3)
        case EventBridgeTarget(event_bus=bus) if bus.startswith("arn:"):
            field_name, theirs = "event_bus", _arn_resource(bus, 3)
        case _:
            return None
    if region is None or not theirs or theirs == region:
        return None
    return field_name, f"is in {theirs}: this deployment calls targets in {region} only"


def _aws_resource(target: Target) -> tuple[str, str, str] | None:
    """(the target's field, the kind of resource, its name) of an AWS target (else None)."""
    match target:
        case SqsTarget(queue_url=url):
            return "queue_url", "queues", _queue_name(url)
        case SnsTarget(topic_arn=arn):
            return "topic_arn", "topics", _arn_resource(arn, 5)
        case LambdaTarget(function_arn=arn):
            return "function_arn", "functions", _arn_resource(arn, 6)
        case EventBridgeTarget(event_bus=bus):
            bus = _percent_decoded(bus)  # AWS reads the name after the first `event-bus/`
            name = bus.split("event-bus/", 1)[-1] if bus.startswith("arn:") else bus
            return "event_bus", "event buses", name
    return None


def _percent_decoded(text: str) -> str:
    """`text` percent-decoded until nothing changes (`%2564` is `%64` is `d`)."""
    for _ in range(len(text)):  # each round shortens it, so this bound is never reached
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


def _queue_name(url: str) -> str:
    """The queue name of an SQS queue URL (`.../<account>/<name>`), however spelled."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return ""
    segments = [s for s in _percent_decoded(path).split("/") if s]
    return segments[-1] if segments else ""


def _arn_resource(arn: str, index: int) -> str:
    parts = _percent_decoded(arn).split(":")
    return parts[index] if len(parts) > index else ""
