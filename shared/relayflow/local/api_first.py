"""Drives and step invocations start once the API requests being served are answered.

On AWS each function has CPUs of its own: a burst of API calls is answered by as many api
containers whatever the drive and worker functions are doing. The local stack runs all of
them in one interpreter, and a drive that goes on invoking steps during a burst takes the
interpreter from the requests of the burst. So here the drive and worker functions start an
invocation, and the local scheduler and queue a poll, when no API request is being worked
on, or after waiting ``max_wait_s``, so that a steady stream of API calls still lets runs
move. A request that waits does not count while it waits: a long poll of a run's stream,
and a trigger between two reads of the run it waits to settle (:meth:`ApiFirst.sleep_ms`),
whose drive would otherwise wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["MAX_WAIT_S", "ApiFirst", "is_long_poll"]

#: Longest time a step invocation waits for the API requests being served.
MAX_WAIT_S = 1.0


def is_long_poll(path: str) -> bool:
    """Whether ``path`` is a run stream's long poll (``GET /api/runs/{id}/stream``)."""
    return path.startswith("/api/runs/") and path.endswith("/stream")


class ApiFirst:
    """Counts the API requests being worked on; lets step invocations wait for none.

    Args:
        max_wait_s: Longest time :meth:`wait_for_api` waits.
        sleep: Blocks for the given seconds (:meth:`sleep_ms`).
    """

    def __init__(
        self, *, max_wait_s: float = MAX_WAIT_S, sleep: Callable[[float], object] = time.sleep
    ) -> None:
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._serving = 0
        self._changed = threading.Condition()
        self._counted = threading.local()

    @property
    def serving(self) -> int:
        """API requests being worked on now."""
        with self._changed:
            return self._serving

    @contextmanager
    def serving_api(self) -> Iterator[None]:
        """Count the block as an API request being worked on."""
        self._add(1)
        self._counted.active = True
        try:
            yield
        finally:
            self._counted.active = False
            self._add(-1)

    def sleep_ms(self, ms: float) -> None:
        """Sleep ``ms`` milliseconds; an API request of this thread does not count meanwhile."""
        counted = getattr(self._counted, "active", False)
        if counted:
            self._add(-1)
        try:
            self._sleep(ms / 1000)
        finally:
            if counted:
                self._add(1)

    def _add(self, change: int) -> None:
        with self._changed:
            self._serving += change
            if not self._serving:
                self._changed.notify_all()

    def wait_for_api(self) -> bool:
        """Wait until no API request is being worked on, at most ``max_wait_s``.

        Returns:
            ``False`` when the wait ran out with requests still being served.
        """
        with self._changed:
            return self._changed.wait_for(lambda: not self._serving, timeout=self._max_wait_s)
