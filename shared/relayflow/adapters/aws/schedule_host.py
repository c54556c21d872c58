"""Workflows' recurring schedules as EventBridge Scheduler schedules in their own group.

Each invokes the drive function with ``{"kind": "schedule", "environment", "scheduleId",
"scheduledTime"}``; ``scheduledTime`` is Scheduler's ``<aws.scheduler.scheduled-time>``
context attribute, so a retried delivery carries the same time (and the same run id).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.scheduler_group import SchedulerGroup, check_name
from relayflow.schedules.reconcile import HostedSchedule

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from relayflow.config import Settings

#: Scheduler substitutes the time a firing was scheduled for here.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


class SchedulerScheduleHost(SchedulerGroup):
    """A :class:`~relayflow.schedules.ScheduleHost` on EventBridge Scheduler.

    Args:
        group: The group holding the recurring schedules (not the run alarms' group).
        target_arn: The drive function.
        role_arn: The role Scheduler assumes to invoke it.
        client_factory: Returns the Scheduler client.
        dlq_arn: Queue for firings Scheduler could not deliver.
        max_retry_attempts: Scheduler's retries of a failed delivery.
        max_event_age_s: How long Scheduler keeps retrying one firing (an hour by default).
    """

    default_event_age_s = 3_600

    @classmethod
    def from_settings(
        cls, settings: Settings, *, client_factory: Callable[[], EventBridgeSchedulerClient]
    ) -> SchedulerScheduleHost:
        """A host on ``RELAYFLOW_RECURRING_SCHEDULE_GROUP`` targeting the drive function."""
        return cls(
            group=settings.require("recurring_schedule_group"),
            client_factory=client_factory,
            **cls._drive_target(settings),
        )

    def list(self, prefix: str) -> dict[str, HostedSchedule]:
        """Every schedule of the group whose name starts with ``prefix``."""
        names = self._schedule_names(prefix, f"listing schedules of {self.group}")
        out: dict[str, HostedSchedule] = {}
        for name in names:
            hosted = self.get(name)
            if hosted is not None:
                out[name] = hosted
        return out

    def get(self, name: str) -> HostedSchedule | None:
        """The hosted schedule ``name``, or None."""
        found = self._read_schedule(name, f"reading schedule {name}")
        if found is None:
            return None
        try:
            payload = json.loads(found.get("Target", {}).get("Input") or "{}")
        except ValueError:
            payload = {}
        if not isinstance(payload, dict):
            payload = {}
        payload.pop("scheduledTime", None)
        start = found.get("StartDate")
        return HostedSchedule(
            name=name,
            expression=str(found.get("ScheduleExpression", "")),
            timezone=str(found.get("ScheduleExpressionTimezone") or "UTC"),
            enabled=found.get("State", "ENABLED") == "ENABLED",
            payload=payload,
            start_ms=int(start.timestamp() * 1000) if isinstance(start, datetime) else None,
        )

    def put(self, schedule: HostedSchedule) -> None:
        """Create the schedule, or update it when it exists."""
        self._put_schedule(self._params(schedule), f"writing schedule {schedule.name}")

    def delete(self, name: str) -> None:
        """Delete ``name``; a missing one counts as deleted."""
        self._delete_schedule(name, f"deleting schedule {name}")

    def _params(self, schedule: HostedSchedule) -> dict[str, Any]:
        check_name(schedule.name, "schedule name")
        payload = {**schedule.payload, "scheduledTime": SCHEDULED_TIME}
        target = self._target(json.dumps(payload, separators=(",", ":"), sort_keys=True))
        params: dict[str, Any] = {
            "Name": schedule.name,
            "GroupName": self.group,
            "ScheduleExpression": schedule.expression,
            "ScheduleExpressionTimezone": schedule.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if schedule.enabled else "DISABLED",
            "Target": target,
            "ActionAfterCompletion": "DELETE" if schedule.expression.startswith("at(") else "NONE",
        }
        if schedule.start_ms is not None:
            params["StartDate"] = datetime.fromtimestamp(schedule.start_ms / 1000, tz=UTC)
        return params
