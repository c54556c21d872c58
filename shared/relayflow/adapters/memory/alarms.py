"""An in-memory alarm clock: one alarm per run, fired by whoever advances the virtual clock."""

from __future__ import annotations

import threading


class InMemoryAlarmClock:
    """Holds at most one wake time per run; arming moves it, disarming removes it."""

    def __init__(self) -> None:
        self._alarms: dict[str, int] = {}
        self._lock = threading.Lock()

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Set the run's alarm to ``wake_at_ms`` (replacing any earlier one)."""
        with self._lock:
            self._alarms[run_id] = wake_at_ms

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Remove the run's alarm (only if armed for ``wake_at_ms``, when given): a late
        disarm never removes an alarm armed since for another wake. Absent alarms are fine."""
        with self._lock:
            if wake_at_ms is None or self._alarms.get(run_id) == wake_at_ms:
                self._alarms.pop(run_id, None)

    def armed(self, run_id: str) -> int | None:
        """The wake time the run's alarm is armed at, or None."""
        with self._lock:
            return self._alarms.get(run_id)

    def next_alarm(self) -> tuple[str, int] | None:
        """The earliest armed alarm as ``(run_id, wake_at)``, or None."""
        with self._lock:
            if not self._alarms:
                return None
            run_id = min(self._alarms, key=lambda r: (self._alarms[r], r))
            return run_id, self._alarms[run_id]

    def pending(self) -> list[tuple[str, int]]:
        """Every armed alarm as ``(run_id, wake_at)``, earliest first."""
        with self._lock:
            return sorted(self._alarms.items(), key=lambda item: (item[1], item[0]))

    def take(self, run_id: str, wake_at_ms: int) -> bool:
        """Consume the alarm as it fires (only if it is still armed at ``wake_at_ms``)."""
        with self._lock:
            if self._alarms.get(run_id) != wake_at_ms:
                return False
            del self._alarms[run_id]
            return True
