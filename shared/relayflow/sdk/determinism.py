"""Deterministic time, randomness and UUIDs for replayed bodies (reference algorithms).

The seed is FNV-1a (32-bit) over the UTF-16 code units of a string; the generator is
Mulberry32. Both reproduce the reference runtime's values exactly (the golden vectors in
tests/vectors/ pin them).
"""

from __future__ import annotations

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_MASK = 0xFFFFFFFF


def fnv1a_seed(text: str) -> int:
    """FNV-1a 32-bit hash over the UTF-16 code units of ``text`` (the reference's seed)."""
    encoded = text.encode("utf-16-le")
    value = _FNV_OFFSET
    for i in range(0, len(encoded), 2):
        value ^= encoded[i] | (encoded[i + 1] << 8)
        value = (value * _FNV_PRIME) & _MASK
    return value


def _imul(a: int, b: int) -> int:
    return (a * b) & _MASK


class Mulberry32:
    """The Mulberry32 generator: ``next_float()`` yields values in ``[0, 1)``."""

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next_float(self) -> float:
        """The next value in ``[0, 1)``."""
        self._state = (self._state + 0x6D2B79F5) & _MASK
        t = self._state
        t = _imul(t ^ (t >> 15), t | 1)
        t ^= (t + _imul(t ^ (t >> 7), t | 61)) & _MASK
        t &= _MASK
        return ((t ^ (t >> 14)) & _MASK) / 4294967296

    def uuid4(self) -> str:
        """A version-4 UUID from 16 draws, formatted lowercase 8-4-4-4-12."""
        data = bytearray(int(self.next_float() * 256) for _ in range(16))
        data[6] = (data[6] & 0x0F) | 0x40
        data[8] = (data[8] & 0x3F) | 0x80
        hexed = data.hex()
        return f"{hexed[0:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


def generator_for(text: str) -> Mulberry32:
    """A fresh generator seeded with ``fnv1a_seed(text)``."""
    return Mulberry32(fnv1a_seed(text))
