"""The step host's side of the checkpoint channel: each step made durable before the body goes on.

The orchestrator hands the host the next free slot of the run's log (``request.checkpoint``).
The host writes its entries there one after the other; a slot found taken means another
driver fenced this host off (it stops and answers nothing more), the run was cancelled
(the body stops as at a cancel and compensates when asked) or paused (the invocation ends
with what it did). A log that cannot be written
(a remote one whose orchestrator is unreachable) ends the invocation with what it has.

Group commit: an entry is submitted (``submit``) and waited for (``wait``) where the body
needs it durable. Whoever waits while no write is in flight writes every entry submitted so
far in one slot (a ``group`` entry when there are several); entries submitted while that
write is in flight go together into the next one. Concurrent branches therefore share
writes, and a branch's last step and its completion, submitted with nothing run between
them, land in the same write.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from relayflow.costs.usage import RunUsage
from relayflow.errors import (
    CancelledSignal,
    CheckpointFencedSignal,
    CheckpointSlotTakenError,
    CheckpointUnavailableError,
    RequestReplayedSignal,
    RunPausedError,
)
from relayflow.ports import CheckpointWriter
from relayflow.protocol import (
    CancelDirective,
    CheckpointEntry,
    CheckpointKind,
    MetadataUpdate,
    StepJournalEntry,
    StreamChunk,
)


@dataclass(frozen=True)
class Owed:
    """The last entry the current branch submitted, durable before the branch goes on.

    Attributes:
        checkpointer: The log writer it was submitted to.
        ticket: Its ticket there.
        settle: Waits for it (blocking), turning a refused write into the body's signal.
    """

    checkpointer: Checkpointer
    ticket: int
    settle: Callable[[int], None]


#: Per branch (each asyncio task has its own copy): the entry it owes the log.
OWED: ContextVar[Owed | None] = ContextVar("relayflow_owed_checkpoint", default=None)


def take_owed() -> Owed | None:
    """The current branch's owed entry when it is not durable yet (then no longer owed)."""
    owed = OWED.get()
    if owed is None:
        return None
    OWED.set(None)
    return None if owed.checkpointer.is_durable(owed.ticket) else owed


class Checkpointer:
    """Writes one invocation's checkpoints into its run's log.

    Args:
        log: The run's checkpoint log.
        run_id: The run.
        first_seq: The slot the orchestrator offered (the next free one).
    """

    #: Most entries one write carries (bounds the item; larger ones go to the payload store).
    MAX_GROUP = 200
    #: Branches of an async body that may wait at once without queueing behind each other.
    MAX_WAITERS = 64

    def __init__(
        self, log: CheckpointWriter, run_id: str, first_seq: int, *, group: bool = True
    ) -> None:
        self._log = log
        self._run_id = run_id
        self._next = first_seq
        self._group = group
        self._lock = threading.Condition()
        #: Entries submitted and not written yet, in submission order.
        self._pending: list[CheckpointEntry] = []
        #: How many entries were submitted / are durable (a ticket is a submission's number).
        self._submitted = 0
        self._durable = 0
        self._writing = False
        #: Why the log was closed while entries still waited (raised to their waiters).
        self._failure: BaseException | None = None
        #: Writes made and entries they carried (the group commit's effect, for figures).
        self.writes = 0
        self.entries_written = 0
        self._waiters: ThreadPoolExecutor | None = None
        self.closed = False
        #: A cancel found in the log (the invocation answers as cancelled).
        self.cancel: CancelDirective | None = None
        #: A pause found in the log: the invocation ends at its next live work.
        self.paused = False
        #: The last slot this invocation found taken (its own entries and any fence).
        self.last_seq: int | None = None

    def claim(self) -> None:
        """Take the invocation's first slot before the body runs (one write).

        A second copy of the same step request finds the slot claimed and runs nothing,
        whichever process it reaches. A cancel already in the slot is kept in ``cancel``
        (the body stops at its first live work); a fence closes the log as for a step.

        Raises:
            RequestReplayedSignal: Another claim holds the slot.
            CheckpointFencedSignal: A fence holds it: the run has a new holder.
            CheckpointUnavailableError: The log could not be written.
        """
        # The nonce tells this claim from an identical copy's (the checkpoint route answers
        # a repeat of the very same entry as stored).
        with contextlib.suppress(CancelledSignal, RunPausedError):
            self._write("claim", reason=f"step request accepted ({secrets.token_hex(8)})")

    def step(self, key: str, entry: StepJournalEntry) -> int:
        """Submit the journal entry of ``key`` as it stands now; returns its ticket."""
        return self.submit("step", key=key, step=entry)

    def metadata(self, update: MetadataUpdate) -> None:
        """Make a metadata update made outside any step durable."""
        self.wait(self.submit("metadata", metadata=update))

    def chunk(self, chunk: StreamChunk) -> None:
        """Make a stream chunk durable."""
        self.wait(self.submit("chunk", chunk=chunk))

    @property
    def waiters(self) -> ThreadPoolExecutor:
        """Threads in which an async body's branches wait (a shared default pool would make
        them queue behind each other while one write is in flight)."""
        with self._lock:
            if self._waiters is None:
                self._waiters = ThreadPoolExecutor(
                    self.MAX_WAITERS, thread_name_prefix="relayflow-checkpoint"
                )
            return self._waiters

    def take_usage(self) -> RunUsage | None:
        """What the log's writes for this run cost, when the log counts it (a log counting
        nothing, as in the orchestrator's own process, gives None)."""
        take = getattr(self._log, "take_usage", None)
        usage = take(self._run_id) if callable(take) else None
        return usage if isinstance(usage, RunUsage) and not usage.is_empty else None

    def close(self) -> None:
        """Let the waiting threads go (the invocation is over)."""
        if self._waiters is not None:
            self._waiters.shutdown(wait=False)

    @property
    def submitted(self) -> int:
        """The ticket of the last entry submitted (0 before any)."""
        return self._submitted

    def is_durable(self, ticket: int) -> bool:
        """True when the entry of ``ticket`` is written (or nothing more will be)."""
        with self._lock:
            return self._durable >= ticket

    def submit(self, kind: CheckpointKind, **fields: Any) -> int:
        """Queue an entry for the next write; returns its ticket (0 once the log is closed)."""
        # A snapshot: the journal entry may change in place before a write (perhaps in
        # another thread) serialises it.
        entry = CheckpointEntry(seq=0, kind=kind, **_frozen(fields))
        with self._lock:
            if self.closed:
                # After a cancel the answer carries the rest; nothing more goes to the log.
                return 0
            self._pending.append(entry)
            self._submitted += 1
            return self._submitted

    def wait(self, ticket: int) -> None:
        """Return once the entry of ``ticket`` is durable, writing it if no write is in flight.

        Raises:
            CancelledSignal: The run was cancelled (``cancel`` says how).
            RunPausedError: The run was paused.
            RequestReplayedSignal: A claim holds the invocation's first slot.
            CheckpointFencedSignal: Another driver holds the run.
            CheckpointUnavailableError: The log could not be written.
        """
        while True:
            with self._lock:
                while True:
                    if self._durable >= ticket:
                        return
                    if self._failure is not None:
                        raise self._failure
                    if not self._writing:
                        break
                    self._lock.wait()
                take = len(self._pending) if self._group else 1
                batch = self._pending[: min(take, self.MAX_GROUP)]
                del self._pending[: len(batch)]
                self._writing = True
                seq = self._next
            try:
                self._append(seq, batch)
            except BaseException as exc:
                with self._lock:
                    self._writing = False
                    self.closed = True
                    self._failure = exc
                    self._pending.clear()
                    self._lock.notify_all()
                raise
            with self._lock:
                self._writing = False
                self._next += 1
                self._durable += len(batch)
                self.writes += 1
                self.entries_written += len(batch)
                self._lock.notify_all()

    def _write(self, kind: CheckpointKind, **fields: Any) -> None:
        self.wait(self.submit(kind, **fields))

    def _append(self, seq: int, batch: list[CheckpointEntry]) -> None:
        # The batch's entries are this log's own snapshots (``submit``): numbered in place.
        for submitted in batch:
            submitted.seq = seq
        if len(batch) == 1:
            entry = batch[0]
        else:
            entry = CheckpointEntry(seq=seq, kind="group", entries=batch)
        try:
            self._log.append(self._run_id, entry)
        except CheckpointSlotTakenError as exc:
            self.last_seq = seq
            taken = exc.taken
            if isinstance(taken, CheckpointEntry) and taken.kind == "cancel":
                self.cancel = CancelDirective(reason=taken.reason, compensate=taken.compensate)
                raise CancelledSignal(taken.reason or "cancelled") from None
            if isinstance(taken, CheckpointEntry) and taken.kind == "pause":
                self.paused = True
                raise RunPausedError(taken.reason or "run paused") from None
            if isinstance(taken, CheckpointEntry) and taken.kind == "claim":
                raise RequestReplayedSignal(
                    f"checkpoint slot {seq} of run {self._run_id} is claimed: "
                    "this step request was already accepted"
                ) from None
            raise CheckpointFencedSignal(
                f"checkpoint slot {seq} of run {self._run_id} is taken: "
                "another driver holds the run"
            ) from None
        except CheckpointUnavailableError:
            # The entry may have landed: the answer claims its slot (``last_seq``), so
            # the next invocation is offered the one after it, never a slot this entry
            # might hold. The answer itself carries the step.
            self.last_seq = seq
            raise
        self.last_seq = seq


def _frozen(fields: dict[str, Any]) -> dict[str, Any]:
    """Copies of the models among ``fields`` that later in-place edits do not reach."""
    return {name: _snapshot(value) for name, value in fields.items()}


def _snapshot(value: Any) -> Any:
    if isinstance(value, StepJournalEntry):
        # A journal entry changes in place by reassigned fields and by its attempts (added,
        # dropped, marked); its output is a serialised value the runtime owns and never
        # edits. Copying just that much keeps a step's snapshot cheap (a deep copy of the
        # output was most of a step's CPU).
        return value.model_copy(update={"attempts": [a.model_copy() for a in value.attempts]})
    return value.model_copy(deep=True) if isinstance(value, BaseModel) else value
