"""Small fakes shared by the AWS adapter tests."""

from __future__ import annotations

import hashlib


class DictStore:
    """A payload store in a dict that counts writes."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.puts = 0

    def put(self, data: bytes) -> str:
        self.puts += 1
        ref = "sha256:" + hashlib.sha256(data).hexdigest()
        self.data[ref] = data
        return ref

    def get(self, ref: str) -> bytes:
        return self.data[ref]
