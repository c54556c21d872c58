"""Where time is read: the system wall clock (the one place it is read) and a virtual clock
for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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
    """A clock that only moves when told to (thread-safe).

    Listeners are called with the new time each time it moves, in the thread that moved it,
    so what they do happens at a reproducible point of the test (lease renewals, say).
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(now_ms)`` after every move of the clock from now on."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[int], None]) -> None:
        """Stop calling ``listener`` (absent: nothing happens)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _moved(self, now: int) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(now)

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
            now = self._now
        self._moved(now)
        return now

    def set(self, now_ms: int) -> None:
        """Move to ``now_ms`` if it is later than the current time."""
        with self._lock:
            self._now = max(self._now, now_ms)
            now = self._now
        self._moved(now)
