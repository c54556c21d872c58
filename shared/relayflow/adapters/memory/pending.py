"""In-memory stored deliveries: one dict per run guarded by a lock (one process)."""

from __future__ import annotations

import threading
from collections.abc import Collection

from relayflow.core.record import InboxItem


class InMemoryPendingDeliveries:
    """The :class:`~relayflow.ports.PendingDeliveries` port in memory."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[str, InboxItem]] = {}
        self._lock = threading.Lock()

    def post(self, run_id: str, item: InboxItem) -> bool:
        """Store ``item`` unless its id is stored already."""
        with self._lock:
            stored = self._runs.setdefault(run_id, {})
            if item.id in stored:
                return False
            stored[item.id] = item.model_copy(deep=True)
            return True

    def pending(self, run_id: str) -> list[InboxItem]:
        """The run's stored deliveries."""
        with self._lock:
            return [item.model_copy(deep=True) for item in self._runs.get(run_id, {}).values()]

    def remove(self, run_id: str, item_ids: Collection[str]) -> None:
        """Forget ``item_ids`` of the run."""
        with self._lock:
            stored = self._runs.get(run_id)
            if stored is None:
                return
            for item_id in item_ids:
                stored.pop(item_id, None)
            if not stored:
                del self._runs[run_id]
