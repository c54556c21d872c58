"""Clocks: the system wall clock (the one place it is read) and a virtual clock for tests."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


def wall_ms() -> int:
    """The wall clock in epoch milliseconds (the only read of it; lint bans the others)."""
    return time.time_ns() // 1_000_000


def wall_s() -> float:
    """The wall clock in epoch seconds."""
    return wall_ms() / 1000


def utc_now() -> datetime:
    """The wall clock as an aware UTC datetime."""
    return datetime.fromtimestamp(wall_ms() / 1000, tz=UTC)


class SystemClock:
    """The wall clock, in epoch milliseconds."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        return wall_ms()


class VirtualClock:
    """A clock that only moves when told to (thread-safe)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The current virtual time."""
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0); returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        """Move to ``now_ms`` if it is later than the current time."""
        with self._lock:
            self._now = max(self._now, now_ms)
