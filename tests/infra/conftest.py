"""Fixtures of the infrastructure tests: synthesised stacks, built once per test session.

Synthesis skips bundling (context `aws:cdk:bundling-stacks`) except in the asset test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# jsii prints a Node end-of-life banner on every start; it says nothing about relayflow.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from infra_asserts import ROOT

from infra.app import build_app
from relayflow.cdk import (
    ApiAuthMode,
    CorsSettings,
    HttpStepHost,
    InlineStepHost,
    LambdaBundle,
    LambdaStepHost,
    RelayflowOrchestrator,
    RelayflowOrchestratorProps,
    WorkerStepHost,
)

NO_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}
STEP_HOST_FUNCTION_ARN = "arn:aws:lambda:eu-west-1:111111111111:function:billing-steps"
HOOK_URL = "https://steps.example.com/relayflow"


@pytest.fixture(scope="session")
def sample_stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """The sample app's stack (stage dev from cdk.json): bearer auth, arm64, inline examples.

    The app runs cdk-nag as the real one does: synthesis fails on an unacknowledged finding.
    """
    outdir = tmp_path_factory.mktemp("sample-out")
    _, stack = build_app(NO_BUNDLING, outdir=str(outdir), nag=True)
    return stack


@pytest.fixture(scope="session")
def sample_template(sample_stack: Stack) -> Template:
    """The sample stack's template."""
    return Template.from_stack(sample_stack)


@pytest.fixture(scope="session")
def variant_stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """A stack exercising the other options: IAM auth, x86_64, CORS, alarm mail, all hosts,
    no dashboard."""
    app = App(context=NO_BUNDLING, outdir=str(tmp_path_factory.mktemp("variant-out")))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack = Stack(app, "Variant")
    signing = secretsmanager.Secret.from_secret_name_v2(stack, "Signing", "relayflow/signing")
    billing = lambda_.Function.from_function_arn(stack, "Billing", STEP_HOST_FUNCTION_ARN)
    RelayflowOrchestrator(
        stack,
        "Relayflow",
        RelayflowOrchestratorProps(
            environment_name="prod",
            step_hosts=(
                InlineStepHost(module="examples"),
                WorkerStepHost(workflows=("orders.fulfil",)),
                LambdaStepHost(function=billing, workflows=("billing.charge",)),
                HttpStepHost(url=HOOK_URL, signing_secret=signing, workflows=("ext.hook",)),
            ),
            architecture=lambda_.Architecture.X86_64,
            memory_size=512,
            api_auth=ApiAuthMode.IAM,
            cors=CorsSettings(allow_origins=("https://app.example.com",)),
            run_retention_days=14,
            payload_expiration_days=400,
            alarm_email="ops@example.com",
            bundle=LambdaBundle(workflow_paths=(ROOT / "examples",)),
            http_checkpoints=True,
            dashboard=False,
        ),
    )
    return stack


@pytest.fixture(scope="session")
def variant_template(variant_stack: Stack) -> Template:
    """The variant stack's template."""
    return Template.from_stack(variant_stack)


@pytest.fixture(params=["sample", "variant"])
def any_template(
    request: pytest.FixtureRequest, sample_template: Template, variant_template: Template
) -> Iterator[Template]:
    """Each synthesised template in turn."""
    yield sample_template if request.param == "sample" else variant_template
