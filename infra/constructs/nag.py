"""cdk-nag acknowledgements: every one names its finding and says why it is acceptable."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

PLUGIN = "AwsSolutions"


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one finding (e.g. `AwsSolutions-IAM5[Resource::*]`) on `scope` and below.

    The id carries the plugin's name (`AwsSolutions::…`), as the validation report asks: so
    the report lists the finding with its reason among the suppressed violations."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PLUGIN}::{finding}", reason=reason))
