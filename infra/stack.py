"""The sample stack: one `RelayflowOrchestrator`, configured per stage from CDK context.

Stage settings come from `cdk.json` (`relayflow:stages`) and `-c` flags, never from AWS calls,
so synth works offline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from relayflow.cdk import (
    ApiAuthMode,
    CorsSettings,
    FunctionHandlers,
    InlineStepHost,
    LambdaBundle,
    RelayflowOrchestrator,
    RelayflowOrchestratorProps,
)

__all__ = ["RelayflowStack", "StageSettings", "stage_settings"]

ROOT = Path(__file__).resolve().parents[1]
"""The repository root; the sample workflows are its `examples` package."""

FUNCTIONS = ROOT / "functions"
"""One folder per deployed function, each `handler.py` the entry point of that function."""

HANDLERS = FunctionHandlers(
    api="functions.api.handler.lambda_handler",
    drive="functions.drive.handler.lambda_handler",
    sweeper="functions.sweeper.handler.lambda_handler",
    worker="functions.worker.handler.lambda_handler",
)

STAGE_KEY = "stage"
STAGES_KEY = "relayflow:stages"
_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS,
}


@dataclass(frozen=True)
class StageSettings:
    """One stage of the sample app, read from CDK context.

    Attributes:
        stage: Stage name (`-c stage=dev`); also the relayflow environment name.
        workflow_module: Module of workflows hosted inline (the `examples` package).
        architecture: `arm64` or `x86_64`.
        memory_size: Memory (MiB) of the api, drive and worker functions.
        api_auth: `bearer` or `iam`.
        cors_origins: Allowed browser origins; empty for no CORS.
        run_retention_days: Days finished runs are kept.
        removal_policy: `retain` or `destroy` for the table, buckets and logs.
        log_retention_days: Days logs are kept (a CloudWatch retention value).
        alarm_email: Address notified of alarms, if any.
    """

    stage: str = "dev"
    workflow_module: str = "examples"
    architecture: str = "arm64"
    memory_size: int = 1024
    api_auth: str = "bearer"
    cors_origins: tuple[str, ...] = ()
    run_retention_days: int = 30
    removal_policy: str = "retain"
    log_retention_days: int = 30
    alarm_email: str | None = None

    def props(self) -> RelayflowOrchestratorProps:
        """The orchestrator props of this stage."""
        if self.architecture not in ("arm64", "x86_64"):
            raise ValueError(f"architecture must be arm64 or x86_64, got {self.architecture!r}")
        if self.removal_policy not in ("retain", "destroy"):
            raise ValueError(
                f"removalPolicy must be retain or destroy, got {self.removal_policy!r}"
            )
        if self.log_retention_days not in _RETENTION:
            raise ValueError(
                f"logRetentionDays must be one of {sorted(_RETENTION)}, "
                f"got {self.log_retention_days}"
            )
        return RelayflowOrchestratorProps(
            environment_name=self.stage,
            step_hosts=(InlineStepHost(module=self.workflow_module),),
            architecture=(
                lambda_.Architecture.ARM_64
                if self.architecture == "arm64"
                else lambda_.Architecture.X86_64
            ),
            memory_size=self.memory_size,
            api_auth=ApiAuthMode(self.api_auth),
            cors=CorsSettings(allow_origins=self.cors_origins) if self.cors_origins else None,
            run_retention_days=self.run_retention_days,
            removal_policy=(
                RemovalPolicy.DESTROY if self.removal_policy == "destroy" else RemovalPolicy.RETAIN
            ),
            log_retention=_RETENTION[self.log_retention_days],
            alarm_email=self.alarm_email,
            bundle=LambdaBundle(
                workflow_paths=(ROOT / self.workflow_module.partition(".")[0], FUNCTIONS)
            ),
            handlers=HANDLERS,
        )


_CONTEXT_FIELDS = {
    "workflowModule": "workflow_module",
    "architecture": "architecture",
    "memorySize": "memory_size",
    "apiAuth": "api_auth",
    "corsOrigins": "cors_origins",
    "runRetentionDays": "run_retention_days",
    "removalPolicy": "removal_policy",
    "logRetentionDays": "log_retention_days",
    "alarmEmail": "alarm_email",
}


def _coerce(field_name: str, value: Any) -> Any:
    # `-c key=value` always arrives as a string; cdk.json values keep their JSON type.
    if field_name in ("memory_size", "run_retention_days", "log_retention_days"):
        return int(value)
    if field_name == "cors_origins":
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(str(item).strip() for item in items if str(item).strip())
    return str(value) if value is not None else None


def stage_settings(scope: Construct) -> StageSettings:
    """Read the stage named by context `stage` and its entry in `relayflow:stages`.

    A single setting can be overridden on the command line with `-c relayflow:<key>=<value>`,
    for example `-c relayflow:alarmEmail=ops@example.com`.
    """
    node = scope.node
    stage = str(node.try_get_context(STAGE_KEY) or "dev")
    stages: Mapping[str, Any] = node.try_get_context(STAGES_KEY) or {}
    values: dict[str, Any] = dict(stages.get(stage) or {})
    for key in _CONTEXT_FIELDS:
        override = node.try_get_context(f"relayflow:{key}")
        if override is not None:
            values[key] = override
    unknown = sorted(set(values) - set(_CONTEXT_FIELDS))
    if unknown:
        raise ValueError(f"unknown settings for stage {stage!r}: {', '.join(unknown)}")
    settings = StageSettings(stage=stage)
    changes = {_CONTEXT_FIELDS[k]: _coerce(_CONTEXT_FIELDS[k], v) for k, v in values.items()}
    return replace(settings, **changes)


class RelayflowStack(Stack):
    """A stack holding one relayflow deployment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: RelayflowOrchestratorProps,
        **kwargs: Any,
    ) -> None:
        """Create the stack with one `RelayflowOrchestrator` described by `props`."""
        super().__init__(scope, construct_id, **kwargs)
        self.orchestrator = RelayflowOrchestrator(self, "Relayflow", props)


def stack_for_stage(app: App, settings: StageSettings) -> RelayflowStack:
    """The sample stack of `settings`, in the account/region the CDK CLI resolved (if any)."""
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = os.environ.get("CDK_DEFAULT_REGION")
    env = Environment(account=account, region=region) if account and region else None
    return RelayflowStack(
        app,
        f"Relayflow-{settings.stage}",
        settings.props(),
        env=env,
        description=f"relayflow durable workflows ({settings.stage})",
    )
