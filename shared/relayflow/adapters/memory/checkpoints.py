"""An in-memory checkpoint log: write-once slots per run, stored as JSON text."""

from __future__ import annotations

import threading

from relayflow.errors import CheckpointSlotTakenError
from relayflow.protocol import CheckpointEntry


class InMemoryCheckpointLog:
    """A :class:`~relayflow.ports.CheckpointLog` in a dict, guarded by one lock.

    Entries are kept as JSON text (as a database would), so a reader never shares an object
    with the writer, and a long run's log adds no objects for the garbage collector to scan.
    """

    def __init__(self) -> None:
        self._slots: dict[str, dict[int, str]] = {}
        self._lock = threading.Lock()

    def append(self, run_id: str, entry: CheckpointEntry) -> None:
        """Write ``entry`` at its slot; raises ``CheckpointSlotTakenError`` if it is taken."""
        doc = entry.model_dump_json(by_alias=True, exclude_none=True)
        with self._lock:
            slots = self._slots.setdefault(run_id, {})
            taken = slots.get(entry.seq)
            if taken is None:
                slots[entry.seq] = doc
                return
        raise CheckpointSlotTakenError(
            f"checkpoint slot {entry.seq} of run {run_id} is taken",
            taken=CheckpointEntry.model_validate_json(taken),
        )

    def read(self, run_id: str, after_seq: int) -> list[CheckpointEntry]:
        """The entries after ``after_seq`` up to the first free slot, in order."""
        found: list[CheckpointEntry] = []
        with self._lock:
            slots = self._slots.get(run_id, {})
            seq = after_seq + 1
            while seq in slots:
                found.append(CheckpointEntry.model_validate_json(slots[seq]))
                seq += 1
        return found

    def count(self, run_id: str) -> int:
        """How many entries the run's log holds (for tests and benchmarks)."""
        with self._lock:
            return len(self._slots.get(run_id, {}))
