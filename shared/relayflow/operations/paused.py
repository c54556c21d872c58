"""``PausedWorkflows``: the workflow pause marks as the trigger path reads them, cached.

Every trigger asks whether its workflow is paused; nearly always it is not. The answer
(a mark or its absence) is kept per (workflow, environment) for :data:`CACHE_TTL_MS`, so a
burst of triggers costs one read of the store per workflow every 5 seconds: another
process's pause is seen within that time, this process's own at once (its pause and resume
go through here and drop the cached answer).
"""

from __future__ import annotations

import threading

from relayflow.operations.ports import WorkflowPause, WorkflowPauses
from relayflow.ports import Clock

#: How long a cached answer is used (the guide promises a pause is seen within 5 s).
CACHE_TTL_MS = 5_000


class PausedWorkflows:
    """A :class:`~relayflow.operations.ports.WorkflowPauses` that caches ``get``.

    Writes go to the store and drop the cached answer of their workflow; ``list`` always
    reads the store.

    Args:
        store: The pause marks.
        clock: When a cached answer was read (the engine's clock, virtual in tests).
        ttl_ms: How long a cached answer is used.
    """

    def __init__(self, store: WorkflowPauses, clock: Clock, *, ttl_ms: int = CACHE_TTL_MS) -> None:
        self.store = store
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._cached: dict[tuple[str, str], tuple[int, WorkflowPause | None]] = {}
        #: Bumped by every invalidation: a read that started before one is not cached, so
        #: a concurrent pause or resume is never hidden behind the answer read before it.
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """The workflow's mark, or None, as read at most ``ttl_ms`` ago."""
        key = (workflow_id, environment)
        now = self._clock.now_ms()
        # A hit takes no lock: reading one dict entry is atomic, and this runs on every
        # trigger.
        cached = self._cached.get(key)
        if cached is not None and 0 <= now - cached[0] < self._ttl_ms:
            return cached[1]
        generation = self._generation
        mark = self.store.get(workflow_id, environment)
        with self._lock:
            if generation == self._generation:
                self._cached[key] = (now, mark)
        return mark

    def invalidate(self, workflow_id: str, environment: str) -> None:
        """Forget the cached answer: the next ``get`` reads the store."""
        with self._lock:
            self._generation += 1
            self._cached.pop((workflow_id, environment), None)

    def pause(self, mark: WorkflowPause) -> bool:
        """Mark the workflow paused in the store (False when it already was)."""
        try:
            return self.store.pause(mark)
        finally:
            self.invalidate(mark.workflow_id, mark.environment)

    def resume(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """Clear the mark in the store; the mark removed, or None."""
        try:
            return self.store.resume(workflow_id, environment)
        finally:
            self.invalidate(workflow_id, environment)

    def list(self, environment: str | None = None) -> list[WorkflowPause]:
        """Every mark (of one environment), read from the store."""
        return self.store.list(environment)
