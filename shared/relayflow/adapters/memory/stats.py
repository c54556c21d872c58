"""In-memory hourly rollups of finished runs (one process), with the semantics of the
DynamoDB store: each end counted once, hours read by range."""

from __future__ import annotations

import copy
import threading

from relayflow.stats.rollup import HourRollup, RunEnd, hour_of


class InMemoryRunStatistics:
    """The :class:`~relayflow.stats.rollup.RunStatistics` port in memory."""

    def __init__(self) -> None:
        self._rollups: dict[tuple[str, str, int], HourRollup] = {}
        self._counted: set[str] = set()
        self._lock = threading.Lock()

    def record_end(self, end: RunEnd) -> None:
        """Add ``end`` to its hour unless its ``end_key`` was counted before."""
        with self._lock:
            if end.end_key in self._counted:
                return
            self._counted.add(end.end_key)
            key = (end.environment, end.workflow_id, hour_of(end.ended_at))
            self._rollups.setdefault(key, HourRollup(hour=key[2])).add(end)

    def hours(
        self, environment: str, workflow_id: str, since_ms: int, until_ms: int
    ) -> list[HourRollup]:
        """The workflow's rollups from the hour of ``since_ms`` to that of ``until_ms``."""
        first, last = hour_of(since_ms), hour_of(until_ms)
        with self._lock:
            found = [
                copy.deepcopy(rollup)
                for (env, workflow, hour), rollup in self._rollups.items()
                if env == environment and workflow == workflow_id and first <= hour <= last
            ]
        return sorted(found, key=lambda rollup: rollup.hour)
