"""An in-memory checkpoint log: write-once slots per run, stored as JSON documents."""

from __future__ import annotations

import threading
from typing import Any

from relayflow.errors import CheckpointSlotTakenError
from relayflow.protocol import CheckpointEntry


class InMemoryCheckpointLog:
    """A :class:`~relayflow.ports.CheckpointLog` in a dict, guarded by one lock.

    Entries are kept as their wire documents (as a database would), so a reader never shares
    an object with the writer.
    """

    def __init__(self) -> None:
        self._slots: dict[str, dict[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def append(self, run_id: str, entry: CheckpointEntry) -> None:
        """Write ``entry`` at its slot; raises ``CheckpointSlotTakenError`` if it is taken."""
        doc = entry.to_wire()
        with self._lock:
            slots = self._slots.setdefault(run_id, {})
            taken = slots.get(entry.seq)
            if taken is None:
                slots[entry.seq] = doc
                return
        raise CheckpointSlotTakenError(
            f"checkpoint slot {entry.seq} of run {run_id} is taken",
            taken=CheckpointEntry.model_validate(taken),
        )

    def read(self, run_id: str, after_seq: int) -> list[CheckpointEntry]:
        """The entries after ``after_seq`` up to the first free slot, in order."""
        found: list[CheckpointEntry] = []
        with self._lock:
            slots = self._slots.get(run_id, {})
            seq = after_seq + 1
            while seq in slots:
                found.append(CheckpointEntry.model_validate(slots[seq]))
                seq += 1
        return found

    def count(self, run_id: str) -> int:
        """How many entries the run's log holds (for tests and benchmarks)."""
        with self._lock:
            return len(self._slots.get(run_id, {}))
