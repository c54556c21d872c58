"""The stores operations need: the audit log across runs and the paused workflows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import Field

from relayflow.core.record import RecordModel

AuditKind = Literal[
    "pause",
    "resume",
    "cancel",
    "redrive",
    "rerun",
    "upgrade",
    "pause_workflow",
    "resume_workflow",
    "bulk",
]


class AuditEntry(RecordModel):
    """One operator action, as the audit log lists it (newest first)."""

    #: The action id (a request's ``Idempotency-Key``, a bulk job's run id): recording the
    #: same id twice keeps one entry.
    id: str
    kind: AuditKind
    at: int
    by: str
    environment: str
    workflow_id: str | None = None
    run_id: str | None = None
    reason: str | None = None
    #: What the action chose or made (``fromStep``, ``rerunId``, a bulk job's filter...).
    detail: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class AuditQuery:
    """Filters of the audit log; every one optional."""

    environment: str | None = None
    kind: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None
    since: int | None = None
    until: int | None = None
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True)
class AuditPage:
    """One page of the audit log, newest first; ``next_cursor`` is None on the last."""

    entries: list[AuditEntry]
    next_cursor: str | None = None


class AuditLog(Protocol):
    """Where operator actions are recorded across runs."""

    def record(self, entry: AuditEntry) -> None:
        """Store ``entry``; an entry with the same id (and time) is stored once."""

    def list(self, query: AuditQuery) -> AuditPage:
        """Entries matching ``query``, newest first."""


class WorkflowPause(RecordModel):
    """A workflow paused in one environment: its new runs are inserted ``paused``."""

    workflow_id: str
    environment: str
    at: int
    by: str
    reason: str | None = None


class WorkflowPauses(Protocol):
    """Which workflows are paused, per environment."""

    def pause(self, mark: WorkflowPause) -> bool:
        """Mark the workflow paused; False when it already was (the mark is kept)."""

    def resume(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """Clear the mark; the mark removed, or None when the workflow was not paused."""

    def get(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """The workflow's mark, or None."""

    def list(self, environment: str | None = None) -> list[WorkflowPause]:
        """Every paused workflow (of one environment)."""
