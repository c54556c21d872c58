"""What the driver and admin accept as a workflow: its id, or an object with an ``id``."""

from __future__ import annotations

from typing import Any

from relayflow.errors import ValidationError

WorkflowRef = Any
"""A workflow id, or an object with an ``id`` (and optionally ``config.timeout_ms``/``tags``)."""


def workflow_id_of(workflow: WorkflowRef) -> str:
    """The id of ``workflow``; a clear error for anything else."""
    workflow_id = workflow if isinstance(workflow, str) else getattr(workflow, "id", None)
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValidationError(f"not a workflow or workflow id: {workflow!r}")
    return workflow_id


def workflow_config_of(workflow: WorkflowRef) -> tuple[int | None, tuple[str, ...]]:
    """The timeout (ms) and tags a workflow object declares (none for a bare id)."""
    config = getattr(workflow, "config", None)
    timeout = getattr(config, "timeout_ms", None)
    tags = getattr(config, "tags", ())
    return (timeout if isinstance(timeout, int) else None), tuple(str(t) for t in tags or ())
