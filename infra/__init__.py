"""CDK infrastructure of relayflow: the reusable `RelayflowOrchestrator` construct and its props."""

from infra.bundling import LambdaBundle
from infra.orchestrator import RelayflowOrchestrator, StepHostError
from infra.props import (
    ApiAuthMode,
    CorsSettings,
    HttpStepHost,
    InlineStepHost,
    LambdaStepHost,
    RelayflowOrchestratorProps,
    StepHost,
    WorkerStepHost,
)

__all__ = [
    "ApiAuthMode",
    "CorsSettings",
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
