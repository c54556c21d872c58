"""Request and response bodies of the HTTP API (camelCase JSON, pydantic v2).

Request models are strict (no string-to-number coercion) and refuse unknown fields, so a typo
answers 400 naming the field instead of being ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)
from pydantic.json_schema import SkipJsonSchema

from relayflow.api.action_models import PauseView, RedriveView, RerunOriginView, RunActionView
from relayflow.api.flow_options import DebounceBody, PositiveWireDuration, WireDuration
from relayflow.api.model_bases import (
    CompactModel,
    JsonInt,
    RequestModel,
    ResponseModel,
    no_default,
)
from relayflow.api.version_models import (
    VERSIONING_DESCRIPTION,
    CodeVersionView,
    Versioning,
    VersionWaitView,
)
from relayflow.costs import RunCost, RunUsage
from relayflow.flow.declarations import (
    MAX_KEY_LENGTH,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Debounce,
    TriggerOptions,
)
from relayflow.protocol import CheckpointEntry, ErrorEnvelope
from relayflow.version_locks import MAX_VERSION_LENGTH

Environment = Literal["production", "preview", "development"]
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
STATUS_DETAIL = (
    "why flow control keeps the run from running: 'queued (concurrency key acme: 5 of 5 in "
    "use)', 'delayed until <ISO time>', 'rate limited until <ISO time>'"
)
#: API Gateway answers 504 after 30 s; a caller may wait at most this long for a run to settle.
MAX_WAIT_MS = 25_000


# ---------------------------------------------------------------------------------------------
# Errors


class FieldProblem(ResponseModel):
    """One offending field of a refused request."""

    location: str = Field(description="body, query or path")
    field: str = Field(description="dotted path of the field ('' for the whole body)")
    problem: str


class ErrorResponse(ErrorEnvelope):
    """The body of every refused request: ``{"error": code, "message": ...}``."""

    request_id: str | None = Field(default=None, description="the request id, for support")


# ---------------------------------------------------------------------------------------------
# Runs


class TriggerRunRequest(RequestModel):
    """``POST /api/runs``: start a run (or get the one an idempotency key already started)."""

    workflow_id: str = Field(min_length=1, max_length=256)
    input: Any = None
    run_id: str | None = Field(default=None, min_length=1, max_length=512)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=512)
    tags: list[str] = Field(default_factory=list, max_length=64)
    environment: Environment = "development"
    wait_ms: JsonInt = Field(
        default=0,
        ge=0,
        description=f"wait up to this long for a waiting or final status (max {MAX_WAIT_MS})",
    )
    delay: WireDuration | None = Field(
        default=None, description="start the run this long after the trigger (status delayed)"
    )
    debounce: DebounceBody | None = None
    ttl: PositiveWireDuration | None = Field(
        default=None, description="a run not started within this long ends with TTL_EXPIRED"
    )
    priority: JsonInt = Field(
        default=0,
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
        description="queued runs with a higher priority start first",
    )
    concurrency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        description="replaces the key the workflow's concurrency declaration computes",
    )
    lock_to_version: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_VERSION_LENGTH,
        description="the run's workflowVersion (default v1); with a manifest registered for "
        "the environment it must be the version the manifest lists for the workflow, else "
        "409 version_not_found and no run is created",
    )

    def flow_options(self) -> TriggerOptions:
        """The trigger's flow-control options."""
        debounce = self.debounce
        return TriggerOptions(
            delay=self.delay,
            debounce=None
            if debounce is None
            else Debounce(
                key=debounce.key,
                delay=debounce.delay,
                mode=debounce.mode,
                max_wait=debounce.max_wait,
            ),
            ttl=self.ttl,
            priority=self.priority,
            concurrency_key=self.concurrency_key,
        )


class CancelRunRequest(RequestModel):
    """``POST /api/runs/{id}/cancel``; an empty body cancels without compensation."""

    reason: str | None = Field(default=None, max_length=1024)
    compensate: bool = False


class SendEventRequest(RequestModel):
    """``POST /api/runs/{id}/events``: deliver an event to one run."""

    event_type: str = Field(min_length=1, max_length=256)
    payload: Any = None
    event_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="delivery id: a repeat is answered with the first delivery's answer",
    )


class SendSignalRequest(RequestModel):
    """``POST /api/runs/{id}/signals``: deliver a signal to one run."""

    name: str = Field(min_length=1, max_length=256)
    payload: Any = None
    signal_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="delivery id: a repeat is answered with the first delivery's answer",
    )


class CompleteTokenRequest(RequestModel):
    """``POST /api/runs/{id}/tokens/{tokenId}``: complete a token with a payload."""

    payload: Any = None


class TokenErrorBody(RequestModel):
    """The error a token is failed with."""

    code: str | None = Field(default=None, min_length=1, max_length=256)
    message: str = Field(max_length=4096)


class FailTokenRequest(RequestModel):
    """``POST /api/runs/{id}/tokens/{tokenId}/fail``: fail a token."""

    error: TokenErrorBody


class RunErrorView(ResponseModel):
    """A run's or step's error as it is kept on the record."""

    model_config = ConfigDict(extra="allow")

    category: str = "USER_ERROR"
    code: str = "UNKNOWN"
    message: str = ""
    name: str | None = Field(
        default=None, description="the type of the exception raised (e.g. KeyError)"
    )
    stack: str | None = Field(
        default=None,
        description="the traceback's frames of the workflow's own code (no library or "
        "relayflow frames, no locals), at most 50 frames and 8 KiB, cut in the middle",
    )
    data: Any = None


class PendingWaitpointView(ResponseModel):
    """A wait the run is parked on."""

    id: str
    kind: str | None = Field(default=None, description="DATETIME, EVENT, SIGNAL, MANUAL or RUN")
    registered_at: int | None = Field(default=None, description="epoch milliseconds")
    event_type: str | None = None
    signal_name: str | None = None
    token_id: str | None = None


class CompensationSkippedView(ResponseModel):
    """Why a cancel that asked for compensation ran none."""

    code: str = Field(description="host_cannot_compensate or host_did_not_compensate")
    message: str
    host_status: str = Field(description="what the step host answered the cancel request with")


class UnavailableValueView(ResponseModel):
    """A value of a run that its payload store no longer gives: left out (null) of the answer."""

    path: str = Field(
        description="JSON Pointer into the run: /input, /output, /error, "
        "/journal/stepResults/<key>, ..."
    )
    reason: str = Field(description="payload_not_found or payload_corrupt")
    ref: str | None = Field(default=None, description="the payload reference (sha256:<hex>)")


class RunNoticeView(ResponseModel):
    """How a run started by this request goes on after its first drive was interrupted."""

    code: str = Field(
        description="drive_interrupted: the run is stored, but a backing service failed "
        "while it was driven (arming its alarm, saving a step); the sweeper drives it again "
        "when it is due"
    )
    message: str


class RunView(ResponseModel):
    """A run as the API shows it."""

    id: str
    workflow_id: str
    workflow_version: str | None = None
    status: RunStatus
    status_detail: str | None = Field(default=None, description=STATUS_DETAIL)
    environment: str
    input: Any = None
    output: Any = None
    error: RunErrorView | None = None
    pending_waitpoints: list[PendingWaitpointView] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = None
    parent_run_id: str | None = None
    children: list[str] = Field(default_factory=list)
    triggered_by: dict[str, Any] | None = None
    compensations: list[dict[str, Any]] = Field(default_factory=list)
    compensation_skipped: CompensationSkippedView | None = Field(
        default=None,
        description="set when a cancel asked for compensation and none ran, with the reason",
    )
    started_at: int = Field(description="epoch milliseconds")
    completed_at: int | None = Field(default=None, description="epoch milliseconds")
    duration_ms: int | None = None
    durability: Literal["per_step", "per_invocation"] | None = Field(
        default=None,
        description=(
            "per_step: every step was checkpointed before the body went on; per_invocation: "
            "some invocation's steps became durable only with its answer (a crash re-runs "
            "them); absent before the first answer"
        ),
    )
    values_unavailable: list[UnavailableValueView] = Field(
        default_factory=list,
        description="values the payload store no longer gives: each is null in this answer",
    )
    notice: RunNoticeView | None = Field(
        default=None,
        description="POST /api/runs only: the run is stored but its first drive was "
        "interrupted; do not start it again",
    )
    actions: list[RunActionView] = Field(
        default_factory=list, description="the operator actions applied to the run, oldest first"
    )
    pause: PauseView | None = Field(default=None, description="set while the run is paused")
    redrive_count: int = Field(default=0, description="how often the run was redriven")
    redrives: list[RedriveView] = Field(
        default_factory=list, description="the run's redrives, oldest first (history)"
    )
    rerun_of: RerunOriginView | None = Field(
        default=None, description="the run this one reruns from a step"
    )
    reruns: list[str] = Field(
        default_factory=list, description="the ids of the runs that rerun this one, oldest first"
    )
    code_version: CodeVersionView | None = Field(
        default=None, description="the code the run is on (absent before the first answer)"
    )
    versioning: Versioning | None = Field(default=None, description=VERSIONING_DESCRIPTION)
    version_wait: VersionWaitView | None = Field(
        default=None,
        description="set while a pinned run waits for its code version to answer again "
        "(POST /api/runs/{id}/upgrade moves it to the current version)",
    )
    trace_id: str | None = Field(
        default=None,
        description="the run's OpenTelemetry trace id (32 hex digits), the same across all "
        "of its invocations",
    )
    trace_url: str | None = Field(
        default=None,
        description="the run's trace in the trace viewer RELAYFLOW_TRACE_VIEWER_URL names "
        "(absent when it is unset)",
    )
    usage: RunUsage | None = Field(
        default=None,
        description="the AWS work recorded for the run, in billing units (all but its last "
        "save's; absent before any was recorded)",
    )
    cost: RunCost | None = Field(
        default=None,
        description="what the recorded usage costs in dollars at the deployment's price "
        "table: total and parts by service",
    )


class DeliveryView(ResponseModel):
    """What became of an event, signal or token outcome sent to a run."""

    status: str = Field(description="resolved, buffered, duplicate or heartbeat")
    waitpoint_id: str | None = None


class CheckpointStoredView(ResponseModel):
    """``POST /api/runs/{id}/checkpoints``: the entry is in its slot (now or from before)."""

    run_id: str
    seq: int


class InjectionView(RunView):
    """The run after a delivery, and what became of the delivery."""

    delivery: DeliveryView


class RunSummaryView(ResponseModel):
    """A run in a listing."""

    id: str
    workflow_id: str
    status: RunStatus
    environment: str
    tags: list[str] = Field(default_factory=list)
    started_at: int
    completed_at: int | None = None
    values_unavailable: list[UnavailableValueView] = Field(
        default_factory=list,
        description="values of the run the payload store no longer gives (see getRun)",
    )
    pause: PauseView | None = Field(default=None, description="set while the run is paused")
    redrive_count: int = 0
    parent_run_id: str | None = Field(
        default=None, description="the run that started this one (ctx.invoke); absent at top level"
    )
    rerun_of: RerunOriginView | None = None
    code_version: CodeVersionView | None = Field(
        default=None, description="the code the run is on (absent before the first answer)"
    )
    versioning: Versioning | None = Field(default=None, description=VERSIONING_DESCRIPTION)
    version_wait: VersionWaitView | None = Field(
        default=None, description="set while a pinned run waits for its code version"
    )


class RunListView(ResponseModel):
    """``GET /api/runs``: one page, newest first; pass ``nextCursor`` back for the next page."""

    runs: list[RunSummaryView]
    next_cursor: str | None = None


class TimelineEntryView(ResponseModel):
    """One step attempt, one wait or one operator action of a run."""

    type: Literal["step", "wait", "action"]
    id: str
    attempt: int | None = None
    kind: str | None = Field(
        default=None,
        description="the wait kind (DATETIME, EVENT, SIGNAL, MANUAL, RUN) of a wait; the "
        "journal kind of a step entry other than a plain step (token, condition, group, "
        "branch, batch, ...); the action (pause, resume, cancel, redrive, rerun, upgrade) "
        "of an action",
    )
    started_at: int
    ended_at: int | None = None
    outcome: str = Field(
        description="ok, err, started or retrying (steps); pending, resolved, timed_out, "
        "error or cancelled (waits); applied (actions)"
    )
    source: str | None = None
    error: RunErrorView | None = None
    name: str | None = Field(
        default=None,
        description="the name the workflow gave the operation: a token's, callback's, "
        "condition's, group's or wait's name, a parallel branch's or map item's name",
    )
    token_id: str | None = Field(
        default=None, description="tokens: the id that completes, fails or heartbeats it"
    )
    value: Any = Field(
        default=None,
        description="with values=true: the checkpointed value (step or group result, wait "
        "payload, batch result, error data); left out when valueTruncated",
    )
    value_size: int | None = Field(
        default=None, description="with values=true: bytes of the value's JSON"
    )
    input: Any = Field(
        default=None,
        description="with values=true: a failed step attempt's arguments (JSON, or their repr; "
        "cut at 4,096 characters); attempts that succeeded keep none",
    )
    value_truncated: bool | None = Field(
        default=None,
        description="with values=true: the value is over the per-entry cap and left out",
    )
    value_unavailable: str | None = Field(
        default=None,
        description="with values=true: the payload store no longer gives the value, left out "
        "(payload_not_found or payload_corrupt)",
    )
    abandoned_ended_at: int | None = Field(
        default=None,
        description="a step attempt that timed out but whose code ran on: when that code "
        "really returned or raised (epoch ms), once a later checkpoint of the run recorded it",
    )
    abandoned_outcome: Literal["returned", "raised"] | None = Field(
        default=None, description="how the timed-out code ended: returned or raised"
    )
    top_level: bool | None = Field(
        default=None,
        description="steps: a step of the body itself (not inside a group, branch or map "
        "item); a rerun can start from it",
    )
    redrive: int | None = Field(
        default=None,
        description="steps: the redrive (1 for the first) that took this failed attempt out "
        "of the journal; the step's attempts since start again from 1",
    )
    by: str | None = Field(default=None, description="actions: who asked")
    reason: str | None = Field(default=None, description="actions: why")
    detail: dict[str, Any] | None = Field(
        default=None, description="actions: what the action chose or made (fromStep, rerunId...)"
    )


class TimelineView(ResponseModel):
    """``GET /api/runs/{id}/timeline``: one page of entries, in start order."""

    run_id: str
    status: RunStatus
    status_detail: str | None = Field(default=None, description=STATUS_DETAIL)
    entries: list[TimelineEntryView]
    next_cursor: str | None = Field(
        default=None, description="pass back as cursor for the next page; absent at the end"
    )
    values_unavailable: list[UnavailableValueView] = Field(
        default_factory=list,
        description="journal entries the payload store no longer gives: absent from the pages",
    )


# ---------------------------------------------------------------------------------------------
# Events and manifests


class EventEnvelopeBody(RequestModel):
    """The event itself (documentation model; validation follows the reference order).

    Unknown fields are ignored, as the reference ignores them; ``emittedAt`` is not parsed.
    """

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    data: Any = None
    #: The reference accepts any JSON object here, arrays included (reference §7.2); when
    #: present it must not be null.
    metadata: dict[str, Any] | list[Any] | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra=no_default
    )
    emitted_at: str = Field(min_length=1)


class IngestEventRequest(RequestModel):
    """``POST /api/events``: route an event through the environment's manifest."""

    model_config = ConfigDict(extra="allow")

    environment: Environment
    envelope: EventEnvelopeBody
    #: When present, a string (null is refused, as by the reference).
    idempotency_key: str | SkipJsonSchema[None] = Field(default=None, json_schema_extra=no_default)


class IngestMatchView(CompactModel):
    """What happened for one routed filter."""

    model_config = ConfigDict(extra="allow")

    filter_id: str
    status: Literal["queued", "skipped", "error"]
    target_workflow_id: str | None = None
    run_id: str | None = None
    idempotency_key: str | None = None
    reason: str | None = None
    details: Any = None


class IngestResultView(CompactModel):
    """The outcome of an ingest: ``ok`` with the matches, or ``ok: false`` with a reason."""

    ok: bool
    event_id: str | None = None
    matches: list[IngestMatchView] = Field(default_factory=list)
    reason: str | None = None
    message: str | None = None


class RegisterManifestRequest(RequestModel):
    """``POST /api/manifests`` (documentation model; the events module validates)."""

    environment: Environment
    manifest: dict[str, Any]


class ManifestRegisteredView(ResponseModel):
    """``POST /api/manifests`` answer."""

    ok: Literal[True] = True
    version_id: str


class ManifestView(ResponseModel):
    """``GET /api/manifests/{env}``."""

    environment: str
    version_id: str
    manifest: dict[str, Any]


class HealthView(ResponseModel):
    """``GET /api/healthz``."""

    ok: Literal[True] = True
    version: str


#: Where OpenAPI components live; bodies validated outside pydantic point there.
COMPONENT_REF = "#/components/schemas/"
#: Request bodies validated outside the resolver (by the events module, or after the checkpoint
#: route's capability check); the OpenAPI document lists them as components.
DOCUMENTED_BODIES: tuple[type[BaseModel], ...] = (
    IngestEventRequest,
    RegisterManifestRequest,
    CheckpointEntry,
)


def documented_body(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a body validated elsewhere: a reference to its component."""
    return {"$ref": COMPONENT_REF + model.__name__}
