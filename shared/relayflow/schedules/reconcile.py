"""Bringing the place where recurring schedules live (EventBridge Scheduler, or memory) in
line with an environment's current manifest: create, update and delete, idempotently.

Concurrent registrations converge: each reconcile re-reads the current manifest when it is
done and goes again if it changed meanwhile, so the last registration's content wins.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from relayflow.errors import StaleScheduleError
from relayflow.ports import Clock, ManifestStore
from relayflow.schedules.spec import ScheduleSpec, environment_prefix, manifest_schedules
from relayflow.schedules.state import ScheduleState, ScheduleStateStore
from relayflow.schedules.times import (
    at_expression,
    expression_interval_ms,
    interval_fire_times,
    rate_expression,
)

_ROUNDS = 5


@dataclass(frozen=True)
class HostedSchedule:
    """A recurring schedule as the host keeps it.

    Attributes:
        name: The host's name for it (see :func:`relayflow.schedules.spec.scheduler_name`).
        expression: Scheduler's ``cron(...)``, ``rate(...)`` or ``at(...)``.
        timezone: The IANA zone the expression is evaluated in.
        enabled: False while paused.
        payload: What each firing delivers: ``{"kind": "schedule", "environment",
            "scheduleId"}``; the host adds ``scheduledTime`` (ISO 8601 UTC).
        start_ms: The first occurrence of a ``rate`` schedule.
    """

    name: str
    expression: str
    timezone: str
    enabled: bool
    payload: Mapping[str, Any]
    start_ms: int | None = None


class ScheduleHost(Protocol):
    """Where recurring schedules live and fire from."""

    def list(self, prefix: str) -> dict[str, HostedSchedule]:
        """Every hosted schedule whose name starts with ``prefix``."""
        ...

    def put(self, schedule: HostedSchedule) -> None:
        """Create or replace ``schedule`` (by name)."""
        ...

    def delete(self, name: str) -> None:
        """Delete a schedule; a missing one counts as deleted."""
        ...


@dataclass
class ReconcileReport:
    """What one reconcile changed, by Scheduler name."""

    version_id: str | None = None
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def same_schedule(a: HostedSchedule, b: HostedSchedule) -> bool:
    """Whether two hosted forms fire alike (rate start dates on the same grid count as one)."""
    if a.start_ms is None or b.start_ms is None or a.start_ms == b.start_ms:
        return a == b
    interval = expression_interval_ms(a.expression)
    return (
        interval is not None
        and (a.start_ms - b.start_ms) % interval == 0
        and replace(a, start_ms=b.start_ms) == b
    )


def firing_payload(spec: ScheduleSpec) -> dict[str, Any]:
    """The payload each firing of ``spec`` carries (the host adds ``scheduledTime``)."""
    return {"kind": "schedule", "environment": spec.environment, "scheduleId": spec.schedule_id}


def hosted_form(spec: ScheduleSpec, state: ScheduleState, now_ms: int) -> HostedSchedule | None:
    """How ``spec`` should be hosted given its state; None when nothing should be."""
    schedule = spec.schedule
    start_ms: int | None = None
    timezone = schedule.timezone or "UTC"
    if schedule.kind == "cron":
        expression = schedule.cron_expression().scheduler_expression()
    elif schedule.kind == "every":
        interval = schedule.interval_ms()
        expression = rate_expression(interval)
        # The next firing on the anchor's grid: Scheduler refuses start dates in the past.
        start_ms = interval_fire_times(state.anchor_ms, interval, now_ms, 1)[0]
        timezone = "UTC"
    else:
        at = schedule.at_ms()
        if state.fired or at <= now_ms:
            return None  # a one-shot that fired, or whose time passed, never fires again
        expression = at_expression(at)
        timezone = "UTC"
    return HostedSchedule(
        name=spec.scheduler_name,
        expression=expression,
        timezone=timezone,
        enabled=not state.paused,
        payload=firing_payload(spec),
        start_ms=start_ms,
    )


def ensure_state(states: ScheduleStateStore, spec: ScheduleSpec, now_ms: int) -> ScheduleState:
    """The stored state of ``spec``, created (anchored at ``now_ms``) when absent."""
    found = states.get(spec.environment, spec.schedule_id)
    if found is not None:
        return found
    fresh = ScheduleState(spec.environment, spec.schedule_id, anchor_ms=now_ms)
    try:
        return states.save(fresh, expected_version=0)
    except StaleScheduleError as exc:
        existing: ScheduleState = exc.existing
        return existing


def apply_manifest(
    manifest: Mapping[str, Any] | None,
    environment: str,
    *,
    states: ScheduleStateStore,
    host: ScheduleHost,
    now_ms: int,
) -> ReconcileReport:
    """One pass: make the host hold exactly the hosted forms of ``manifest``'s schedules."""
    report = ReconcileReport(version_id=(manifest or {}).get("versionId"))
    desired: dict[str, HostedSchedule] = {}
    for spec in manifest_schedules(manifest, environment):
        hosted = hosted_form(spec, ensure_state(states, spec, now_ms), now_ms)
        if hosted is not None:
            desired[hosted.name] = hosted
    existing = host.list(environment_prefix(environment))
    for name, hosted in sorted(desired.items()):
        current = existing.get(name)
        if current is not None and same_schedule(current, hosted):
            report.unchanged.append(name)
            continue
        host.put(hosted)
        (report.created if current is None else report.updated).append(name)
    for name in sorted(set(existing) - set(desired)):
        host.delete(name)
        report.deleted.append(name)
    return report


def reconcile(
    environment: str,
    *,
    manifests: ManifestStore,
    states: ScheduleStateStore,
    host: ScheduleHost,
    clock: Clock,
) -> ReconcileReport:
    """Reconcile ``environment``'s schedules onto ``host`` until its manifest stops changing."""
    total = ReconcileReport()
    for _ in range(_ROUNDS):
        manifest = manifests.get_current(environment)
        report = apply_manifest(
            manifest, environment, states=states, host=host, now_ms=clock.now_ms()
        )
        total.version_id = report.version_id
        total.created += [n for n in report.created if n not in total.created]
        total.updated += [n for n in report.updated if n not in total.updated]
        total.deleted += [n for n in report.deleted if n not in total.deleted]
        total.unchanged = report.unchanged
        after = manifests.get_current(environment)
        if (after or {}).get("versionId") == report.version_id:
            break
    return total


class InMemoryScheduleHost:
    """Hosted schedules in a dict; ``since`` records when each was last put (the test
    environment fires schedules from there)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._schedules: dict[str, HostedSchedule] = {}
        self.since: dict[str, int] = {}
        self._lock = threading.Lock()

    def list(self, prefix: str) -> dict[str, HostedSchedule]:
        """Hosted schedules by name."""
        with self._lock:
            return {n: s for n, s in self._schedules.items() if n.startswith(prefix)}

    def put(self, schedule: HostedSchedule) -> None:
        """Create or replace."""
        with self._lock:
            self._schedules[schedule.name] = schedule
            self.since[schedule.name] = self._clock.now_ms()

    def delete(self, name: str) -> None:
        """Delete (missing is fine)."""
        with self._lock:
            self._schedules.pop(name, None)
            self.since.pop(name, None)
