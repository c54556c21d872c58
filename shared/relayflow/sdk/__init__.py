"""The authoring SDK: ``@workflow``, the ``ctx`` API and the replay executor."""

from relayflow.sdk.batch import BatchResult, CompletionPolicy, CompletionReason
from relayflow.sdk.context import WorkflowContext
from relayflow.sdk.context_base import SyncTokenHandle, TokenHandle
from relayflow.sdk.durations import Duration, parse_duration
from relayflow.sdk.executor import execute
from relayflow.sdk.info import EnvironmentInfo, RunInfo, Services, WorkflowInfo
from relayflow.sdk.invocation import ExecutorOptions
from relayflow.sdk.registry import (
    Workflow,
    WorkflowConfig,
    find_workflow,
    get_workflow,
    registered_workflows,
    reset_registry,
    workflow,
)
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.scope import StepInfo, current_step
from relayflow.sdk.serdes import JsonSerdes, Serdes
from relayflow.sdk.sync_context import SyncWorkflowContext

__all__ = [
    "BatchResult",
    "CompletionPolicy",
    "CompletionReason",
    "Duration",
    "EnvironmentInfo",
    "ExecutorOptions",
    "JsonSerdes",
    "RetryPolicy",
    "RunInfo",
    "Serdes",
    "Services",
    "StepInfo",
    "SyncTokenHandle",
    "SyncWorkflowContext",
    "TokenHandle",
    "Workflow",
    "WorkflowConfig",
    "WorkflowContext",
    "WorkflowInfo",
    "current_step",
    "execute",
    "find_workflow",
    "get_workflow",
    "parse_duration",
    "registered_workflows",
    "reset_registry",
    "workflow",
]
