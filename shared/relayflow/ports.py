"""The ports of the orchestrator core: storage, time, alarms and dispatch, as Protocols.

Adapters (in memory, AWS) implement these; the engine depends on nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from relayflow.errors import DriveAbandoned as DriveAbandoned

if TYPE_CHECKING:
    from relayflow.core.record import InboxItem, RunRecord
    from relayflow.core.views import UnavailableValue
    from relayflow.protocol import CheckpointEntry


class Clock(Protocol):
    """Wall-clock time in epoch milliseconds (virtual in tests)."""

    def now_ms(self) -> int: ...


@runtime_checkable
class ListenableClock(Clock, Protocol):
    """A clock that calls its listeners each time it moves (the virtual clock of tests):
    timed work then happens when the clock passes its time, in the thread that moved it,
    instead of on a timer thread."""

    def add_listener(self, listener: Callable[[int], None]) -> None: ...

    def remove_listener(self, listener: Callable[[int], None]) -> None: ...


@dataclass(frozen=True)
class RunQuery:
    """Filters for listing runs; ``cursor`` is opaque and comes from a previous page."""

    environment: str | None = None
    workflow_id: str | None = None
    statuses: Sequence[str] = ()
    tag: str | None = None
    started_after: int | None = None
    started_before: int | None = None
    #: The build (``CodeVersion.build``) the run is on.
    code_version: str | None = None
    #: Only the children of this run (those it started with ``ctx.invoke``).
    parent_run_id: str | None = None
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True)
class RunPage:
    """One page of runs, newest first, and the cursor of the next page (None at the end)."""

    runs: list[RunRecord]
    next_cursor: str | None
    #: By run id: values of listed runs the payload store no longer gives (left out).
    unavailable: Mapping[str, list[UnavailableValue]] = field(default_factory=dict)


@dataclass(frozen=True)
class VersionUsage:
    """What the runs pinned to one qualified Lambda function (``name:7``) still need of it."""

    #: A run pinned to it has not ended: its next invocation goes to that version.
    live: bool
    #: When the last run pinned to it ended (epoch ms; None: no ended run is stored).
    last_ended_at: int | None


@runtime_checkable
class PinnedRunIndex(Protocol):
    """A run store that answers, with one query, which runs keep a Lambda version in use."""

    def version_usage(self, function: str) -> VersionUsage:
        """The usage of the qualified function ``function`` by the stored pinned runs."""
        ...


@runtime_checkable
class LenientRunReader(Protocol):
    """A run store whose values may live in a payload store: it can still read a run whose
    payload store lost some of them, for views (a run read so is never saved)."""

    def get_lenient(self, run_id: str) -> tuple[RunRecord, list[UnavailableValue]] | None:
        """The record without the values that cannot be read, and which ones those are."""
        ...


class RunStore(Protocol):
    """Durable run records with optimistic concurrency.

    Every save is conditional on the record's ``version``: a lost race raises
    ``StaleRunError`` and never overwrites a newer record.
    """

    def get(self, run_id: str) -> RunRecord | None: ...

    def get_header(self, run_id: str) -> RunRecord | None:
        """The run's header fields (status, lease, wake time...) in one small read; its
        journal and other per-entry collections may be empty. For looking, not saving."""
        ...

    def try_insert(self, record: RunRecord) -> RunRecord:
        """Insert a new record; raises ``RunAlreadyExistsError(existing=...)`` if the id exists."""
        ...

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        """Store ``record`` if the stored version is ``expected_version`` and, unless
        ``record.delivery_mark``, no delivery marked it since; returns it saved."""
        ...

    def mark_dirty(self, run_id: str, *, version: int) -> bool:
        """Mark the stored run dirty if it is at ``version``, without changing its version
        (so concurrent marks never fail each other); False when it is at another.

        The next save of a record read before the mark fails as stale, so the run's holder
        reads it again and sees ``dirty`` (and ``delivery_mark``) before it lets go.
        """
        ...

    def list_runs(self, query: RunQuery) -> RunPage: ...

    def due_runs(self, before_ms: int, limit: int = 100) -> list[str]:
        """Ids of runs whose wake time is at or before ``before_ms`` (the sweeper's query)."""
        ...


class CheckpointWriter(Protocol):
    """What a step host needs of a run's checkpoint log: writing entries into free slots."""

    def append(self, run_id: str, entry: CheckpointEntry) -> None:
        """Write ``entry`` at ``(run_id, entry.seq)`` if that slot is free.

        Raises:
            CheckpointSlotTakenError: The slot holds an entry already (``taken`` is it).
            CheckpointUnavailableError: The entry could not be written (a remote log only).
        """
        ...


class CheckpointLog(CheckpointWriter, Protocol):
    """A run's write-once log of checkpoints, one entry per sequence number.

    The holder of a run's lease hands its step host the next free slot; the host writes its
    entries there one after the other. A new holder (after a crash or a lost lease) or a
    cancel first writes a fence into the next free slot, so the host that expected it finds
    it taken at its next checkpoint and stops: the sequence number is the fencing token.
    """

    def read(self, run_id: str, after_seq: int) -> list[CheckpointEntry]:
        """The entries after ``after_seq``, in order (up to the first free slot)."""
        ...


class ManifestStore(Protocol):
    """Manifests per environment with a ``current`` pointer (see ``relayflow.events``).

    Registering refuses a manifest with any problem as a whole (nothing stored), is
    idempotent (equal content, one ``versionId``), makes the version current, and succeeds
    while other registrations of the environment run at the same time. What is read is a
    copy: changing it, or the dict that was registered, changes nothing stored.
    """

    def register(self, environment: str, manifest: dict[str, Any]) -> str:
        """Validate and store ``manifest`` as current; returns its ``versionId``."""
        ...

    def get_current(self, environment: str) -> dict[str, Any] | None: ...


class PayloadStore(Protocol):
    """Content-addressed storage for values over the inline cap."""

    def put(self, data: bytes) -> str:
        """Store ``data``; returns its reference ``sha256:<hex digest>`` (equal data, one
        reference; storing it again, even concurrently, succeeds)."""
        ...

    def get(self, ref: str) -> bytes:
        """The exact bytes stored under ``ref``.

        Raises ``PayloadNotFoundError`` when nothing is stored under it and
        ``ValidationError`` when ``ref`` is not a reference.
        """
        ...


class AlarmClock(Protocol):
    """Alarms of runs at their wake times; arming and disarming are idempotent.

    ``disarm`` names the wake time it is for (None: every alarm of the run), so that a late
    disarm never removes an alarm armed since for another wake; an alarm that fires and
    finds nothing due is harmless.
    """

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Make the run's one alarm fire at ``wake_at_ms`` (never before, at most a second
        after), replacing an earlier arming; the drive it starts is told ``wake_at_ms``. A
        time already passed fires at once."""
        ...

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Remove the run's alarm for ``wake_at_ms`` (None: every alarm of the run); an alarm
        that fired or was never armed counts as removed."""
        ...


class Dispatcher(Protocol):
    """Delivers a step request (wire dict) to a step host; returns (HTTP status, body).

    Raises ``DispatchError`` when the host cannot be reached or answers with a transport
    failure; ``DispatchError.transient`` says whether a retry may succeed.
    """

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]: ...


@runtime_checkable
class InProcessDispatcher(Dispatcher, Protocol):
    """A dispatcher whose host runs in this process and can hand a 200's StepResponse over
    as it is: a long run's journal is then not turned into wire form and validated back."""

    def dispatch_in_process(self, request: dict[str, Any]) -> tuple[int, Any]:
        """Like ``dispatch``, with a 200's body the StepResponse model itself."""
        ...


_ENGINE_CHECKPOINTS: ContextVar[CheckpointWriter | None] = ContextVar(
    "relayflow_engine_checkpoints", default=None
)


@contextmanager
def offering_checkpoints(log: CheckpointWriter | None) -> Iterator[None]:
    """While the block dispatches, a step host running in this thread writes its per-step
    checkpoints into ``log`` (the driving engine's), however its dispatcher was built or
    wrapped: durability never depends on a dispatcher's construction."""
    token = _ENGINE_CHECKPOINTS.set(log)
    try:
        yield
    finally:
        _ENGINE_CHECKPOINTS.reset(token)


def offered_checkpoints() -> CheckpointWriter | None:
    """The checkpoint log of the engine dispatching in this thread, if any."""
    return _ENGINE_CHECKPOINTS.get()


@dataclass(frozen=True)
class DispatcherResolver:
    """Chooses the dispatcher of a run.

    Order: the run's ``tenantMeta.tenantScript`` in ``by_tenant_script``, then its workflow id
    in ``by_workflow``, then ``default``.
    """

    default: Dispatcher
    by_tenant_script: Mapping[str, Dispatcher] = field(default_factory=dict)
    by_workflow: Mapping[str, Dispatcher] = field(default_factory=dict)

    def resolve(self, *, workflow_id: str, tenant_script: str | None) -> Dispatcher:
        """The dispatcher for a run of ``workflow_id`` owned by ``tenant_script``."""
        if tenant_script is not None and tenant_script in self.by_tenant_script:
            return self.by_tenant_script[tenant_script]
        if workflow_id in self.by_workflow:
            return self.by_workflow[workflow_id]
        return self.default


@runtime_checkable
class WorkflowCatalog(Protocol):
    """Optional capability of a dispatcher: whether its step host has a workflow."""

    def hosts_workflow(self, workflow_id: str) -> bool | None:
        """True or False when the host can tell, None when only a step request would."""
        ...


@runtime_checkable
class RunWatcher(Protocol):
    """Optional capability of a run store: block until a run changes (used by ``stream_run``)."""

    def wait_for_change(self, run_id: str, after_version: int, timeout_s: float) -> bool:
        """Wait until the stored version of ``run_id`` exceeds ``after_version``.

        Returns True when it did, False when ``timeout_s`` passed first.
        """
        ...


class RunObserver(Protocol):
    """Told about every save of a run (metrics, logs); must not raise or block."""

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None: ...

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """A drive or invocation of ``run_id`` ended on a transient failure of relayflow's own
        storage or alarms (``reason``); the run is driven again from its last durable point."""


@runtime_checkable
class FlowObserver(Protocol):
    """A run observer that also counts what flow control did to runs the saves alone do not
    show (a run queued at its trigger, a run started from its key's queue)."""

    def on_flow(
        self, counter: str, run_id: str, workflow_id: str, *, queued_at: int | None = None
    ) -> None:
        """``counter`` happened to ``run_id`` of ``workflow_id``; a run that queued says its
        place in its key's queue (``queued_at``, 1 is next)."""


@runtime_checkable
class AlarmObserver(Protocol):
    """A run observer that also times the alarms, hand-offs and sweeps that drive runs."""

    def on_alarm(self, workflow_id: str, lateness_ms: int) -> None:
        """A run of ``workflow_id`` was driven ``lateness_ms`` after its stored wake time."""


@runtime_checkable
class InvocationObserver(Protocol):
    """A run observer that also hears of each invocation of a run's step host once it
    ended (traces: the saves show its answer, not when it was sent)."""

    def on_invoked(
        self, record: RunRecord, started_at: int, ended_at: int, outcome: str, failed: bool
    ) -> None: ...


@dataclass(frozen=True)
class DeliveryEntry:
    """What a delivery log holds for one ``(scope, key)``.

    Attributes:
        fingerprint: Digest of the request the key was first used with.
        answer: The first answer recorded for it (None while the first request is under way).
        held_until: Epoch ms until which the first request is presumed under way; after it an
            unanswered entry may be claimed again (its request died before answering).
    """

    fingerprint: str
    answer: Mapping[str, Any] | None
    held_until: int


@dataclass(frozen=True)
class DeliveryClaim:
    """The outcome of :meth:`DeliveryLog.claim`: ``won`` (this caller goes ahead) or the entry
    another request wrote first."""

    won: bool
    existing: DeliveryEntry | None = None


class PendingDeliveries(Protocol):
    """Deliveries stored for a run before its record takes them (see ``core.pending``).

    One write-once item per injection id, outside the run's record: concurrent deliveries
    into one run never write the same item, and a repeated id is refused by the write itself.
    """

    def post(self, run_id: str, item: InboxItem) -> bool:
        """Store ``item``; False when one with its id is stored already (nothing changed)."""
        ...

    def pending(self, run_id: str) -> list[InboxItem]:
        """Every stored delivery of the run not yet removed (a strongly consistent read)."""
        ...

    def remove(self, run_id: str, item_ids: Collection[str]) -> None:
        """Forget deliveries the run's record took (or refused); unknown ids are ignored."""
        ...


class DeliveryLog(Protocol):
    """Delivery ids and ``Idempotency-Key`` answers, one item per ``(scope, key)``.

    Each delivery costs one conditional write whatever the number before it; entries expire
    at ``expires_at`` (epoch ms) with the retention of what they belong to.
    """

    def claim(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        *,
        now_ms: int,
        hold_ms: int,
        expires_at: int | None,
    ) -> DeliveryClaim:
        """Take ``(scope, key)`` unless a request holds it or answered it already.

        Wins when no entry exists, or when an unanswered entry's hold has passed.
        """
        ...

    def record(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        answer: Mapping[str, Any],
        *,
        lifelong: bool = False,
    ) -> None:
        """Store the first answer of a claimed key (later calls change nothing).

        ``lifelong``: the key was claimed without expiry (``expires_at=None``), so a store may
        write the answered entry whole instead of changing the claim.
        """
        ...

    def release(self, scope: str, key: str, fingerprint: str) -> None:
        """Give up an unanswered claim (the request failed before changing anything)."""
        ...
