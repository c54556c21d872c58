"""relayflow: durable Python workflows on AWS serverless.

The public authoring surface: declare workflows with :func:`workflow`, write bodies against
:class:`WorkflowContext`, and raise the errors below to steer retries.
"""

from relayflow.errors import (
    ChildRunError,
    ConditionCheckError,
    FatalError,
    HeartbeatTimeoutError,
    NonDeterminismError,
    NotJsonError,
    RelayflowError,
    RetryableError,
    ServiceNotFoundError,
    StepFailedError,
    StepInterruptedError,
    StepStillRunningError,
    StepTimeoutError,
    TokenFailedError,
    WaitTimeoutError,
)
from relayflow.events import build_manifest, trigger_on
from relayflow.schedules.declaration import Schedule
from relayflow.sdk.batch import BatchResult, CompletionPolicy
from relayflow.sdk.context import WorkflowContext
from relayflow.sdk.context_base import SyncTokenHandle, TokenHandle
from relayflow.sdk.durations import Duration, parse_duration
from relayflow.sdk.registry import (
    Workflow,
    WorkflowConfig,
    get_workflow,
    registered_workflows,
    workflow,
)
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.scope import StepInfo, current_step
from relayflow.sdk.serdes import Serdes
from relayflow.sdk.sync_context import SyncWorkflowContext

__version__ = "0.1.0"

__all__ = [
    "BatchResult",
    "ChildRunError",
    "CompletionPolicy",
    "ConditionCheckError",
    "Duration",
    "FatalError",
    "HeartbeatTimeoutError",
    "NonDeterminismError",
    "NotJsonError",
    "RelayflowError",
    "RetryPolicy",
    "RetryableError",
    "Schedule",
    "Serdes",
    "ServiceNotFoundError",
    "StepFailedError",
    "StepInfo",
    "StepInterruptedError",
    "StepStillRunningError",
    "StepTimeoutError",
    "SyncTokenHandle",
    "SyncWorkflowContext",
    "TokenFailedError",
    "TokenHandle",
    "WaitTimeoutError",
    "Workflow",
    "WorkflowConfig",
    "WorkflowContext",
    "__version__",
    "build_manifest",
    "current_step",
    "get_workflow",
    "parse_duration",
    "registered_workflows",
    "trigger_on",
    "workflow",
]
