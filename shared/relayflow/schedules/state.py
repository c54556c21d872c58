"""What relayflow remembers about each schedule between firings (pause, the run it started,
the firing waiting for it, the interval anchor), and the port that stores it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Protocol

from relayflow.errors import StaleScheduleError


@dataclass(frozen=True)
class ScheduleState:
    """One schedule's state in one environment.

    Attributes:
        environment: The environment.
        schedule_id: The schedule id.
        anchor_ms: When the schedule was first registered (``every`` counts from it).
        paused: Paused by an operator; survives re-registration.
        last_scheduled_ms: The latest scheduled time a firing was handled for.
        active_run_id: The run the last started firing created.
        claimed_at_ms: When that run was claimed (a missing run younger than a grace period
            counts as starting).
        queued_ms: The scheduled time of a firing waiting for the active run (``queue``).
        fired: A one-shot (``at``) schedule has fired.
        last_run_id: The run the latest firing started, scheduled or "trigger now" (its
            trigger tells which), whatever the overlap policy.
        version: Optimistic-concurrency version (0: not stored yet).
    """

    environment: str
    schedule_id: str
    anchor_ms: int
    paused: bool = False
    last_scheduled_ms: int | None = None
    active_run_id: str | None = None
    claimed_at_ms: int | None = None
    queued_ms: int | None = None
    fired: bool = False
    last_run_id: str | None = None
    version: int = 0

    def but(self, **changes: object) -> ScheduleState:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)  # type: ignore[arg-type]


class ScheduleStateStore(Protocol):
    """Schedule states with conditional writes."""

    def get(self, environment: str, schedule_id: str) -> ScheduleState | None: ...

    def list(self, environment: str) -> list[ScheduleState]: ...

    def save(self, state: ScheduleState, *, expected_version: int) -> ScheduleState:
        """Store ``state`` if the stored version is ``expected_version`` (0: absent); returns
        it with the new version. Raises ``StaleScheduleError(existing)`` otherwise."""
        ...


class InMemoryScheduleStateStore:
    """Schedule states in a dict (tests, ``WorkflowTestEnv``)."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], ScheduleState] = {}
        self._lock = threading.Lock()

    def get(self, environment: str, schedule_id: str) -> ScheduleState | None:
        """The stored state, or None."""
        with self._lock:
            return self._states.get((environment, schedule_id))

    def list(self, environment: str) -> list[ScheduleState]:
        """Every state of ``environment``, by schedule id."""
        with self._lock:
            found = [s for (env, _), s in self._states.items() if env == environment]
        return sorted(found, key=lambda s: s.schedule_id)

    def save(self, state: ScheduleState, *, expected_version: int) -> ScheduleState:
        """Conditional put on the version."""
        key = (state.environment, state.schedule_id)
        with self._lock:
            current = self._states.get(key)
            if (current.version if current else 0) != expected_version:
                raise StaleScheduleError(current)
            saved = state.but(version=expected_version + 1)
            self._states[key] = saved
            return saved
