"""Per-context replay state (namespace, counters, clock, randomness, compensation scope)."""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from relayflow.protocol import MetadataUpdate, StepJournalEntry
from relayflow.sdk.determinism import Mulberry32, fnv1a_seed
from relayflow.sdk.invocation import Invocation
from relayflow.sdk.ordinals import ScopeOrder
from relayflow.sdk.retry import RetryPolicy
from relayflow.tracing.ids import SpanRef

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class Compensable:
    """A step that succeeded with ``compensate=``: its undo function and its output."""

    key: str
    fn: Callable[..., Any]
    output: Any


@dataclass(frozen=True)
class StepInfo:
    """The step attempt running in the current thread or task (see :func:`current_step`).

    Attributes:
        step_id: The journal key of the step.
        attempt: The 1-based attempt number.
        idempotency_key: The step's ``idempotency_key``, else ``"<runId>:<step_id>"``.
    """

    step_id: str
    attempt: int
    idempotency_key: str


@dataclass
class StepScope:
    """Collects what a running step attempt (or check, or compensation) emits."""

    id_prefix: str
    info: StepInfo | None = None
    updates: list[MetadataUpdate] = field(default_factory=list)
    #: The attempt's span in the run's trace, current while its code runs.
    trace: SpanRef | None = None


STEP_SCOPE: contextvars.ContextVar[StepScope | None] = contextvars.ContextVar(
    "relayflow_step_scope", default=None
)


def current_step() -> StepInfo | None:
    """The step attempt running here, or ``None`` outside a step body."""
    scope = STEP_SCOPE.get()
    return scope.info if scope is not None else None


def ensure_not_in_step(what: str) -> None:
    """Durable operations cannot be nested inside a step body."""
    if STEP_SCOPE.get() is not None:
        raise RuntimeError(f"{what} cannot be called inside a step, a check or a compensation")


class ContextCore:
    """The replay state behind one ``ctx`` (the root or a group/branch child)."""

    def __init__(
        self,
        inv: Invocation,
        path: str,
        *,
        clock_ms: int,
        retry: RetryPolicy | None,
    ) -> None:
        self.inv = inv
        self.path = path
        self.clock_ms = clock_ms
        self.retry_override = retry
        self.wait_counter = 0
        self.batch_counter = 0
        self.meta_seq = 0
        seed_text = inv.request.run_id if not path else f"{inv.request.run_id}/{path}"
        self.rng = Mulberry32(fnv1a_seed(seed_text))
        self.compensables: list[Compensable] = []
        self.order = ScopeOrder(concurrent=inv.workflow.is_async)
        #: ``ctx.patched()`` change ids met since this scope's last operation (journalled
        #: with the entry of the next one, see :mod:`relayflow.sdk.patches`).
        self.pending_patches: list[str] = []

    @property
    def namespace(self) -> str:
        """The prefix of ids made in this context (empty at the root)."""
        return f"{self.path}/" if self.path else ""

    def key(self, local_id: str) -> str:
        """The journal key of ``local_id`` in this context."""
        return f"{self.namespace}{local_id}"

    def reach(self, key: str, kind: str) -> StepJournalEntry | None:
        """Claim ``key`` as this scope's next operation and return its journal entry, after
        checking it against the journal (see :mod:`relayflow.sdk.ordinals`)."""
        entry = self.inv.reach(key, kind, self.path, self.order.take())
        if self.pending_patches:
            if entry is None:
                self.inv.mark_patches(key, tuple(self.pending_patches))
            self.pending_patches = []
        return entry

    def next_position(self) -> int:
        """Consume the next positional wait number."""
        number = self.wait_counter
        self.wait_counter += 1
        return number

    def next_batch(self) -> int:
        """Consume the next parallel/map number."""
        number = self.batch_counter
        self.batch_counter += 1
        return number

    def token_prefix(self) -> str:
        """Auto token ids: ``tok_<n>`` at the root, path-qualified (URL-safe) below it."""
        if not self.path:
            return "tok_"
        return "tok_" + _UNSAFE.sub("_", self.path.replace("/", "-")) + "-"

    def advance_clock(self, at_ms: int | None) -> None:
        """Move ``ctx.now()`` to a journalled time (it may move backwards, as in the reference)."""
        if at_ms is not None:
            self.clock_ms = at_ms

    def child(self, path: str) -> ContextCore:
        """A namespaced child context that inherits the clock and retry override."""
        return ContextCore(self.inv, path, clock_ms=self.clock_ms, retry=self.retry_override)

    def adopt(self, child: ContextCore) -> None:
        """Move a finished child's compensations onto this scope's stack."""
        self.compensables.extend(child.compensables)
        child.compensables = []
