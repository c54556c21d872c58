"""Wait registration facts, wake-time computation and time-based resolutions.

The facts a wait gets at its first registration (wake time, deadline, heartbeat deadline)
are kept in ``journal.waitpointsRegistered`` and never move when a replay re-registers it.
Waits on attached children also get a periodic check time (``RunRecord.reconcile_at``).
"""

from __future__ import annotations

from typing import Any

from relayflow.core.record import RunRecord
from relayflow.protocol import (
    SerializedError,
    Waitpoint,
    WaitpointRegistration,
    WaitpointResolution,
)

WAIT_KINDS_WITH_DEADLINE = frozenset({"EVENT", "SIGNAL", "MANUAL"})


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def first_registration(wait: Waitpoint, now: int) -> WaitpointRegistration:
    """The facts fixed when ``wait`` is registered for the first time at ``now``."""
    meta = wait.meta
    name = meta.get("name")
    registration = WaitpointRegistration(
        kind=wait.kind, registered_at=now, name=name if isinstance(name, str) else None
    )
    if wait.kind == "DATETIME":
        wake_at = _as_int(meta.get("wakeAt"))
        if wake_at is None:
            duration = _as_int(meta.get("durationMs"))
            if duration is None:
                duration = wait.timeout_ms or 0
            wake_at = now + max(0, duration)
        registration.wake_at = wake_at
    elif wait.kind in WAIT_KINDS_WITH_DEADLINE:
        if wait.timeout_ms is not None:
            registration.deadline = now + max(0, wait.timeout_ms)
        heartbeat = _as_int(meta.get("heartbeatTimeoutMs"))
        if wait.kind == "MANUAL" and heartbeat is not None:
            registration.heartbeat_deadline = now + max(0, heartbeat)
    return registration


def register_waits(record: RunRecord, waits: list[Waitpoint], now: int) -> None:
    """Record first-registration facts for waits not seen before (mutates ``record``)."""
    registered = record.journal.waitpoints_registered
    for wait in waits:
        if wait.client_waitpoint_id not in registered:
            registered[wait.client_waitpoint_id] = first_registration(wait, now)


def time_resolution(
    wait: Waitpoint, reg: WaitpointRegistration, now: int
) -> WaitpointResolution | None:
    """The resolution a wait gets from time alone at ``now``, or None if nothing is due.

    DATETIME waits resolve at their wake time; event, signal and token waits time out at
    their deadline, and tokens also at a missed heartbeat.
    """
    if wait.kind == "DATETIME":
        if reg.wake_at is not None and reg.wake_at <= now:
            return WaitpointResolution(kind="DATETIME", resolved_at=now, source="replay")
        return None
    if reg.deadline is not None and reg.deadline <= now:
        return WaitpointResolution(
            kind=wait.kind, resolved_at=now, source="timeout", timed_out=True
        )
    if reg.heartbeat_deadline is not None and reg.heartbeat_deadline <= now:
        return WaitpointResolution(
            kind=wait.kind,
            resolved_at=now,
            source="timeout",
            timed_out=True,
            error=SerializedError(
                category="USER_ERROR",
                code="HEARTBEAT_TIMEOUT",
                message=f"token wait {wait.client_waitpoint_id} missed its heartbeat",
            ),
        )
    return None


def is_detached(wait: Waitpoint) -> bool:
    """True for a RUN wait whose child runs on its own (the wait resolves at once)."""
    return bool(wait.meta.get("detach", False))


def linked_child_waits(record: RunRecord) -> list[Waitpoint]:
    """The pending RUN waits an attached child resolves when it ends.

    Starting such a child and resuming the parent when it ends are effects applied after a
    save: a process that dies in between loses them, so these waits are checked again
    every ``CoreSettings.child_reconcile_ms`` while they are pending.
    """
    resolved = record.journal.waitpoints_resolved
    return [
        w
        for w in record.pending_waitpoints
        if w.kind == "RUN" and not is_detached(w) and w.client_waitpoint_id not in resolved
    ]


def reconcile_time(record: RunRecord) -> int | None:
    """When the run's waits on attached children are next checked (None: nothing to check).

    Only a waiting run has such a time: a running one is invoked anyway, and a run being
    cancelled waits on nothing.
    """
    if record.is_terminal or record.status != "waiting" or record.cancel_request is not None:
        return None
    if record.reconcile_at is None or not linked_child_waits(record):
        return None
    return record.reconcile_at


def next_wait_time(record: RunRecord) -> int | None:
    """The earliest wake, retry, deadline or heartbeat time among the pending waits."""
    times: list[int] = []
    registered = record.journal.waitpoints_registered
    for wait in record.pending_waitpoints:
        reg = registered.get(wait.client_waitpoint_id)
        if reg is None:
            continue
        for t in (reg.wake_at, reg.deadline, reg.heartbeat_deadline):
            if t is not None:
                times.append(t)
    return min(times) if times else None


def compute_wake_at(record: RunRecord, now: int) -> int | None:
    """When the run next needs attention (what its alarm is armed at; None if never)."""
    if record.is_terminal:
        return None
    times: list[int] = []
    if record.timeout_deadline is not None:
        times.append(record.timeout_deadline)
    if record.status == "running":
        retry_at = record.dispatch_retry.next_attempt_at
        times.append(retry_at if retry_at is not None else now)
    else:
        for t in (next_wait_time(record), reconcile_time(record)):
            if t is not None:
                times.append(t)
    return min(times) if times else None
