"""The relayflow CDK construct: `RelayflowOrchestrator`, its props and Docker-free bundling.

Install with `pip install 'relayflow[cdk]'` (adds aws-cdk-lib and constructs). `import
relayflow` never imports this package, so Lambda functions and the CLI do not need CDK.
"""

try:
    from relayflow.cdk.bundling import BundleError, LambdaBundle
    from relayflow.cdk.functions import FunctionHandlers
    from relayflow.cdk.orchestrator import RelayflowOrchestrator, StepHostError
    from relayflow.cdk.props import (
        ApiAuthMode,
        CorsSettings,
        HttpStepHost,
        InlineStepHost,
        LambdaStepHost,
        RelayflowOrchestratorProps,
        StepHost,
        WorkerStepHost,
    )
except ModuleNotFoundError as exc:
    if exc.name and exc.name.partition(".")[0] in ("aws_cdk", "constructs", "jsii"):
        raise ImportError("relayflow.cdk needs the AWS CDK: pip install 'relayflow[cdk]'") from exc
    raise

__all__ = [
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
