"""The run record: everything the orchestrator keeps about one run, stored as one document.

The fields of the reference runtime's run record (docs/reference/reference-runtime.md), plus
what serialized, conditional updates need (version, lease, inbox, wake time, applied
metadata ids, compensation reports, timeout deadline, operations count, children).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator
from pydantic.alias_generators import to_camel

from relayflow.costs.usage import RunUsage
from relayflow.protocol import (
    CancelDirective,
    CodeVersion,
    CompensationReport,
    Durability,
    Journal,
    RunTrigger,
    SerializedError,
    StepJournalEntry,
    StreamChunk,
    TenantMeta,
    Versioning,
    Waitpoint,
)

RunStatus = Literal[
    "delayed",
    "queued",
    "paused",
    "running",
    "waiting",
    "completed",
    "failed",
    "cancelled",
    "compensated",
    "compensation_failed",
]
TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "cancelled", "compensated", "compensation_failed"}
)
#: The statuses of a run that has not started yet (flow control holds it back).
NOT_STARTED: frozenset[str] = frozenset({"delayed", "queued"})
InjectionKind = Literal["EVENT", "SIGNAL", "MANUAL"]


class RecordModel(BaseModel):
    """Base of the stored models: camelCase when serialised, unknown fields kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def to_document(self) -> dict[str, Any]:
        """The JSON-ready stored form (camelCase keys)."""
        return self.model_dump(mode="json", by_alias=True)


class Lease(RecordModel):
    """Who is driving the run, until when (epoch ms)."""

    owner: str
    expires_at: int


class ParentLink(RecordModel):
    """The parent run and the RUN wait this child resolves when it ends."""

    run_id: str
    waitpoint_id: str


class ChildLink(RecordModel):
    """A child started by ``ctx.invoke``; detached children are never cascaded."""

    run_id: str
    waitpoint_id: str
    detached: bool = False


class InboxItem(RecordModel):
    """An injection that no pending wait matched yet (consumed by the first later match).

    ``kind``/``key`` say what it can resolve: EVENT + event type, SIGNAL + signal name,
    MANUAL + token id. ``outcome`` distinguishes token completion, failure and heartbeat.
    """

    id: str
    kind: InjectionKind
    key: str
    payload: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    received_at: int
    outcome: Literal["deliver", "complete", "fail", "heartbeat"] = "deliver"
    error: SerializedError | None = None


class DispatchRetry(RecordModel):
    """Transient dispatch failures so far and when the next attempt is due."""

    failures: int = 0
    next_attempt_at: int | None = None
    last_error: str | None = None


class VersionWait(RecordModel):
    """Why and since when a run waits for the code version it is pinned to.

    The host that answered is another build and the workflow keeps its runs on the code they
    started with (``versioning="pinned"``): the run tries again on its alarm, each time later
    (at most ``version_retry_max_ms`` apart), until that code answers or an operator moves
    the run to the current version.
    """

    since: int
    reason: str
    attempts: int = 1


class CompensationSkipped(RecordModel):
    """Why a cancel that asked for compensation ran none.

    ``code`` is ``host_cannot_compensate`` (the step host does not advertise the ``cancel``
    capability: a reference host replays the body and parks again) or
    ``host_did_not_compensate`` (the host advertises it but answered without cancelling).
    """

    code: str
    message: str
    #: The status the host answered the cancel request with (``waiting``, ``completed``, ...).
    host_status: str


ActionKind = Literal["pause", "resume", "cancel", "redrive", "rerun", "upgrade"]
#: What a paused run becomes when resumed: its status before the pause, or ``start`` for a
#: run inserted paused (its workflow was paused) that has not started yet.
ResumeTo = Literal["running", "waiting", "start"]


class RunAction(RecordModel):
    """One operator action applied to a run, as its timeline and the audit log show it.

    ``id`` is the request's ``Idempotency-Key`` or the bulk job's run id: an action whose id
    the run already holds is not applied again.
    """

    id: str
    kind: ActionKind
    #: Who asked: the API token's name (the CLI and the dashboard send one), or
    #: ``bulk:<job run id>``.
    by: str
    at: int
    reason: str | None = None
    #: What the action chose or made (``fromStep``, ``rerunId``, ``retry``...).
    detail: dict[str, Any] = Field(default_factory=dict)


class PauseState(RecordModel):
    """Since when and why a run is paused, and what it resumes to."""

    at: int
    by: str
    resume_to: ResumeTo
    reason: str | None = None
    #: A run paused before it started: its start time (None: at once).
    start_at: int | None = None


class Redrive(RecordModel):
    """One redrive: what it took out of the journal so that it runs again."""

    at: int
    action_id: str
    #: The run's error before the redrive.
    error: SerializedError | None = None
    #: The failed journal entries it removed, by key (their attempts, for the history).
    steps: dict[str, StepJournalEntry] = Field(default_factory=dict)
    #: The failed compensation reports it removed, by compensated step key.
    compensations: dict[str, Any] = Field(default_factory=dict)


class RerunOrigin(RecordModel):
    """The run a rerun copied its journal from, and the top-level step it reran from."""

    run_id: str
    from_step: str


class RunRecord(RecordModel):
    """One run. Saved only with a condition on ``version``; terminal runs never change.

    ``wake_at`` is the earliest time the run needs attention (wake, retry, wait deadline,
    heartbeat deadline, workflow timeout, dispatch retry, child check; ``now`` while running)
    and is what the alarm is armed at and what the sweeper queries. ``reconcile_at`` is when
    the pending waits on attached children are next checked (see ``core.waits``).
    """

    id: str
    workflow_id: str
    workflow_version: str = "v1"
    status: RunStatus = "running"
    input: Any = None
    output: Any = None
    error: SerializedError | None = None
    journal: Journal = Field(default_factory=Journal)
    invocation_count: int = 0
    operations_count: int = 0
    compute_time_ms: int = 0
    timeout_ms: int | None = None
    timeout_deadline: int | None = None
    parent: ParentLink | None = None
    children: list[ChildLink] = Field(default_factory=list)
    pending_waitpoints: list[Waitpoint] = Field(default_factory=list)
    streams: dict[str, list[StreamChunk]] = Field(default_factory=dict)
    started_at: int
    completed_at: int | None = None
    triggered_by: RunTrigger = Field(default_factory=RunTrigger)
    tags: list[str] = Field(default_factory=list)
    environment: str = "development"
    tenant_meta: TenantMeta = Field(default_factory=TenantMeta)
    run_number: int = 1
    idempotency_key: str | None = None
    #: The concurrency key the run counts against (``""``: its workflow's one limit); None
    #: for a run of a workflow without ``concurrency``. A ``queued`` run waits for a slot.
    concurrency_key: str | None = None
    #: Queued runs with a higher priority take a free slot first (the trigger's ``priority``).
    priority: int = 0
    #: A ``delayed`` or ``queued`` run not started by then ends ``cancelled`` with
    #: ``TTL_EXPIRED`` (the trigger's ``ttl``); None once started or without a ttl.
    start_deadline: int | None = None
    #: The debounce key of a run that a burst of triggers folds into (None: not debounced).
    debounce_key: str | None = None
    # Beyond the reference runtime's record: what conditional, serialized updates need.
    version: int = 0
    lease: Lease | None = None
    dirty: bool = False
    #: A delivery marked the stored run dirty while it was held (see
    #: ``RunStore.mark_dirty``): set by the store when it reads the mark, never stored in
    #: the document. A save of a record read before the mark fails as stale; a record that
    #: carries it clears the mark.
    delivery_mark: bool = Field(default=False, exclude=True)
    inbox: list[InboxItem] = Field(default_factory=list)
    seen_injection_ids: list[str] = Field(default_factory=list)
    wake_at: int | None = None
    reconcile_at: int | None = None
    #: Whether an alarm may be armed for the run: only then does ending it disarm one (a run
    #: that never waited costs no Scheduler call).
    alarm_armed: bool = False
    #: The wake time the alarm was last armed for: a disarm names it, so that it can never
    #: remove an alarm armed since for another wake time.
    alarm_at: int | None = None
    applied_metadata_ids: list[str] = Field(default_factory=list)
    positional_metadata_applied: int = 0
    compensations: list[CompensationReport] = Field(default_factory=list)
    cancel_request: CancelDirective | None = None
    dispatch_retry: DispatchRetry = Field(default_factory=DispatchRetry)
    #: Set when a cancel asked for compensation and none ran: why not.
    compensation_skipped: CompensationSkipped | None = None
    #: The last slot of the run's checkpoint log reflected in this record (0: none).
    checkpoint_seq: int = 0
    #: An invocation was sent with the checkpoint channel and its answer is not applied yet:
    #: its host may still be writing, so the next invocation is fenced first.
    checkpoint_open: bool = False
    #: The durability the run had: ``per_step`` while every answer said so,
    #: ``per_invocation`` from the first answer that did not (None before any answer).
    durability: Durability | None = None
    # Operations (see core.actions and docs/guides/operating-runs.md).
    #: The actions applied to the run (pause, resume, cancel, redrive, rerun, upgrade), oldest
    #: first.
    actions: list[RunAction] = Field(default_factory=list)
    #: Set while the run is ``paused``.
    pause: PauseState | None = None
    #: The redrives of the run, oldest first (``redrive_count`` is their number).
    redrives: list[Redrive] = Field(default_factory=list)
    #: The step retry policies a redrive replaced, by journal key (wire form of the SDK's).
    retry_overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: The run this one reruns from a step, and the step.
    rerun_of: RerunOrigin | None = None
    #: The runs that rerun this one from a step, oldest first.
    reruns: list[str] = Field(default_factory=list)
    # Versions (see core.versions and docs/guides/versioning.md).
    #: The code the run is on: the first answer's for a ``pinned`` workflow, the latest for
    #: an ``upgrade`` one (None before any answer that said).
    code_version: CodeVersion | None = None
    #: How the run's workflow meets new code, as its host last said.
    versioning: Versioning | None = None
    #: Set while the code version the run is pinned to cannot be reached.
    version_wait: VersionWait | None = None
    #: The AWS work done for the run so far (see relayflow.costs; None before any counted).
    #: Stored packed (a list of counts), as it rides in the header item on every save.
    usage: RunUsage | None = None
    #: The W3C ``traceparent`` of the caller whose trace the run continues (its trigger
    #: request's); None: the run's trace is its own (see relayflow.tracing.ids).
    trace_parent: str | None = None

    @field_serializer("usage", when_used="json")
    def _pack_usage(self, usage: RunUsage | None) -> list[int | float] | None:
        return None if usage is None else usage.packed()

    @field_validator("usage", mode="before")
    @classmethod
    def _unpack_usage(cls, value: Any) -> Any:
        return RunUsage.unpacked(value) if isinstance(value, list) else value

    @property
    def redrive_count(self) -> int:
        """How often the run was redriven."""
        return len(self.redrives)

    @property
    def is_terminal(self) -> bool:
        """True once the run reached a final status."""
        return self.status in TERMINAL_STATUSES

    @property
    def metadata(self) -> dict[str, Any]:
        """The run metadata as applied so far (kept in the journal, as the reference does)."""
        return self.journal.metadata_state

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> RunRecord:
        """Rebuild a record from its stored form."""
        return cls.model_validate(doc)


def is_child_of(record: RunRecord, run_id: str) -> bool:
    """Whether ``record`` is a run that ``run_id`` started with ``ctx.invoke``."""
    return record.parent is not None and record.parent.run_id == run_id
