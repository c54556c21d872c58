"""The step host's side of the checkpoint channel: each step made durable before the body goes on.

The orchestrator hands the host the next free slot of the run's log (``request.checkpoint``).
The host writes its entries there one after the other; a slot found taken means another
driver fenced this host off (it stops and answers nothing more), the run was cancelled
(the body stops as at a cancel and compensates when asked) or paused (the invocation ends
with what it did). A log that cannot be written
(a remote one whose orchestrator is unreachable) ends the invocation with what it has.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from typing import Any

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


class Checkpointer:
    """Writes one invocation's checkpoints into its run's log.

    Args:
        log: The run's checkpoint log.
        run_id: The run.
        first_seq: The slot the orchestrator offered (the next free one).
    """

    def __init__(self, log: CheckpointWriter, run_id: str, first_seq: int) -> None:
        self._log = log
        self._run_id = run_id
        self._next = first_seq
        self._lock = threading.Lock()
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

    def step(self, key: str, entry: StepJournalEntry) -> None:
        """Make the journal entry of ``key`` durable as it stands now."""
        self._write("step", key=key, step=entry)

    def metadata(self, update: MetadataUpdate) -> None:
        """Make a metadata update made outside any step durable."""
        self._write("metadata", metadata=update)

    def chunk(self, chunk: StreamChunk) -> None:
        """Make a stream chunk durable."""
        self._write("chunk", chunk=chunk)

    def _write(self, kind: CheckpointKind, **fields: Any) -> None:
        with self._lock:
            if self.closed:
                # After a cancel the answer carries the rest; nothing more goes to the log.
                return
            entry = CheckpointEntry(seq=self._next, kind=kind, **fields)
            try:
                self._log.append(self._run_id, entry)
            except CheckpointSlotTakenError as exc:
                self.closed = True
                self.last_seq = self._next
                taken = exc.taken
                if isinstance(taken, CheckpointEntry) and taken.kind == "cancel":
                    self.cancel = CancelDirective(reason=taken.reason, compensate=taken.compensate)
                    raise CancelledSignal(taken.reason or "cancelled") from None
                if isinstance(taken, CheckpointEntry) and taken.kind == "pause":
                    self.paused = True
                    raise RunPausedError(taken.reason or "run paused") from None
                if isinstance(taken, CheckpointEntry) and taken.kind == "claim":
                    raise RequestReplayedSignal(
                        f"checkpoint slot {self._next} of run {self._run_id} is claimed: "
                        "this step request was already accepted"
                    ) from None
                raise CheckpointFencedSignal(
                    f"checkpoint slot {self._next} of run {self._run_id} is taken: "
                    "another driver holds the run"
                ) from None
            except CheckpointUnavailableError:
                # The entry may have landed: the answer claims its slot (``last_seq``), so
                # the next invocation is offered the one after it, never a slot this entry
                # might hold. The answer itself carries the step.
                self.closed = True
                self.last_seq = self._next
                raise
            self.last_seq = self._next
            self._next += 1
