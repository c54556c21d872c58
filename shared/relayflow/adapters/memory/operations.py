"""In-memory audit log and workflow pause marks (one process), with the semantics of the
DynamoDB stores: the same order, window, filters and cursor (``relayflow.operations.audit``)."""

from __future__ import annotations

import threading

from relayflow.operations.audit import (
    AuditPosition,
    encode_cursor,
    environments_of,
    matches,
    position_of,
    window_of,
)
from relayflow.operations.ports import AuditEntry, AuditPage, AuditQuery, WorkflowPause
from relayflow.ports import Clock
from relayflow.protocol import ENVIRONMENTS


class InMemoryAuditLog:
    """The :class:`~relayflow.operations.ports.AuditLog` port in memory.

    Args:
        clock: Gives ``now``, the default end of a listing's window.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._entries: dict[AuditPosition, AuditEntry] = {}
        self._lock = threading.Lock()

    def record(self, entry: AuditEntry) -> None:
        """Store ``entry`` unless one with the same time and id is already there."""
        with self._lock:
            self._entries.setdefault(position_of(entry), entry.model_copy(deep=True))

    def list(self, query: AuditQuery) -> AuditPage:
        """Entries matching ``query``, newest first (see the port)."""
        window = window_of(query, self._clock.now_ms())
        environments = environments_of(query)
        with self._lock:
            ordered = sorted(self._entries.items(), reverse=True)
        found: list[AuditEntry] = []
        for _, entry in ordered:
            if entry.environment in environments and window.admits(entry) and matches(entry, query):
                found.append(entry.model_copy(deep=True))
                if len(found) > window.limit:
                    break
        if len(found) <= window.limit:
            return AuditPage(entries=found)
        page = found[: window.limit]
        return AuditPage(entries=page, next_cursor=encode_cursor(position_of(page[-1])))


class InMemoryWorkflowPauses:
    """The :class:`~relayflow.operations.ports.WorkflowPauses` port in memory."""

    def __init__(self) -> None:
        self._marks: dict[tuple[str, str], WorkflowPause] = {}
        self._lock = threading.Lock()

    def pause(self, mark: WorkflowPause) -> bool:
        """Mark the workflow paused; False (and the first mark kept) when it already was."""
        with self._lock:
            key = (mark.environment, mark.workflow_id)
            if key in self._marks:
                return False
            self._marks[key] = mark.model_copy(deep=True)
            return True

    def resume(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """Clear the mark; the mark removed, or None when there was none."""
        with self._lock:
            return self._marks.pop((environment, workflow_id), None)

    def get(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """The workflow's mark, or None."""
        with self._lock:
            mark = self._marks.get((environment, workflow_id))
        return None if mark is None else mark.model_copy(deep=True)

    def list(self, environment: str | None = None) -> list[WorkflowPause]:
        """Every mark (of one environment), by environment then workflow id."""
        environments = ENVIRONMENTS if environment is None else (environment,)
        with self._lock:
            marks = sorted(self._marks.items())
        return [m.model_copy(deep=True) for (env, _), m in marks if env in environments]
