"""cdk-nag AwsSolutions and cfn-lint pass on every synthesised template."""

from __future__ import annotations

import json

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]
from infra_asserts import nag_report

pytestmark = pytest.mark.slow

IGNORED_LINT_CHECKS = ["W3005"]  # CDK adds DependsOn a GetAtt already implies


@pytest.fixture(params=["sample", "variant"])
def synthesised(
    request: pytest.FixtureRequest,
    sample_stack: Stack,
    sample_template: Template,
    variant_stack: Stack,
    variant_template: Template,
) -> tuple[Stack, Template]:
    """A stack whose app was synthesised (with cdk-nag), and its template."""
    if request.param == "sample":
        return sample_stack, sample_template
    return variant_stack, variant_template


def test_aws_solutions_checks_leave_no_unacknowledged_finding(
    synthesised: tuple[Stack, Template],
) -> None:
    nag = nag_report(synthesised[0])
    assert nag["conclusion"] == "success"
    assert [v["ruleName"] for v in nag["violations"]] == []


def test_every_acknowledged_finding_has_a_written_reason(
    synthesised: tuple[Stack, Template],
) -> None:
    suppressed = nag_report(synthesised[0])["suppressedViolations"]
    assert suppressed, "the stack is expected to acknowledge some findings"
    for finding in suppressed:
        assert finding["acknowledgedId"].startswith("AwsSolutions::")
        assert len(finding["reason"]) > 40, finding["ruleName"]


def test_cfn_lint_finds_no_errors_or_warnings(synthesised: tuple[Stack, Template]) -> None:
    matches = lint(
        json.dumps(synthesised[1].to_json()),
        config=ManualArgs(ignore_checks=IGNORED_LINT_CHECKS, regions=["eu-west-1", "us-east-1"]),
    )
    assert [f"{m.rule.id} {m.message}" for m in matches] == []
