"""The public surface of ``relayflow`` is pinned: changing it must be deliberate."""

from __future__ import annotations

import relayflow

EXPECTED = {
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
}


def test_all_is_pinned() -> None:
    assert set(relayflow.__all__) == EXPECTED
    assert len(relayflow.__all__) == len(EXPECTED), "no duplicates"


def test_every_exported_name_exists() -> None:
    for name in relayflow.__all__:
        assert getattr(relayflow, name) is not None, name


def test_the_public_errors_share_one_base() -> None:
    for name in relayflow.__all__:
        value = getattr(relayflow, name)
        if isinstance(value, type) and name.endswith("Error"):
            assert issubclass(value, relayflow.RelayflowError), name


def test_the_sdk_surface_is_the_one_the_design_names() -> None:
    assert relayflow.__version__ == "0.1.0"
    assert relayflow.trigger_on.__module__.startswith("relayflow.events")
    assert relayflow.build_manifest.__module__.startswith("relayflow.events")
    assert relayflow.WorkflowContext.__module__ == "relayflow.sdk.context"
