"""Read-only views of a run for admins and tests: summary, detail with timeline, and the
journal events ``stream_run`` yields."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Literal

from pydantic import Field, PrivateAttr, computed_field

from relayflow.core.record import (
    CompensationSkipped,
    PauseState,
    RecordModel,
    Redrive,
    RerunOrigin,
    RunAction,
    RunRecord,
    VersionWait,
)
from relayflow.core.timeline import TimelineEntry as TimelineEntry
from relayflow.core.timeline import timeline as timeline

# Re-exported: the timeline's entries were built here before they had a module of their own.
from relayflow.core.versions import version_warning
from relayflow.costs import PriceTable, RunCost, RunUsage, cost_of
from relayflow.errors import ValidationError
from relayflow.flow.status import KeyOccupancy, status_line
from relayflow.payloads import UNREADABLE_PAYLOADS
from relayflow.protocol import (
    CodeVersion,
    CompensationReport,
    Durability,
    RunTrigger,
    SerializedError,
    StreamChunk,
    Versioning,
)
from relayflow.tracing.ids import RunTrace

#: The largest value (bytes of its JSON) one timeline entry carries; larger ones are left
#: out with ``valueTruncated``.
TIMELINE_VALUE_CAP_BYTES = 64 * 1024
#: Values one timeline page carries at most (bytes of JSON, the first entry always fits):
#: with the entries themselves a page stays far below Lambda's 6 MB response limit.
TIMELINE_PAGE_VALUE_BUDGET_BYTES = 1024 * 1024
#: Entries per timeline page when the caller does not say, and at most.
TIMELINE_DEFAULT_LIMIT = 100
TIMELINE_MAX_LIMIT = 1000


class UnavailableValue(RecordModel):
    """A value of a run that its payload store no longer holds (or holds corrupted).

    ``path`` is a JSON Pointer into the run's stored document (``/input``, ``/output``,
    ``/journal/stepResults/<key>``...); ``reason`` is ``payload_not_found`` or
    ``payload_corrupt``; ``ref`` is the payload reference that could not be read.
    """

    path: str
    reason: str
    ref: str | None = None


class RunSummary(RecordModel):
    """One line of ``list_runs``."""

    id: str
    workflow_id: str
    status: str
    started_at: int
    completed_at: int | None = None
    tags: list[str] = Field(default_factory=list)
    environment: str = "development"
    #: Values the payload store could not give: left out (None) of this view.
    values_unavailable: list[UnavailableValue] = Field(default_factory=list)
    #: Since when, by whom and why the run is paused (set while ``paused``).
    pause: PauseState | None = None
    #: How often the run was redriven.
    redrive_count: int = 0
    #: The run that started this one with ``ctx.invoke`` (None for a top-level run).
    parent_run_id: str | None = None
    #: The run this one reruns from a step, and the step.
    rerun_of: RerunOrigin | None = None
    #: The code the run is on (see docs/guides/versioning.md), how its workflow meets new
    #: code, and why it waits for its code version when it does.
    code_version: CodeVersion | None = None
    versioning: Versioning | None = None
    version_wait: VersionWait | None = None


class TimelinePage(RecordModel):
    """One page of a run's timeline and the cursor of the next page (None at the end)."""

    run_id: str
    status: str
    entries: list[TimelineEntry]
    next_cursor: str | None = None
    #: The run's status line, as in its detail (``RunDetail.status_detail``).
    status_detail: str | None = None
    #: Entries of the run the payload store no longer gives: absent from every page.
    values_unavailable: list[UnavailableValue] = Field(default_factory=list)


class RunDetail(RunSummary):
    """Everything about a run an admin or a test looks at.

    ``timeline`` is built from the run's record the first time it is read (or dumped): a
    caller that never looks at it, as most answers of the API do, does not pay for an entry
    per step attempt and wait.
    """

    workflow_version: str = "v1"
    input: Any = None
    output: Any = None
    error: SerializedError | None = None
    duration_ms: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    children: list[str] = Field(default_factory=list)
    pending_waits: list[str] = Field(default_factory=list)
    compensations: list[CompensationReport] = Field(default_factory=list)
    #: Set when a cancel asked for compensation and none ran: the reason.
    compensation_skipped: CompensationSkipped | None = None
    invocation_count: int = 0
    operations_count: int = 0
    #: Why flow control keeps the run from running (``queued (concurrency key acme: 5 of 5
    #: in use)``, ``delayed until ...``, ``rate limited until ...``), else None.
    status_detail: str | None = None
    #: ``per_step``, ``per_invocation`` (some answer was durable only as a whole), or None
    #: before the first answer.
    durability: Durability | None = None
    idempotency_key: str | None = None
    triggered_by: RunTrigger = Field(default_factory=RunTrigger)
    streams: dict[str, list[StreamChunk]] = Field(default_factory=dict)
    inbox_size: int = 0
    #: The operator actions applied to the run, oldest first.
    actions: list[RunAction] = Field(default_factory=list)
    #: The redrives of the run, oldest first, with the failed attempts each took out.
    redrives: list[Redrive] = Field(default_factory=list)
    #: The runs that rerun this one from a step, oldest first.
    reruns: list[str] = Field(default_factory=list)
    #: Set when the run is pinned to code its function cannot reach again (``$LATEST``).
    version_warning: str | None = None
    #: The run's OpenTelemetry trace id (32 hex digits; see docs/guides/tracing.md).
    trace_id: str | None = None
    #: The AWS work recorded for the run in billing units, and what it cost at the
    #: deployment's price table (None before any was recorded; see docs/operations/costs.md).
    usage: RunUsage | None = None
    cost: RunCost | None = None
    _timeline: list[TimelineEntry] | None = PrivateAttr(default=None)
    _build_timeline: Callable[[], list[TimelineEntry]] | None = PrivateAttr(default=None)

    def __init__(self, timeline: Iterable[Any] | None = None, **data: Any) -> None:
        super().__init__(**data)
        if timeline is not None:
            self._timeline = [TimelineEntry.model_validate(entry) for entry in timeline]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def timeline(self) -> list[TimelineEntry]:
        """One entry per step attempt and per wait, in start order."""
        if self._timeline is None:
            build = self._build_timeline
            self._timeline = build() if build is not None else []
        return self._timeline


class RunListPage(RecordModel):
    """A page of ``list_runs`` and the cursor of the next page (None at the end)."""

    runs: list[RunSummary]
    next_cursor: str | None = None


class JournalEvent(RecordModel):
    """Something that happened in a run, as ``stream_run`` yields it."""

    type: Literal["step", "wait", "action", "status", "stream_chunk"]
    run_id: str
    at: int
    id: str | None = None
    attempt: int | None = None
    status: str
    data: Any = None

    def key(self) -> tuple[str, str | None, int | None, str]:
        """Identity used to yield each event once."""
        return (self.type, self.id, self.attempt, self.status)


def summary(record: RunRecord, unavailable: Iterable[UnavailableValue] = ()) -> RunSummary:
    """The list view of ``record``, naming the values of it its store could not give."""
    return RunSummary(
        values_unavailable=list(unavailable),
        id=record.id,
        workflow_id=record.workflow_id,
        status=record.status,
        started_at=record.started_at,
        completed_at=record.completed_at,
        tags=list(record.tags),
        environment=record.environment,
        pause=record.pause,
        redrive_count=record.redrive_count,
        parent_run_id=record.parent.run_id if record.parent else None,
        rerun_of=record.rerun_of,
        code_version=record.code_version,
        versioning=record.versioning,
        version_wait=record.version_wait,
    )


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def cap_value(
    entry: TimelineEntry,
    *,
    resolve: Callable[[Any], Any] | None = None,
    cap: int = TIMELINE_VALUE_CAP_BYTES,
) -> TimelineEntry:
    """``entry`` with its value sized, resolved from the payload store and capped.

    ``resolve`` turns a payload pointer into the value it stands for; a pointer whose size is
    over ``cap`` is not fetched at all.
    """
    value = entry.value
    pointer_size = _pointer_size(value)
    if pointer_size is not None:
        if pointer_size > cap:
            return entry.model_copy(
                update={"value": None, "value_size": pointer_size, "value_truncated": True}
            )
        if resolve is not None:
            try:
                value = resolve(value)
            except UNREADABLE_PAYLOADS as exc:
                return entry.model_copy(
                    update={
                        "value": None,
                        "value_size": pointer_size,
                        "value_truncated": False,
                        "value_unavailable": exc.code,
                    }
                )
    size = _json_size(value)
    if size > cap:
        return entry.model_copy(update={"value": None, "value_size": size, "value_truncated": True})
    return entry.model_copy(update={"value": value, "value_size": size, "value_truncated": False})


def _pointer_size(value: Any) -> int | None:
    # Payload pointers are {"$relayflowPayload": ref, "size": n} (see relayflow.payloads).
    if isinstance(value, dict) and len(value) == 2 and "$relayflowPayload" in value:
        size = value.get("size")
        return size if isinstance(size, int) else None
    return None


#: A timeline cursor: the offset of the page's first entry, in decimal. Every such string is a
#: place in the timeline (past its end, an empty page); the HTTP API documents the pattern.
TIMELINE_CURSOR_PATTERN = r"^[0-9]{1,9}$"
_TIMELINE_CURSOR = re.compile(TIMELINE_CURSOR_PATTERN)


def encode_timeline_cursor(offset: int) -> str:
    """The cursor pointing at the ``offset``-th entry of a run's timeline."""
    return str(offset)


def decode_timeline_cursor(cursor: str) -> int:
    """The entry offset a timeline cursor points at; ``ValidationError`` if it is not one."""
    if not _TIMELINE_CURSOR.fullmatch(cursor):
        raise ValidationError(f"invalid timeline cursor: {cursor!r}")
    return int(cursor)


def timeline_page(
    record: RunRecord,
    *,
    values: bool = False,
    cursor: str | None = None,
    limit: int = TIMELINE_DEFAULT_LIMIT,
    resolve: Callable[[Any], Any] | None = None,
    budget: int = TIMELINE_PAGE_VALUE_BUDGET_BYTES,
    occupancy: KeyOccupancy | None = None,
) -> TimelinePage:
    """One page of ``record``'s timeline: at most ``limit`` entries from ``cursor`` on, and
    (with ``values``) at most ``budget`` bytes of values, the first entry always included.
    ``occupancy`` is the queued run's key occupancy for its status line."""
    if isinstance(limit, bool) or not 1 <= limit <= TIMELINE_MAX_LIMIT:
        raise ValidationError(f"limit must be between 1 and {TIMELINE_MAX_LIMIT}, got {limit!r}")
    start = decode_timeline_cursor(cursor) if cursor else 0
    entries = timeline(record, values=values)
    page: list[TimelineEntry] = []
    spent = 0
    position = start
    while position < len(entries) and len(page) < limit:
        entry = entries[position]
        if values:
            entry = cap_value(entry, resolve=resolve)
            size = entry.value_size or 0 if not entry.value_truncated else 0
            if page and spent + size > budget:
                break
            spent += size
        page.append(entry)
        position += 1
    more = position < len(entries)
    return TimelinePage(
        run_id=record.id,
        status=record.status,
        entries=page,
        next_cursor=encode_timeline_cursor(position) if more else None,
        status_detail=status_line(record, occupancy),
    )


def detail(
    record: RunRecord,
    entries: list[TimelineEntry] | None = None,
    occupancy: KeyOccupancy | None = None,
    prices: PriceTable | None = None,
) -> RunDetail:
    """The detail view of ``record``; its timeline is ``entries`` when already built, else
    built from ``record`` when first read (the record must not change meanwhile: a saved
    record never does, transitions change copies). ``occupancy`` is a queued run's key
    occupancy, for its status line; its cost is priced at ``prices`` (list prices when
    None)."""
    ended = record.completed_at
    view = RunDetail(
        **summary(record).model_dump(),
        workflow_version=record.workflow_version,
        input=record.input,
        output=record.output,
        error=record.error,
        duration_ms=max(0, ended - record.started_at) if ended is not None else None,
        metadata=dict(record.metadata),
        children=[c.run_id for c in record.children],
        pending_waits=[w.client_waitpoint_id for w in record.pending_waitpoints],
        compensations=list(record.compensations),
        compensation_skipped=record.compensation_skipped,
        invocation_count=record.invocation_count,
        operations_count=record.operations_count,
        durability=record.durability,
        idempotency_key=record.idempotency_key,
        triggered_by=record.triggered_by,
        streams=dict(record.streams),
        inbox_size=len(record.inbox),
        status_detail=status_line(record, occupancy),
        actions=list(record.actions),
        redrives=list(record.redrives),
        reruns=list(record.reruns),
        version_warning=version_warning(record),
        trace_id=RunTrace.of(record.id, record.trace_parent).trace_id_hex,
        usage=record.usage,
        cost=cost_of(record.usage, prices) if record.usage is not None else None,
    )
    if entries is not None:
        view._timeline = entries
    else:
        view._build_timeline = partial(timeline, record)
    return view


def journal_events(
    record: RunRecord, entries: list[TimelineEntry] | None = None
) -> list[JournalEvent]:
    """Every event the record implies so far, in time order (the run's status last).

    A step or wait event's ``data`` holds its ``kind``, ``name``, ``tokenId``, ``error`` and
    (when ``entries`` were built with values) ``value``/``valueSize``/``valueTruncated``; an
    action event's holds its ``kind``, ``by``, ``reason`` and ``detail``. The attempts a
    redrive took out of the journal are left out: they were events when they happened, and
    the step's new attempts reuse their numbers.
    """
    events: list[JournalEvent] = []
    for entry in timeline(record) if entries is None else entries:
        if entry.redrive is not None:
            continue
        at = entry.ended_at if entry.ended_at is not None else entry.started_at
        data: dict[str, Any] = {}
        if entry.kind:
            data["kind"] = entry.kind
        if entry.name is not None:
            data["name"] = entry.name
        if entry.token_id is not None:
            data["tokenId"] = entry.token_id
        if entry.error is not None:
            data["error"] = entry.error.to_wire()
        if entry.value_size is not None:
            data["value"] = entry.value
            data["valueSize"] = entry.value_size
            data["valueTruncated"] = entry.value_truncated
        if entry.type == "action":
            data.update({"by": entry.by, "reason": entry.reason, "detail": entry.detail or {}})
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
