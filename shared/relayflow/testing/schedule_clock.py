"""Fires hosted schedules from a virtual clock: the test environment's stand-in for
EventBridge Scheduler's recurring schedules (same expressions, same time zones)."""

from __future__ import annotations

from relayflow.protocol import ENVIRONMENTS
from relayflow.schedules.reconcile import InMemoryScheduleHost
from relayflow.schedules.spec import environment_prefix
from relayflow.schedules.times import expression_fire_times, iso_utc


class VirtualScheduleClock:
    """Tracks, per hosted schedule, the last time it was checked, and yields due firings."""

    def __init__(self, host: InMemoryScheduleHost) -> None:
        self._host = host
        self._checked: dict[str, int] = {}

    def next_firing(self) -> tuple[int, str, dict[str, object]] | None:
        """The earliest upcoming firing as ``(time, name, payload)``, or None."""
        best: tuple[int, str, dict[str, object]] | None = None
        for environment in ENVIRONMENTS:
            for name, hosted in self._host.list(environment_prefix(environment)).items():
                if not hosted.enabled:
                    continue
                since = self._host.since.get(name, 0)
                after = max(self._checked.get(name, since), since)
                times = expression_fire_times(
                    hosted.expression, hosted.timezone, hosted.start_ms, after, 1
                )
                if times and (best is None or (times[0], name) < (best[0], best[1])):
                    payload = {**hosted.payload, "scheduledTime": iso_utc(times[0])}
                    best = (times[0], name, payload)
        return best

    def mark(self, name: str, fired_ms: int) -> None:
        """Record that ``name`` fired at ``fired_ms`` (the next firing comes after it)."""
        self._checked[name] = fired_ms
