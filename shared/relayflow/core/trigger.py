"""Creating runs: run ids (explicit, idempotent or generated) and the initial record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relayflow.core.record import ParentLink, RerunOrigin, RunRecord
from relayflow.errors import ValidationError
from relayflow.flow.declarations import TriggerOptions
from relayflow.protocol import (
    ENVIRONMENTS,
    CodeVersion,
    Journal,
    RunTrigger,
    TenantMeta,
    Versioning,
)


@dataclass(frozen=True)
class TriggerSpec:
    """Everything needed to create a run.

    Attributes:
        workflow_id: The workflow to run.
        input: Its JSON input.
        run_id: The run id, already resolved (see :func:`resolve_run_id`).
        workflow_version: Version label sent to the host.
        environment: ``production``, ``preview`` or ``development``.
        tags: Free-form labels, filterable in ``list_runs``.
        tenant_meta: Owner of the run; ``tenant_script`` picks the dispatcher.
        triggered_by: What started the run.
        idempotency_key: The caller's key, kept on the record.
        timeout_ms: Workflow timeout; the run fails with ``WORKFLOW_TIMEOUT`` after it.
        parent: The parent and its RUN wait, for attached child runs.
        flow: The trigger's flow-control options (delay, debounce, ttl, priority,
            concurrency key).
        parent_workflow_id: The parent's workflow, for child runs (a child of its parent's
            own workflow runs under its parent's concurrency slot).
        event: The triggering event's envelope, for flow-control keys that read it (not
            stored with the run).
        rerun_of: The run (and its top-level step) this one reruns from.
        journal: The journal the run starts with (a rerun's copy of the original's).
        trace_parent: The caller's W3C ``traceparent`` the run's trace continues.
        code_version: The code the run starts pinned to (a rerun's, the original's: its
            copied history was recorded on that code), and how its workflow meets new code.
    """

    workflow_id: str
    input: Any
    run_id: str
    workflow_version: str = "v1"
    environment: str = "development"
    tags: tuple[str, ...] = ()
    tenant_meta: TenantMeta = field(default_factory=TenantMeta)
    triggered_by: RunTrigger = field(default_factory=RunTrigger)
    idempotency_key: str | None = None
    timeout_ms: int | None = None
    parent: ParentLink | None = None
    flow: TriggerOptions | None = None
    parent_workflow_id: str | None = None
    event: Any = None
    rerun_of: RerunOrigin | None = None
    journal: Journal | None = None
    code_version: CodeVersion | None = None
    versioning: Versioning | None = None
    trace_parent: str | None = None


def resolve_run_id(
    workflow_id: str, *, run_id: str | None, idempotency_key: str | None, generated: str
) -> str:
    """The run id: explicit, else ``idem-<workflowId>-<key>``, else ``generated``."""
    if run_id:
        return run_id
    if idempotency_key:
        return f"idem-{workflow_id}-{idempotency_key}"
    return generated


def new_run(spec: TriggerSpec, now: int) -> RunRecord:
    """The initial record of a run: ``running``, empty journal, due at once."""
    if spec.environment not in ENVIRONMENTS:
        raise ValidationError(
            f"environment must be one of {', '.join(ENVIRONMENTS)}, got {spec.environment!r}"
        )
    if not spec.workflow_id:
        raise ValidationError("workflow id must be a non-empty string")
    if spec.timeout_ms is not None and spec.timeout_ms <= 0:
        raise ValidationError(f"workflow timeout must be positive, got {spec.timeout_ms} ms")
    return RunRecord(
        id=spec.run_id,
        workflow_id=spec.workflow_id,
        workflow_version=spec.workflow_version,
        status="running",
        input=spec.input,
        started_at=now,
        triggered_by=spec.triggered_by.model_copy(deep=True),
        tags=list(spec.tags),
        environment=spec.environment,
        tenant_meta=spec.tenant_meta.model_copy(deep=True),
        idempotency_key=spec.idempotency_key,
        timeout_ms=spec.timeout_ms,
        timeout_deadline=now + spec.timeout_ms if spec.timeout_ms is not None else None,
        parent=spec.parent,
        wake_at=now,
        rerun_of=spec.rerun_of,
        journal=spec.journal.model_copy(deep=True) if spec.journal is not None else Journal(),
        code_version=spec.code_version,
        versioning=spec.versioning,
        trace_parent=spec.trace_parent,
    )
