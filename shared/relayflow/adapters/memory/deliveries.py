"""In-memory delivery log: a dict guarded by a lock (one process)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from relayflow.ports import DeliveryClaim, DeliveryEntry


class InMemoryDeliveryLog:
    """The :class:`~relayflow.ports.DeliveryLog` port in memory."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], DeliveryEntry] = {}
        self._lock = threading.Lock()

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
        """Take ``(scope, key)`` unless it is held or answered (see the port)."""
        with self._lock:
            found = self._entries.get((scope, key))
            if found is not None and (found.answer is not None or found.held_until > now_ms):
                return DeliveryClaim(won=False, existing=found)
            if found is not None and found.fingerprint != fingerprint:
                return DeliveryClaim(won=False, existing=found)
            self._entries[(scope, key)] = DeliveryEntry(fingerprint, None, now_ms + hold_ms)
            return DeliveryClaim(won=True)

    def record(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        answer: Mapping[str, Any],
        *,
        lifelong: bool = False,
    ) -> None:
        """Store the first answer of ``(scope, key)``."""
        with self._lock:
            found = self._entries.get((scope, key))
            if found is None or found.answer is not None or found.fingerprint != fingerprint:
                return
            self._entries[(scope, key)] = DeliveryEntry(fingerprint, dict(answer), 0)

    def release(self, scope: str, key: str, fingerprint: str) -> None:
        """Drop an unanswered claim of ``(scope, key)``."""
        with self._lock:
            found = self._entries.get((scope, key))
            if found is not None and found.answer is None and found.fingerprint == fingerprint:
                del self._entries[(scope, key)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
