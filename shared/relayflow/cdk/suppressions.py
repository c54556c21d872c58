"""cdk-nag acknowledgments: every suppressed AwsSolutions finding carries its written reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

__all__ = ["acknowledge"]

# cdk-nag 3 reports findings under this plugin prefix; without it CDK reads the id as an
# annotation rule and the finding stays unsuppressed.
_PLUGIN_PREFIX = "AwsSolutions::"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Suppress the AwsSolutions finding `rule` (for example `AwsSolutions-S1`) on `scope`."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{_PLUGIN_PREFIX}{rule}", reason=reason))
