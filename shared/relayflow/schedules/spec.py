"""The schedules a manifest declares for one environment, their ids, their Scheduler names
and their fire times; and the checks a manifest's ``schedules[]`` entries must pass."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.errors import RelayflowError
from relayflow.schedules.declaration import Schedule
from relayflow.schedules.state import ScheduleState
from relayflow.schedules.times import cron_fire_times, interval_fire_times

NAME_LIMIT = 64
_UNSAFE = re.compile(r"[^0-9a-zA-Z\-_.]")
_NAME_PREFIX = "rfs"


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule as declared in an environment's manifest.

    Attributes:
        schedule_id: Deterministic id (see :meth:`Schedule.schedule_id`).
        workflow_id: The workflow each firing starts.
        environment: The environment the runs start in.
        schedule: The declaration.
    """

    schedule_id: str
    workflow_id: str
    environment: str
    schedule: Schedule

    @property
    def scheduler_name(self) -> str:
        """The EventBridge Scheduler name: ``rfs-<env initial>-<readable>-<hash>``, <= 64."""
        return scheduler_name(
            self.environment, self.workflow_id, self.schedule.name, self.schedule_id
        )

    def fire_times(self, state: ScheduleState | None, after_ms: int, count: int) -> list[int]:
        """The next ``count`` fire times after ``after_ms`` (none when paused or fired)."""
        if state is not None and (state.paused or state.fired):
            return []
        kind = self.schedule.kind
        if kind == "cron":
            return cron_fire_times(
                self.schedule.cron_expression(), self.schedule.timezone, after_ms, count
            )
        if kind == "every":
            anchor = state.anchor_ms if state is not None else after_ms
            return interval_fire_times(anchor, self.schedule.interval_ms(), after_ms, count)
        at = self.schedule.at_ms()
        return [at] if at > after_ms and count > 0 else []


def scheduler_name(environment: str, workflow_id: str, name: str | None, schedule_id: str) -> str:
    """A Scheduler-safe name (``[0-9a-zA-Z-_.]``, at most 64 characters) for a schedule."""
    digest = hashlib.sha256(f"{environment}\n{schedule_id}".encode()).hexdigest()[:12]
    head = f"{_NAME_PREFIX}-{environment[:1]}-"
    readable = _UNSAFE.sub("_", f"{workflow_id}.{name}" if name else workflow_id)
    room = NAME_LIMIT - len(head) - 1 - len(digest)
    return f"{head}{readable[:room]}-{digest}"


def environment_prefix(environment: str) -> str:
    """The name prefix shared by every schedule of ``environment``."""
    return f"{_NAME_PREFIX}-{environment[:1]}-"


def manifest_schedules(manifest: Mapping[str, Any] | None, environment: str) -> list[ScheduleSpec]:
    """The schedules ``manifest`` declares that apply to ``environment`` (enabled, listed)."""
    out: list[ScheduleSpec] = []
    for workflow_id, schedule in _declared(manifest):
        if schedule.applies_to(environment):
            out.append(
                ScheduleSpec(schedule.schedule_id(workflow_id), workflow_id, environment, schedule)
            )
    return out


def find_schedule(
    manifest: Mapping[str, Any] | None, environment: str, schedule_id: str
) -> ScheduleSpec | None:
    """The applying schedule with ``schedule_id``, or None."""
    return next(
        (s for s in manifest_schedules(manifest, environment) if s.schedule_id == schedule_id),
        None,
    )


def _declared(manifest: Mapping[str, Any] | None) -> list[tuple[str, Schedule]]:
    if not manifest:
        return []
    out: list[tuple[str, Schedule]] = []
    for wf in manifest.get("workflows") or []:
        if not isinstance(wf, Mapping) or not isinstance(wf.get("id"), str):
            continue
        for entry in wf.get("schedules") or []:
            out.append((wf["id"], Schedule.from_value(entry)))
    return out


def schedule_errors(workflows: Any) -> list[str]:
    """Why the ``schedules`` of manifest ``workflows`` cannot be registered (empty: fine)."""
    if not isinstance(workflows, list):
        return []
    errors: list[str] = []
    seen: dict[str, str] = {}
    for i, wf in enumerate(workflows):
        if not isinstance(wf, Mapping) or "schedules" not in wf:
            continue
        entries = wf["schedules"]
        if not isinstance(entries, list):
            errors.append(f"workflows.{i}.schedules: must be a list")
            continue
        for j, entry in enumerate(entries):
            where = f"workflows.{i}.schedules.{j}"
            try:
                schedule = Schedule.from_value(entry)
            except RelayflowError as exc:
                errors.append(f"{where}: {exc.message}")
                continue
            schedule_id = schedule.schedule_id(str(wf.get("id")))
            if schedule_id in seen:
                errors.append(
                    f"{where}: the same schedule as {seen[schedule_id]} (give each a distinct name)"
                )
            seen[schedule_id] = where
    return errors
