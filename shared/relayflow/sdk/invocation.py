"""The state of one invocation: the journal being replayed and everything the response carries."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from relayflow.config import read_group_checkpoints, read_overrun_grace_max_ms
from relayflow.errors import (
    CancelledSignal,
    CheckpointRefusedSignal,
    CheckpointUnavailableError,
    NonDeterminismError,
    RunPausedError,
    SuspendSignal,
)
from relayflow.flow.ports import RateLimiter
from relayflow.protocol import (
    MetadataUpdate,
    StepJournalEntry,
    StepRequest,
    StreamChunk,
    Waitpoint,
    WaitpointResolution,
)
from relayflow.sdk.checkpoints import OWED, Checkpointer, Owed
from relayflow.sdk.ordinals import JournalOrder, Operation, scope_of
from relayflow.sdk.overruns import OVERRUNS, journal_overruns
from relayflow.sdk.registry import Workflow

#: Wait ids whose last ``:`` segment is ``<namespace><n>``, the context's positional counter.
POSITIONAL_PREFIXES = ("sleep:", "event:", "signal:", "invoke:")


@dataclass(frozen=True)
class ExecutorOptions:
    """Tuning of the executor.

    Attributes:
        in_process_retry_threshold_ms: Retry delays up to this wait in process; longer ones end
            the invocation with a ``retry:`` wait.
        checkpoint_interval_ms: In batched mode (no checkpoint log, or a workflow declared
            ``checkpoint="batched"``), after this much continuous work the invocation yields
            with a ``checkpoint:`` wait so the journal becomes durable.
        deadline_margin_ms: New work stops this long before the request's ``deadline``.
        checkpoint_max_work: In batched mode, after this many pieces of live work (step
            attempts, polls) the invocation yields too, which bounds the size of one answer
            and of one checkpoint (a Lambda answer is capped at 6 MB).
        per_step_max_work: With per-step checkpoints, the invocation yields after this many
            pieces of live work (bounding the answer, which carries the journal); steps are
            durable one by one either way.
        sleep: How to wait in process (seconds); ``None`` sleeps for real.
        step_mocks: Test doubles for steps, by step id (journal key such as ``g/charge``
            first, then the id as written). A callable replaces the step function and gets
            the same arguments; any other value is returned as the step's result.
        rate_limiter: Where steps declaring ``rate_limit`` reserve their slots; without one
            such a step raises ``RateLimiterMissingError``.
        overrun_grace_max_ms: Caps the grace (twice the step's timeout) a step's next attempt
            waits for timed-out code still running here; ``RELAYFLOW_OVERRUN_GRACE_MAX``.
        journal_only: Answer from the journal only (a replay check): the first piece of live
            work (a step attempt, a poll, a stream, a rate limit reservation, a compensation
            not journalled) ends the invocation with a ``checkpoint:`` wait whose reason is
            ``journal_end``, before any user function runs.
        group_checkpoints: With per-step checkpoints, entries that become ready while a
            checkpoint write is in flight share the next write, and an entry is waited for
            only when its branch goes on; ``False`` writes each entry on its own, at once
            (``RELAYFLOW_GROUP_CHECKPOINTS``).
    """

    in_process_retry_threshold_ms: int = 1_000
    checkpoint_interval_ms: int = 5_000
    deadline_margin_ms: int = 0
    checkpoint_max_work: int = 1_000
    per_step_max_work: int = 100_000
    sleep: Callable[[float], None] | None = None
    step_mocks: Mapping[str, Any] = field(default_factory=dict)
    rate_limiter: RateLimiter | None = None
    overrun_grace_max_ms: int = field(default_factory=read_overrun_grace_max_ms)
    journal_only: bool = False
    group_checkpoints: bool = field(default_factory=read_group_checkpoints)


#: The reason of the wait a journal-only invocation ends with at its first live work.
JOURNAL_END = "journal_end"


def position_of(wait_id: str) -> tuple[str, str] | None:
    """``(namespace, n)`` of a positional wait id, ``None`` for other ids."""
    if not wait_id.startswith(POSITIONAL_PREFIXES):
        return None
    tail = wait_id.rsplit(":", 1)[1]
    namespace, _, number = tail.rpartition("/")
    return (namespace, number) if number.isdigit() else None


class Invocation:
    """One replay of a body: the request, the journal it mutates and the response's parts."""

    def __init__(
        self,
        request: StepRequest,
        workflow: Workflow[Any],
        *,
        services: Mapping[str, object],
        now_ms: Callable[[], int],
        options: ExecutorOptions,
        checkpointer: Checkpointer | None = None,
    ) -> None:
        self.request = request
        self.checkpointer = checkpointer
        self.journal = request.journal
        self.workflow = workflow
        self.services = services
        self.now_ms = now_ms
        self.options = options
        self.started_ms = now_ms()
        self.waits: list[tuple[str, Waitpoint]] = []
        self.metadata: list[MetadataUpdate] = []
        self.stream_chunks: list[StreamChunk] = []
        self.streams_seen: set[str] = set()
        self.nondeterminism: NonDeterminismError | None = None
        self.last_op = "<start>"
        self._claimed: set[str] = set()
        self._touched_prefixes: list[str] = []
        self._live_work = False
        self._live_count = 0
        self._yielding = False
        self._lock = threading.Lock()
        self._positions: dict[tuple[str, str], str] = {}
        self._order = JournalOrder(self.journal.step_results)
        #: The ordinal of each key reached in order in this invocation, stamped on its entry.
        self._ordinals: dict[str, int] = {}
        #: Change ids of ``ctx.patched()`` calls journalled with the entry of each key.
        self._patch_marks: dict[str, tuple[str, ...]] = {}
        #: The journal's entries by scope, for ``ctx.patched()`` (built at its first call).
        self._by_scope: dict[str, list[tuple[str, StepJournalEntry]]] | None = None
        #: A finished step whose checkpoint waits for the body's next operation: written
        #: before it, or carried by the answer when the body suspends or ends first.
        self._unwritten: tuple[str, StepJournalEntry] | None = None
        for wait_id in [*self.journal.waitpoints_resolved, *self.journal.waitpoints_registered]:
            position = position_of(wait_id)
            if position is not None:
                self._positions.setdefault(position, wait_id)

    # -- journal bookkeeping -------------------------------------------------------------

    def claim(self, key: str) -> None:
        """Mark a journal key as reached; the same key twice in one invocation is a bug."""
        if key in self._claimed:
            raise ValueError(
                f"duplicate id {key!r}: every step, group and stream id must be unique"
            )
        self._claimed.add(key)
        self.last_op = key

    def reach(
        self, key: str, kind: str, scope: str, ordinal: int | None
    ) -> StepJournalEntry | None:
        """Claim ``key`` as operation ``ordinal`` of ``scope`` (``None``: not numbered) and
        return its journal entry; an operation the journal does not have at that position,
        or any operation after a non-determinism was found, raises before it runs."""
        if self.nondeterminism is not None:
            raise self.nondeterminism
        self.write_unwritten()
        self.claim(key)
        if ordinal is not None:
            self._ordinals[key] = ordinal
            divergence = self._order.check(scope, ordinal, Operation(key, kind))
            if divergence is not None:
                raise self.nondeterministic(divergence.message(), data=divergence.data())
        return self.entry(key, kind)

    def share_ordinal(self, holder: str, keys: list[str]) -> None:
        """Journal the entries of ``keys`` at the position of ``holder`` (a batch's branches)."""
        ordinal = self._ordinals.get(holder)
        if ordinal is not None:
            self._ordinals.update(dict.fromkeys(keys, ordinal))
        marks = self._patch_marks.get(holder)
        if marks:
            self._patch_marks.update(dict.fromkeys(keys, marks))

    def recorded_in(self, scope: str) -> list[tuple[str, StepJournalEntry]]:
        """The entries of ``scope`` the journal held when the invocation began (indexed on
        first use; an entry journalled since was reached, so it is never history ahead)."""
        if self._by_scope is None:
            index: dict[str, list[tuple[str, StepJournalEntry]]] = {}
            for key, entry in self.journal.step_results.items():
                index.setdefault(scope_of(key), []).append((key, entry))
            self._by_scope = index
        return self._by_scope.get(scope, [])

    def mark_patches(self, key: str, change_ids: tuple[str, ...]) -> None:
        """Journal ``change_ids`` with the entry of ``key`` when it is recorded."""
        self._patch_marks[key] = change_ids

    def record(self, key: str, entry: StepJournalEntry, *, wait: bool = False) -> None:
        """Journal ``entry`` at ``key`` (with every step whose timed-out code ended since, see
        :meth:`journal_overruns`). With per-step checkpoints it is durable before the current
        branch next runs user code or ends (see :meth:`settle`); on return already when
        ``wait`` or when checkpoints are not grouped."""
        if entry.ordinal is None:
            entry.ordinal = self._ordinals.get(key)
        marks = self._patch_marks.get(key)
        if marks:
            entry.patches = tuple(dict.fromkeys((*(entry.patches or ()), *marks)))
        self.journal.step_results[key] = entry
        changed = [other for other in self.journal_overruns() if other != key]
        checkpointer = self.checkpointer
        if checkpointer is None:
            return
        self.write_unwritten()
        for other in changed:
            checkpointer.step(other, self.journal.step_results[other])
        if not wait and not changed and self._may_wait_for_next_operation(key, entry):
            self._unwritten = (key, entry)
            return
        ticket = checkpointer.step(key, entry)
        if wait or not self.options.group_checkpoints:
            self._checkpoint(checkpointer.wait, ticket)
        elif ticket:
            OWED.set(Owed(checkpointer, ticket, self.settle))

    def settle(self, ticket: int) -> None:
        """Wait (blocking) until the entry of ``ticket`` is durable.

        Raises:
            CheckpointRefusedSignal: The write was refused for good; raised where the next
                user code would run, it must not pass for that code's own failure.
        """
        if self.checkpointer is None:
            return
        try:
            self._checkpoint(self.checkpointer.wait, ticket)
        except Exception as exc:
            raise CheckpointRefusedSignal(exc) from exc

    def settle_all(self) -> None:
        """Wait (blocking) until every entry submitted so far is durable."""
        if self.checkpointer is not None:
            self.settle(self.checkpointer.submitted)

    def _may_wait_for_next_operation(self, key: str, entry: StepJournalEntry) -> bool:
        """Whether the checkpoint of a finished step may wait for the body's next operation.

        Between a step's end and the body's next operation nothing leaves the process, so
        the step is durable before the body goes on either way; when the body suspends or
        ends first, the save of its answer (the one that parks or ends the run) makes the
        step durable and no checkpoint write is needed. Only a top-level step of a ``def``
        body qualifies: there nothing else runs while the body goes on (branches of a map,
        parallel or ``async`` body do), and a mark of a started attempt is written at once.
        """
        return (
            entry.kind == "step"
            and entry.status == "ok"
            and not scope_of(key)
            and not self.workflow.is_async
        )

    def write_unwritten(self) -> None:
        """Write the checkpoint that waits for the body's next operation, if any."""
        waiting, self._unwritten = self._unwritten, None
        if waiting is not None and self.checkpointer is not None:
            self._checkpoint(self.checkpointer.wait, self.checkpointer.step(*waiting))

    def journal_overruns(self) -> list[str]:
        """Journal when the timed-out attempts of this run whose code ended in this process
        really ended; the step keys changed (their outcome is untouched)."""
        return journal_overruns(self.journal, OVERRUNS.take(self.request.run_id))

    @property
    def per_step(self) -> bool:
        """True when each step is made durable before the body goes on."""
        return self.checkpointer is not None and not self.checkpointer.closed

    def _checkpoint(self, write: Callable[..., None], *args: Any) -> None:
        try:
            write(*args)
        except CancelledSignal:
            assert self.checkpointer is not None
            self.request.cancel = self.checkpointer.cancel
            raise
        except CheckpointUnavailableError:
            # What was journalled stays in the answer; the orchestrator invokes the run again.
            self.request_yield("checkpoint_unavailable")
        except RunPausedError:
            # The answer carries what was journalled; the run goes on when it is resumed.
            self.request_yield("paused")

    def touch_prefix(self, prefix: str) -> None:
        """Count every journal key under ``prefix`` as reached (a checkpointed scope)."""
        self._touched_prefixes.append(prefix)

    def entry(self, key: str, kind: str) -> StepJournalEntry | None:
        """The journal entry at ``key``; one of another kind is a non-determinism error."""
        found = self.journal.step_results.get(key)
        if found is not None and found.kind != kind:
            raise self.nondeterministic(
                f"journal entry {key!r} was recorded by a {found.kind!r} call but the body now "
                f"reaches it with a {kind!r} call"
            )
        return found

    def nondeterministic(self, message: str, *, data: Any = None) -> NonDeterminismError:
        """Record (the first) non-determinism: the run fails with it whatever the body does."""
        error = NonDeterminismError(message, data=data)
        if self.nondeterminism is None:
            self.nondeterminism = error
        return error

    def check_position(self, namespace: str, number: int, wait_id: str) -> None:
        """A positional wait must be the one the journal recorded at the same position."""
        recorded = self._positions.get((namespace.rstrip("/"), str(number)))
        if recorded is not None and recorded != wait_id:
            raise self.nondeterministic(
                f"wait #{number} was journalled as {recorded!r} but the body now waits on "
                f"{wait_id!r}"
            )

    def reached(self, key: str) -> bool:
        """Whether this invocation reached the journal key ``key`` (or a scope holding it)."""
        return key in self._claimed or any(key.startswith(p) for p in self._touched_prefixes)

    def unreached(self) -> list[str]:
        """Journalled step keys this invocation never reached."""
        return [key for key in self.journal.step_results if not self.reached(key)]

    # -- work, yields and cancellation ---------------------------------------------------

    def check_cancel(self) -> None:
        """Stop at the first operation the journal cannot answer when a cancel was asked."""
        if self.request.cancel is not None:
            raise CancelledSignal(self.request.cancel.reason or "cancelled")

    def begin_work(self, *, may_yield: bool = True) -> None:
        """Called before live work starts: honours cancel, the deadline and the interval.

        ``may_yield=False`` is for an at-most-once attempt already journalled as started: it
        must run in this very invocation, or a later one would count it as interrupted.
        Nothing starts once a non-determinism was found (a body may have swallowed it).
        """
        if self.nondeterminism is not None:
            raise self.nondeterminism
        self.write_unwritten()
        self.stop_if_journal_only()
        self.check_cancel()
        self._live_count += 1
        if not may_yield:
            self._live_work = True
            return
        if self._yielding:
            raise SuspendSignal("checkpoint")
        if self.checkpointer is not None and self.checkpointer.paused:
            self.request_yield("paused")
        now = self.now_ms()
        if now + self.options.deadline_margin_ms >= self.request.deadline:
            self.request_yield("deadline")
        if self.checkpointer is not None:
            if self._live_count > self.options.per_step_max_work:
                self.request_yield("size")
        else:
            if self._live_work and now - self.started_ms >= self.options.checkpoint_interval_ms:
                self.request_yield("interval")
            if self._live_count > self.options.checkpoint_max_work:
                self.request_yield("size")
        self._live_work = True

    def stop_if_journal_only(self) -> None:
        """End a journal-only invocation here: what follows would run live."""
        if self.options.journal_only:
            self.request_yield(JOURNAL_END)

    def can_wait_in_process(self, delay_ms: int) -> bool:
        """Whether a retry delay may be slept here rather than through a ``retry:`` wait."""
        if delay_ms > self.options.in_process_retry_threshold_ms:
            return False
        limit = self.request.deadline - self.options.deadline_margin_ms
        return self.now_ms() + delay_ms < limit

    def request_yield(self, reason: str) -> NoReturn:
        """End the invocation with a ``checkpoint:`` wait that is due at once."""
        self._yielding = True
        wait_id = f"checkpoint:{self.request.invocation_count}"
        if not any(w.client_waitpoint_id == wait_id for _, w in self.waits):
            meta = {"wakeAt": self.now_ms(), "reason": reason}
            self.waits.append(
                ("", Waitpoint(client_waitpoint_id=wait_id, kind="DATETIME", meta=meta))
            )
        raise SuspendSignal(reason)

    # -- waits ---------------------------------------------------------------------------

    def resolution(self, wait_id: str) -> WaitpointResolution | None:
        """How the orchestrator resolved ``wait_id``, if it did."""
        self.last_op = wait_id
        return self.journal.waitpoints_resolved.get(wait_id)

    def suspend_on(self, owner: str, waitpoint: Waitpoint) -> NoReturn:
        """Register an unresolved wait (unless cancelling) and stop the current scope."""
        self.check_cancel()
        if not any(w.client_waitpoint_id == waitpoint.client_waitpoint_id for _, w in self.waits):
            self.waits.append((owner, waitpoint))
        raise SuspendSignal(waitpoint.client_waitpoint_id)

    def drop_waits_under(self, prefix: str) -> None:
        """Forget the waits registered by scopes under ``prefix`` (abandoned branches)."""
        self.waits = [(o, w) for o, w in self.waits if not (o + "/").startswith(prefix)]

    def pending_waits(self) -> list[Waitpoint]:
        """The waits the response announces."""
        return [w for _, w in self.waits]

    def has_user_waits(self) -> bool:
        """True when a wait other than a checkpoint yield is pending."""
        return any(not w.client_waitpoint_id.startswith("checkpoint:") for _, w in self.waits)

    # -- metadata and streams ------------------------------------------------------------

    def emit_metadata(self, update: MetadataUpdate) -> None:
        """Add a metadata update to the response (steps may run in worker threads)."""
        with self._lock:
            self.metadata.append(update)

    def checkpoint_metadata(self, update: MetadataUpdate) -> None:
        """Make a metadata update made outside any step durable (steps carry their own)."""
        if self.checkpointer is not None:
            self.write_unwritten()
            self._checkpoint(self.checkpointer.metadata, update)

    def emit_chunk(self, chunk: StreamChunk) -> None:
        """Add a stream chunk to the response (durable first, with per-step checkpoints)."""
        if self.checkpointer is not None:
            self.write_unwritten()
            self._checkpoint(self.checkpointer.chunk, chunk)
        with self._lock:
            self.stream_chunks.append(chunk)
