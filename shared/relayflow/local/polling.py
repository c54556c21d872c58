"""A background thread that calls one poll function until stopped: the loop shared by the
dev stack's alarm scheduler, recurring scheduler and queue poller."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_log = logging.getLogger("relayflow.local")


class PollingThread:
    """Calls ``poll`` every ``interval_s`` in a daemon thread; a poll that returns True (more
    work may be waiting) is followed by the next one at once. Failures are logged.

    ``wait_turn`` is called before each poll and may block: the dev stack lets the API
    requests being worked on go first (:class:`relayflow.local.api_first.ApiFirst`).
    """

    def __init__(
        self,
        name: str,
        poll: Callable[[], bool],
        interval_s: float,
        *,
        wait_turn: Callable[[], object] = lambda: None,
    ) -> None:
        self._name = name
        self._poll = poll
        self._interval_s = interval_s
        self._wait_turn = wait_turn
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start polling."""
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling and wait (up to 5 s) for the poll in progress."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._wait_turn()
                busy = self._poll()
            except Exception:
                _log.exception("%s: poll failed", self._name)
                busy = False
            if not busy:
                self._stop.wait(self._interval_s)
