"""Stage settings from CDK context and the validation of the construct's props."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager

from infra.app import cdk_json_context, command_line_context
from infra.stack import StageSettings, stage_settings
from relayflow.cdk import (
    ApiAuthMode,
    HttpStepHost,
    InlineStepHost,
    RelayflowOrchestrator,
    RelayflowOrchestratorProps,
    StepHostError,
    WorkerStepHost,
)

STAGES = {
    "dev": {"removalPolicy": "destroy", "logRetentionDays": 7},
    "prod": {"architecture": "x86_64", "apiAuth": "iam", "corsOrigins": ["https://a.example"]},
}


def _settings(context: dict[str, Any]) -> StageSettings:
    return stage_settings(App(context={"relayflow:stages": STAGES, **context}))


def test_stage_defaults_to_dev() -> None:
    settings = _settings({})
    assert settings.stage == "dev"
    assert settings.removal_policy == "destroy"
    assert settings.log_retention_days == 7


def test_stage_entry_is_applied() -> None:
    props = _settings({"stage": "prod"}).props()
    assert props.environment_name == "prod"
    assert props.architecture.name == lambda_.Architecture.X86_64.name
    assert props.api_auth is ApiAuthMode.IAM
    assert props.cors is not None and props.cors.allow_origins == ("https://a.example",)
    assert props.removal_policy == RemovalPolicy.RETAIN
    assert props.step_hosts == (InlineStepHost(module="examples"),)


@pytest.mark.parametrize(
    ("key", "value", "field", "expected"),
    [
        ("relayflow:alarmEmail", "ops@example.com", "alarm_email", "ops@example.com"),
        ("relayflow:memorySize", "2048", "memory_size", 2048),
        (
            "relayflow:corsOrigins",
            "https://a.example, https://b.example",
            "cors_origins",
            ("https://a.example", "https://b.example"),
        ),
        ("relayflow:runRetentionDays", "90", "run_retention_days", 90),
    ],
)
def test_command_line_overrides_win(key: str, value: str, field: str, expected: Any) -> None:
    assert getattr(_settings({key: value}), field) == expected


def test_unknown_stage_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown settings"):
        _settings({"relayflow:stages": {"dev": {"memory": 1}}})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"architecture": "sparc"}, "architecture"),
        ({"removal_policy": "keep"}, "removalPolicy"),
        ({"log_retention_days": 8}, "logRetentionDays"),
    ],
)
def test_invalid_stage_values_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StageSettings(**changes).props()


def test_log_retention_maps_to_cloudwatch_values() -> None:
    assert StageSettings(log_retention_days=90).props().log_retention == (
        logs.RetentionDays.THREE_MONTHS
    )


def test_cdk_json_context_is_read_when_run_without_the_cli(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    context = cdk_json_context()
    assert context["stage"] == "dev"
    assert set(context["relayflow:stages"]) >= {"dev", "prod"}
    monkeypatch.setenv("CDK_OUTDIR", "cdk.out")
    assert cdk_json_context() == {}


def _orchestrator(props: RelayflowOrchestratorProps) -> None:
    app = App(context={"aws:cdk:bundling-stacks": []})
    RelayflowOrchestrator(Stack(app, "S"), "Relayflow", props)


@pytest.mark.parametrize("name", ["", "1dev", "dev_1", "x" * 33, "dév"])
def test_environment_names_are_checked(name: str) -> None:
    with pytest.raises(ValueError, match="environment_name"):
        _orchestrator(RelayflowOrchestratorProps(environment_name=name))


def test_two_default_step_hosts_are_refused() -> None:
    with pytest.raises(StepHostError, match="default"):
        _orchestrator(RelayflowOrchestratorProps(step_hosts=(InlineStepHost(), WorkerStepHost())))


def test_a_workflow_routed_twice_is_refused() -> None:
    hosts = (InlineStepHost(workflows=("a",)), WorkerStepHost(workflows=("a",)))
    with pytest.raises(StepHostError, match="'a'"):
        _orchestrator(RelayflowOrchestratorProps(step_hosts=hosts))


def test_http_hosts_must_share_one_signing_secret() -> None:
    app = App(context={"aws:cdk:bundling-stacks": []})
    stack = Stack(app, "S")
    one = secretsmanager.Secret.from_secret_name_v2(stack, "One", "one")
    two = secretsmanager.Secret.from_secret_name_v2(stack, "Two", "two")
    hosts = (
        HttpStepHost(url="https://a.example", signing_secret=one, workflows=("a",)),
        HttpStepHost(url="https://b.example", signing_secret=two, workflows=("b",)),
    )
    with pytest.raises(StepHostError, match="signing secret"):
        RelayflowOrchestrator(stack, "Relayflow", RelayflowOrchestratorProps(step_hosts=hosts))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {}),
        (["-c", "stage=prod"], {"stage": "prod"}),
        (["--context", "a=1", "--context=b=x=y"], {"a": "1", "b": "x=y"}),
    ],
)
def test_app_reads_context_flags_like_the_cli(argv: list[str], expected: dict[str, str]) -> None:
    assert command_line_context(argv) == expected


@pytest.mark.parametrize("argv", [["stage=prod"], ["-c", "stage"], ["-c", "=x"]])
def test_app_refuses_malformed_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        command_line_context(argv)


def test_public_names_of_the_cdk_package() -> None:
    import relayflow.cdk as cdk

    assert sorted(cdk.__all__) == [
        "ApiAuthMode",
        "BundleError",
        "CorsSettings",
        "FunctionHandlers",
        "HttpStepHost",
        "InlineStepHost",
        "LambdaBundle",
        "LambdaStepHost",
        "RelayflowOrchestrator",
        "RelayflowOrchestratorProps",
        "StepHost",
        "StepHostError",
        "WorkerStepHost",
    ]
    for name in cdk.__all__:
        assert getattr(cdk, name) is not None
