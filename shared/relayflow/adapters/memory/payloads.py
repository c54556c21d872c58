"""An in-memory content-addressed payload store."""

from __future__ import annotations

import threading

from relayflow.errors import PayloadNotFoundError
from relayflow.payloads import payload_ref, ref_digest


class InMemoryPayloadStore:
    """Values keyed by ``sha256:<hex>`` of their bytes."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        """Store ``data``; equal data gets the same reference."""
        ref = payload_ref(data)
        with self._lock:
            self._blobs[ref] = bytes(data)
        return ref

    def get(self, ref: str) -> bytes:
        """The bytes stored under ``ref``.

        Raises:
            PayloadNotFoundError: Nothing is stored under ``ref``.
            ValidationError: ``ref`` is not a payload reference.
        """
        ref_digest(ref)
        with self._lock:
            blob = self._blobs.get(ref)
        if blob is None:
            raise PayloadNotFoundError(f"no payload stored under {ref}")
        return blob
