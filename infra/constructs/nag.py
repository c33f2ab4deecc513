"""cdk-nag acknowledgements: every one names its finding and says why it is acceptable."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

PLUGIN = "AwsSolutions"


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one finding (e.g. `AwsSolutions-IAM5[Resource::*]`) on `scope` and below,
    and on a function's role, which is its sibling (infra.constructs.functions builds it).

    The id carries the plugin's name (`AwsSolutions::…`), as the validation report asks: so
    the report lists the finding with its reason among the suppressed violations."""
    targets = [scope]
    if isinstance(scope, lambda_.Function) and scope.role is not None:
        targets.append(scope.role)
    for target in targets:
        Validations.of(target).acknowledge(Acknowledgment(id=f"{PLUGIN}::{finding}", reason=reason))
