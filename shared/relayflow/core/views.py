"""Read-only views of a run for admins and tests: summary, detail with timeline, and the
journal events ``stream_run`` yields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from relayflow.core.record import RecordModel, RunRecord
from relayflow.protocol import (
    CompensationReport,
    RunTrigger,
    SerializedError,
    StreamChunk,
)


class RunSummary(RecordModel):
    """One line of ``list_runs``."""

    id: str
    workflow_id: str
    status: str
    started_at: int
    completed_at: int | None = None
    tags: list[str] = Field(default_factory=list)
    environment: str = "development"


class TimelineEntry(RecordModel):
    """One step attempt or one wait of a run.

    ``outcome`` is ``ok``/``err``/``started``/``retrying`` for steps and ``pending``,
    ``resolved``, ``timed_out``, ``error`` or ``cancelled`` (the run ended first) for waits.
    """

    type: Literal["step", "wait"]
    id: str
    attempt: int | None = None
    kind: str | None = None
    started_at: int
    ended_at: int | None = None
    outcome: str
    source: str | None = None
    error: SerializedError | None = None


class RunDetail(RunSummary):
    """Everything about a run an admin or a test looks at."""

    workflow_version: str = "v1"
    input: Any = None
    output: Any = None
    error: SerializedError | None = None
    duration_ms: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    timeline: list[TimelineEntry] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    parent_run_id: str | None = None
    pending_waits: list[str] = Field(default_factory=list)
    compensations: list[CompensationReport] = Field(default_factory=list)
    invocation_count: int = 0
    operations_count: int = 0
    idempotency_key: str | None = None
    triggered_by: RunTrigger = Field(default_factory=RunTrigger)
    streams: dict[str, list[StreamChunk]] = Field(default_factory=dict)
    inbox_size: int = 0


class RunListPage(RecordModel):
    """A page of ``list_runs`` and the cursor of the next page (None at the end)."""

    runs: list[RunSummary]
    next_cursor: str | None = None


class JournalEvent(RecordModel):
    """Something that happened in a run, as ``stream_run`` yields it."""

    type: Literal["step", "wait", "status", "stream_chunk"]
    run_id: str
    at: int
    id: str | None = None
    attempt: int | None = None
    status: str
    data: Any = None

    def key(self) -> tuple[str, str | None, int | None, str]:
        """Identity used to yield each event once."""
        return (self.type, self.id, self.attempt, self.status)


def summary(record: RunRecord) -> RunSummary:
    """The list view of ``record``."""
    return RunSummary(
        id=record.id,
        workflow_id=record.workflow_id,
        status=record.status,
        started_at=record.started_at,
        completed_at=record.completed_at,
        tags=list(record.tags),
        environment=record.environment,
    )


def timeline(record: RunRecord) -> list[TimelineEntry]:
    """One entry per step attempt and per wait, in start order."""
    entries: list[TimelineEntry] = []
    journal = record.journal
    for step_id, step in journal.step_results.items():
        if step.attempts:
            entries.extend(
                TimelineEntry(
                    type="step",
                    id=step_id,
                    attempt=a.attempt,
                    started_at=a.started_at,
                    ended_at=a.finished_at,
                    outcome=a.status,
                    error=a.error,
                )
                for a in step.attempts
            )
        else:
            entries.append(
                TimelineEntry(
                    type="step",
                    id=step_id,
                    attempt=step.attempt,
                    started_at=step.started_at,
                    ended_at=step.finished_at,
                    outcome=step.status,
                    error=step.error,
                )
            )
    for wait_id, reg in journal.waitpoints_registered.items():
        resolution = journal.waitpoints_resolved.get(wait_id)
        outcome = "pending"
        ended_at = resolution.resolved_at if resolution else None
        if resolution is None and record.is_terminal:
            # The run ended (cancelled, failed) while it waited: the wait ended with it.
            outcome, ended_at = "cancelled", record.completed_at
        if resolution is not None:
            outcome = "resolved"
            if resolution.timed_out:
                outcome = "timed_out"
            elif resolution.error is not None:
                outcome = "error"
        entries.append(
            TimelineEntry(
                type="wait",
                id=wait_id,
                kind=reg.kind,
                started_at=reg.registered_at,
                ended_at=ended_at,
                outcome=outcome,
                source=resolution.source if resolution else None,
                error=resolution.error if resolution else None,
            )
        )
    far = 2**63
    entries.sort(key=lambda e: (e.started_at, e.ended_at if e.ended_at is not None else far))
    return entries


def detail(record: RunRecord) -> RunDetail:
    """The detail view of ``record``, timeline included."""
    ended = record.completed_at
    return RunDetail(
        **summary(record).model_dump(),
        workflow_version=record.workflow_version,
        input=record.input,
        output=record.output,
        error=record.error,
        duration_ms=max(0, ended - record.started_at) if ended is not None else None,
        metadata=dict(record.metadata),
        timeline=timeline(record),
        children=[c.run_id for c in record.children],
        parent_run_id=record.parent.run_id if record.parent else None,
        pending_waits=[w.client_waitpoint_id for w in record.pending_waitpoints],
        compensations=list(record.compensations),
        invocation_count=record.invocation_count,
        operations_count=record.operations_count,
        idempotency_key=record.idempotency_key,
        triggered_by=record.triggered_by,
        streams=dict(record.streams),
        inbox_size=len(record.inbox),
    )


def journal_events(record: RunRecord) -> list[JournalEvent]:
    """Every event the record implies so far, in time order (the run's status last)."""
    events: list[JournalEvent] = []
    for entry in timeline(record):
        at = entry.ended_at if entry.ended_at is not None else entry.started_at
        data: dict[str, Any] = {}
        if entry.kind:
            data["kind"] = entry.kind
        if entry.error is not None:
            data["error"] = entry.error.to_wire()
        events.append(
            JournalEvent(
                type=entry.type,
                run_id=record.id,
                at=at,
                id=entry.id,
                attempt=entry.attempt,
                status=entry.outcome,
                data=data or None,
            )
        )
    for stream_id, chunks in record.streams.items():
        events.extend(
            JournalEvent(
                type="stream_chunk",
                run_id=record.id,
                at=chunk.at,
                id=stream_id,
                attempt=chunk.seq,
                status="final" if chunk.final else "chunk",
                data=chunk.chunk,
            )
            for chunk in chunks
        )
    events.sort(key=lambda e: e.at)
    events.append(
        JournalEvent(
            type="status",
            run_id=record.id,
            at=record.completed_at or record.started_at,
            status=record.status,
            data=record.output if record.status == "completed" else None,
        )
    )
    return events
