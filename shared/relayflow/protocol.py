"""Wire models of the step protocol (reference protocol v1), camelCase on the wire.

The orchestrator sends a :class:`StepRequest` to a step host; the host replays the workflow body
against the request's :class:`Journal` and answers with one :data:`StepResponse` variant.
Unknown fields are kept (``extra="allow"``) so journals written by newer hosts survive a round
trip through older ones.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator
from pydantic.alias_generators import to_camel

from relayflow.costs.usage import RunUsage

PROTOCOL_VERSION = 1
#: The reference's "no deadline" value (JavaScript's Number.MAX_SAFE_INTEGER).
NO_DEADLINE = 9007199254740991
#: relayflow's step hosts answer a copy of a signed request they already accepted with 409
#: and this error code; nothing of the copy ran, so the orchestrator may send the
#: invocation again.
REQUEST_REPLAYED = "request_replayed"
#: The code a run fails with when it must be durable per step and its host cannot be.
DURABILITY_UNAVAILABLE = "durability_unavailable"
#: A step host answers 409 with this code when the run is pinned to a code version it is not
#: (see :class:`CodeVersion`): the run waits for that version and tries again on an alarm.
VERSION_UNAVAILABLE = "version_unavailable"

Environment = Literal["production", "preview", "development"]
ENVIRONMENTS: tuple[str, ...] = ("production", "preview", "development")
ErrorCategory = Literal["USER_ERROR", "RUNTIME_ERROR"]
WaitpointKind = Literal["DATETIME", "EVENT", "SIGNAL", "MANUAL", "RUN"]


#: The deepest nesting of a JSON value relayflow stores (inputs, outputs, payloads). Deeper
#: values are refused up front: stored records wrap them in a few more levels, and
#: serialisers give up past about 255.
MAX_JSON_DEPTH = 128


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def strict_json_loads(text: str | bytes) -> Any:
    """Parse JSON as RFC 8259 defines it: no NaN or Infinity (``ValueError`` otherwise)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    def finite(literal: str) -> float:
        number = float(literal)
        if math.isinf(number):
            raise ValueError(f"{literal} is out of the range of a double")
        return number

    return json.loads(text, parse_constant=refuse, parse_float=finite)


class WireModel(BaseModel):
    """Base of every wire model: camelCase aliases, population by name, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", ser_json_inf_nan="null"
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict with camelCase keys and unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


#: The most UTF-8 bytes an error's ``stack`` keeps, whoever wrote it (a host of another SDK
#: included): a journal entry keeps one per failed attempt.
MAX_STACK_BYTES = 8 * 1024
#: Bytes of a cut text kept before the cut (the rest of the limit goes to its end).
_CUT_HEAD_BYTES = 2 * 1024


def cut_middle(text: str, limit: int = MAX_STACK_BYTES) -> str:
    """``text`` when its UTF-8 fits in ``limit`` bytes, else its start and end around a line
    saying how many bytes it had (the whole within ``limit``)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head = min(_CUT_HEAD_BYTES, limit // 4)
    marker = f"\n... middle omitted: the traceback had {len(data)} bytes ...\n"
    tail = max(0, limit - head - len(marker.encode("utf-8")))
    start = data[:head].decode("utf-8", errors="ignore")
    end = data[len(data) - tail :].decode("utf-8", errors="ignore") if tail else ""
    return start + marker + end


class SerializedError(WireModel):
    """An error as it crosses the wire and as the run record keeps it.

    ``name`` is the type of the exception, ``stack`` its traceback (at most
    ``MAX_STACK_BYTES``; a longer one is cut in the middle when it is read).
    """

    category: ErrorCategory = "USER_ERROR"
    code: str = "UNKNOWN"
    message: str = ""
    name: str | None = None
    stack: str | None = None
    cause: SerializedError | None = None
    data: Any = None

    @field_validator("stack")
    @classmethod
    def _bounded_stack(cls, stack: str | None) -> str | None:
        return None if stack is None else cut_middle(stack)


#: How the code of a timed-out attempt ended when it finally did.
AbandonedOutcome = Literal["returned", "raised"]


class StepAttempt(WireModel):
    """One attempt of a step: every attempt is journalled with its outcome."""

    attempt: int
    status: Literal["ok", "err", "started"]
    started_at: int
    finished_at: int | None = None
    error: SerializedError | None = None
    #: The invocation that journalled an ``at_most_once`` attempt as started; the attempt runs
    #: in the invocation right after it, and any later invocation finds it interrupted.
    invocation: int | None = None
    #: The started mark was made durable by a per-step checkpoint and the attempt ran in the
    #: same invocation: any later invocation finds it interrupted.
    logged: bool | None = None
    #: A timed-out attempt whose code ran on: when it really returned or raised (journalled
    #: later, with the next checkpoint or answer; the attempt's outcome stays ``err``).
    abandoned_ended_at: int | None = None
    abandoned_outcome: AbandonedOutcome | None = None
    #: A failed attempt's arguments (JSON, or their ``repr`` when not JSON; cut at
    #: ``MAX_INPUT_CHARS``), for whoever looks into the failure. Attempts that succeed do not
    #: store theirs, so a step that works costs nothing more.
    input: Any = None


#: Characters of a failed attempt's arguments kept in its ``input`` (the rest is cut).
MAX_INPUT_CHARS = 4096


class StepJournalEntry(WireModel):
    """The journalled state of one step id.

    ``status`` is ``ok``/``err`` once the step is final, ``started`` while an ``at_most_once``
    attempt is in flight, and ``retrying`` while a failed attempt waits for its next one.
    """

    status: Literal["ok", "err", "started", "retrying"]
    output: Any = None
    error: SerializedError | None = None
    attempt: int = 1
    started_at: int = 0
    finished_at: int | None = None
    runtime: str = "edge"
    kind: str = "step"
    next_attempt_at: int | None = None
    attempts: list[StepAttempt] = Field(default_factory=list)
    # The two below are tuples: almost always empty, and the empty tuple is one shared object,
    # where empty lists would add two objects per step for the garbage collector to walk.
    #: Metadata updates made inside the step body, re-emitted (same ids) on every replay.
    metadata_updates: tuple[MetadataUpdate, ...] = ()
    #: Journal keys of the compensable steps a group or branch registered before it finished.
    compensables: tuple[str, ...] = ()
    #: The name the author gave the operation (token, condition, group, branch or map item),
    #: shown in the run's history.
    name: str | None = None
    #: Starts of the next attempt refused so far because the code of an attempt given up at
    #: its timeout still ran in the step host (a relayflow extension; refusals are no attempts).
    refused_starts: int | None = None
    #: relayflow extension: the entry's position among the operations of its scope (the
    #: body, a group, a parallel branch or a map item) in the order the body reached them,
    #: from 0; a branch's entry holds its parallel's or map's. Replays check each operation
    #: against it. Absent from reference journals and from entries written before it existed.
    ordinal: int | None = None
    #: relayflow extension: the ``ctx.patched()`` change ids the body met just before it
    #: reached this operation on code that has them (see docs/guides/versioning.md). None
    #: (left off the wire and out of storage) for the entries of bodies without patches.
    patches: tuple[str, ...] | None = None


class WaitpointResolution(WireModel):
    """How a wait was resolved: by an injection, an alarm, a child's end or a timeout."""

    kind: WaitpointKind
    resolved_at: int
    payload: Any = None
    source: Literal["live", "inbox", "replay", "timeout"] = "live"
    matched_event_id: str | None = None
    error: SerializedError | None = None
    timed_out: bool | None = None


class WaitpointRegistration(WireModel):
    """Orchestrator-owned facts about a wait, fixed when it is first registered."""

    kind: WaitpointKind
    registered_at: int
    wake_at: int | None = None
    deadline: int | None = None
    heartbeat_deadline: int | None = None
    #: The name the author gave the wait (``meta.name``), shown in the run's history.
    name: str | None = None


class StreamCompletion(WireModel):
    """A stream that finished: replays skip its source."""

    chunk_count: int
    #: Set when the stream's source raised: replays raise it again instead of re-reading.
    error: SerializedError | None = None


class Journal(WireModel):
    """Everything a replay needs: step results, resolved waits, streams and orchestrator state."""

    step_results: dict[str, StepJournalEntry] = Field(default_factory=dict)
    waitpoints_resolved: dict[str, WaitpointResolution] = Field(default_factory=dict)
    waitpoints_registered: dict[str, WaitpointRegistration] = Field(default_factory=dict)
    compensations_run: dict[str, Any] = Field(default_factory=dict)
    metadata_state: dict[str, Any] = Field(default_factory=dict)
    streams_completed: dict[str, StreamCompletion] = Field(default_factory=dict)


class TenantMeta(WireModel):
    """Who owns the run; ``tenant_script`` selects the dispatcher."""

    tenant_id: str = "default"
    project_id: str = "default"
    organization_id: str = "default"
    project_slug: str | None = None
    organization_slug: str | None = None
    tenant_script: str | None = None


class RunTrigger(WireModel):
    """What started a run: ``api``, ``schedule``, ``event`` or ``parent`` (extra keys kept)."""

    kind: Literal["api", "schedule", "event", "parent"] = "api"


class RunMeta(WireModel):
    """Facts about the run that the body may read through ``ctx.run``."""

    number: int = 1
    attempt: int = 1
    triggered_by: RunTrigger = Field(default_factory=RunTrigger)
    tags: list[str] = Field(default_factory=list)
    started_at: int = 0


class CancelDirective(WireModel):
    """Set on a request that asks the host to stop the body and, optionally, compensate."""

    reason: str | None = None
    compensate: bool = False


#: How an invocation's steps were made durable: ``per_step``, each in the run's checkpoint log
#: before the body went on, or ``per_invocation``, together with the host's answer (a crash
#: re-runs every step of the invocation it interrupts).
Durability = Literal["per_step", "per_invocation"]


class CheckpointChannel(WireModel):
    """relayflow's extension of a step request: the host may make each step durable itself.

    A host with a checkpoint log writes one entry per completed step attempt (and per
    metadata update and stream chunk) at ``seq``, ``seq + 1``... before the body goes on.
    Hosts that do not know the field ignore it and keep invocation-level durability.

    An HTTP dispatcher configured for it adds ``url``, the orchestrator route a host without
    a log of its own posts each entry to, and ``capability``, the signed permission to write
    entries of this run from ``seq`` on until the request's deadline.
    """

    seq: int = Field(ge=1)
    url: str | None = None
    capability: str | None = None
    #: Set when the orchestrator refuses per-invocation durability: a relayflow host that
    #: cannot checkpoint each step answers ``failed`` (``durability_unavailable``) at once.
    required: bool | None = None


CheckpointKind = Literal["step", "metadata", "chunk", "fence", "cancel", "pause", "claim", "group"]


class CheckpointEntry(WireModel):
    """One write-once entry of a run's checkpoint log, at ``(run, seq)``.

    ``step`` carries the whole journal entry of ``key`` as it stands after the attempt;
    ``fence`` (written by a new holder of the run), ``cancel`` and ``pause`` only take their
    slot, so the writer that expected it stops at its next checkpoint (a pause ends the
    invocation there, with everything it did in its answer); ``claim`` is a remote host's
    first entry of an invocation, so that a copy of the same request runs nothing; ``group``
    carries, in ``entries``, several step, metadata and chunk entries that became ready while
    the host's previous write was in flight, applied in order as if each had its own slot.
    """

    seq: int
    kind: CheckpointKind
    key: str | None = None
    step: StepJournalEntry | None = None
    metadata: MetadataUpdate | None = None
    chunk: StreamChunk | None = None
    reason: str | None = None
    compensate: bool = False
    entries: list[CheckpointEntry] | None = None


#: How a workflow's runs meet new code: ``pinned`` runs keep the code version that answered
#: their first invocation; ``upgrade`` runs move to the current code at their next invocation.
Versioning = Literal["pinned", "upgrade"]
VERSIONING_MODES: tuple[str, ...] = ("pinned", "upgrade")


class CodeVersion(WireModel):
    """The code a run's body ran on (a relayflow extension of requests and answers).

    ``build`` identifies the workflow code itself, the same in every process that loaded the
    same code; ``function`` is the qualified Lambda function that ran it (``name:7``), by
    which a dispatcher reaches that code again (``name:$LATEST`` when it was invoked
    unqualified, which pins nothing).
    """

    build: str = Field(min_length=1)
    function: str | None = None


class RetryOverride(WireModel):
    """A step retry policy set from outside the code (a redrive's ``retry``): it replaces the
    policy the body gives the step, for the steps of ``StepRequest.retry_overrides``."""

    max: int = Field(default=3, ge=1, le=1000, description="total attempts, the first included")
    backoff: Literal["fixed", "linear", "exponential"] = "exponential"
    initial_ms: int = Field(default=1_000, ge=0, le=86_400_000)
    max_delay_ms: int = Field(default=60_000, ge=0, le=86_400_000)
    backoff_rate: float = Field(default=2.0, ge=1.0, le=100.0)


class StepRequest(WireModel):
    """One invocation of a workflow body against its journal."""

    protocol_version: int = PROTOCOL_VERSION
    run_id: str
    workflow_id: str
    workflow_version: str = "v1"
    invocation_count: int = Field(ge=1)
    input: Any = None
    journal: Journal = Field(default_factory=Journal)
    environment: Environment = "development"
    deadline: int = NO_DEADLINE
    tenant_meta: TenantMeta = Field(default_factory=TenantMeta)
    run_meta: RunMeta = Field(default_factory=RunMeta)
    cancel: CancelDirective | None = None
    checkpoint: CheckpointChannel | None = None
    #: relayflow extension: retry policies that replace the body's for these journal keys
    #: (set by a redrive); reference hosts ignore it.
    retry_overrides: dict[str, RetryOverride] | None = None
    #: relayflow extension: the code version the run is pinned to. A dispatcher reaches it
    #: (a Lambda qualifier); a host on another build answers ``version_unavailable`` unless
    #: the workflow is declared ``versioning="upgrade"``. None: any code may answer.
    code_version: CodeVersion | None = None
    #: relayflow extension: the W3C ``traceparent`` of this invocation's span in the run's
    #: trace (see docs/guides/tracing.md); hosts make each step attempt's span current while
    #: its code runs.
    traceparent: str | None = None


class Waitpoint(WireModel):
    """A wait the body registered and could not resolve from its journal."""

    client_waitpoint_id: str
    kind: WaitpointKind
    meta: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int | None = None


class MetadataUpdate(WireModel):
    """A run-metadata mutation; ``id`` makes replays idempotent."""

    op: Literal["set", "increment", "append", "remove"]
    key: str
    value: Any = None
    id: str | None = None


#: How a stream chunk is encoded on the wire; bytes travel as standard base64 text.
StreamEncoding = Literal["text", "json", "base64"]
#: The name relayflow's earlier hosts wrote for base64 chunks; read as ``base64``.
LEGACY_BYTES_ENCODING = "bytes"


class StreamChunk(WireModel):
    """One chunk of a ``ctx.stream``; a final chunk with ``chunk=None`` closes it.

    Bytes chunks carry ``"encoding": "base64"`` as the reference runtime writes them; the
    ``"bytes"`` that earlier relayflow hosts wrote is accepted and normalised on read.
    """

    stream_id: str
    seq: int
    encoding: StreamEncoding = "json"
    chunk: Any = None
    final: bool = False
    at: int = 0

    @field_validator("encoding", mode="before")
    @classmethod
    def _normalise_legacy_bytes(cls, value: Any) -> Any:
        return "base64" if value == LEGACY_BYTES_ENCODING else value


class CompensationReport(WireModel):
    """The outcome of one compensation."""

    step_id: str
    status: Literal["ok", "err"]
    error: SerializedError | None = None
    duration_ms: int = 0


#: What relayflow's step hosts can do beyond the reference protocol, advertised in every
#: answer's ``capabilities``: ``cancel`` = the host honours the request's ``cancel`` directive
#: (stops the body and, with ``compensate``, runs the compensations and reports them).
#: Reference hosts send no ``capabilities``.
CAPABILITY_CANCEL = "cancel"
HOST_CAPABILITIES: tuple[str, ...] = (CAPABILITY_CANCEL,)


class _ResponseBase(WireModel):
    journal: Journal = Field(default_factory=Journal)
    metadata_updates: list[MetadataUpdate] = Field(default_factory=list)
    stream_chunks: list[StreamChunk] = Field(default_factory=list)
    #: A relayflow extension (see :data:`HOST_CAPABILITIES`); absent from reference answers.
    capabilities: list[str] | None = None
    #: relayflow extension: the last slot of the run's checkpoint log this invocation found
    #: taken (by its own entries or by a fence); absent when it wrote no checkpoint.
    checkpoint_seq: int | None = None
    #: relayflow extension: the AWS work the host's own checkpoint writes did for the run
    #: (a host in a process of its own; the orchestrator adds it to the run's usage).
    checkpoint_usage: RunUsage | None = None
    #: relayflow extension: how this invocation's steps were made durable. Reference hosts
    #: send none: they are durable per invocation.
    durability: Durability | None = None
    #: relayflow extension: the code that answered, and how its workflow meets new code.
    code_version: CodeVersion | None = None
    versioning: Versioning | None = None


class CompletedResponse(_ResponseBase):
    status: Literal["completed"] = "completed"
    output: Any = None


class FailedResponse(_ResponseBase):
    status: Literal["failed"] = "failed"
    error: SerializedError


class WaitingResponse(_ResponseBase):
    status: Literal["waiting"] = "waiting"
    waitpoints: list[Waitpoint]


class CancelledResponse(_ResponseBase):
    status: Literal["cancelled"] = "cancelled"
    compensations: list[CompensationReport] = Field(default_factory=list)


class CompensatedResponse(_ResponseBase):
    status: Literal["compensated"] = "compensated"
    error: SerializedError | None = None
    compensations: list[CompensationReport] = Field(default_factory=list)


class CompensationFailedResponse(_ResponseBase):
    status: Literal["compensation_failed"] = "compensation_failed"
    error: SerializedError | None = None
    compensations: list[CompensationReport] = Field(default_factory=list)


StepResponse = Annotated[
    CompletedResponse
    | FailedResponse
    | WaitingResponse
    | CancelledResponse
    | CompensatedResponse
    | CompensationFailedResponse,
    Field(discriminator="status"),
]
STEP_RESPONSE_ADAPTER: TypeAdapter[StepResponse] = TypeAdapter(StepResponse)


def parse_step_response(raw: Any) -> StepResponse:
    """Validate a step host's answer; raises ``pydantic.ValidationError`` when it is not one."""
    return STEP_RESPONSE_ADAPTER.validate_python(raw)


class ErrorEnvelope(WireModel):
    """The body of every refused request: ``{"error": code, "message": ...}``."""

    error: str
    message: str
    details: Any = None
