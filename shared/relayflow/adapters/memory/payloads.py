"""An in-memory content-addressed payload store."""

from __future__ import annotations

import hashlib
import threading

from relayflow.errors import ValidationError


class InMemoryPayloadStore:
    """Values keyed by ``sha256:<hex>`` of their bytes."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        """Store ``data``; equal data gets the same reference."""
        ref = "sha256:" + hashlib.sha256(data).hexdigest()
        with self._lock:
            self._blobs[ref] = bytes(data)
        return ref

    def get(self, ref: str) -> bytes:
        """The bytes stored under ``ref``; raises ``ValidationError`` for unknown refs."""
        with self._lock:
            blob = self._blobs.get(ref)
        if blob is None:
            raise ValidationError(f"no payload stored under {ref!r}")
        return blob
