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

from relayflow.adapters.aws.alarms import _check_name, _reraise
from relayflow.adapters.aws.errors import error_code, is_aws_error
from relayflow.schedules.reconcile import HostedSchedule

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from relayflow.config import Settings

#: Scheduler substitutes the time a firing was scheduled for here.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


class SchedulerScheduleHost:
    """A :class:`~relayflow.schedules.ScheduleHost` on EventBridge Scheduler.

    Args:
        group: The group holding the recurring schedules (not the run alarms' group).
        target_arn: The drive function.
        role_arn: The role Scheduler assumes to invoke it.
        client_factory: Returns the Scheduler client.
        dlq_arn: Queue for firings Scheduler could not deliver.
        max_retry_attempts: Scheduler's retries of a failed delivery.
        max_event_age_s: How long Scheduler keeps retrying one firing.
    """

    def __init__(
        self,
        *,
        group: str,
        target_arn: str,
        role_arn: str,
        client_factory: Callable[[], EventBridgeSchedulerClient],
        dlq_arn: str | None = None,
        max_retry_attempts: int = 185,
        max_event_age_s: int = 3_600,
    ) -> None:
        _check_name(group, "schedule group")
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn
        self.dlq_arn = dlq_arn
        self._client_factory = client_factory
        self._client: EventBridgeSchedulerClient | None = None
        self._retry = {
            "MaximumRetryAttempts": max_retry_attempts,
            "MaximumEventAgeInSeconds": max_event_age_s,
        }

    @classmethod
    def from_settings(
        cls, settings: Settings, *, client_factory: Callable[[], EventBridgeSchedulerClient]
    ) -> SchedulerScheduleHost:
        """A host on ``RELAYFLOW_RECURRING_SCHEDULE_GROUP`` targeting the drive function."""
        return cls(
            group=settings.require("recurring_schedule_group"),
            target_arn=settings.require("drive_function_arn"),
            role_arn=settings.require("scheduler_role_arn"),
            dlq_arn=settings.dlq_arn,
            client_factory=client_factory,
        )

    def _scheduler(self) -> EventBridgeSchedulerClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def list(self, prefix: str) -> dict[str, HostedSchedule]:
        """Every schedule of the group whose name starts with ``prefix``."""
        client = self._scheduler()
        names: list[str] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"GroupName": self.group, "NamePrefix": prefix}
            if token:
                params["NextToken"] = token
            try:
                page = client.list_schedules(**params)
            except Exception as exc:
                _reraise(exc, f"listing schedules of {self.group}")
            names.extend(
                item["Name"]
                for item in page.get("Schedules", [])
                if item["Name"].startswith(prefix)
            )
            token = page.get("NextToken")
            if not token:
                break
        out: dict[str, HostedSchedule] = {}
        for name in names:
            hosted = self.get(name)
            if hosted is not None:
                out[name] = hosted
        return out

    def get(self, name: str) -> HostedSchedule | None:
        """The hosted schedule ``name``, or None."""
        try:
            found = self._scheduler().get_schedule(Name=name, GroupName=self.group)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ResourceNotFoundException":
                return None
            _reraise(exc, f"reading schedule {name}")
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
        params = self._params(schedule)
        client = self._scheduler()
        try:
            client.create_schedule(**params)
            return
        except Exception as exc:
            if not is_aws_error(exc) or error_code(exc) != "ConflictException":
                _reraise(exc, f"creating schedule {schedule.name}")
        try:
            client.update_schedule(**params)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ResourceNotFoundException":
                client.create_schedule(**params)  # a one-shot fired and deleted itself meanwhile
                return
            _reraise(exc, f"updating schedule {schedule.name}")

    def delete(self, name: str) -> None:
        """Delete ``name``; a missing one counts as deleted."""
        try:
            self._scheduler().delete_schedule(Name=name, GroupName=self.group)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ResourceNotFoundException":
                return
            _reraise(exc, f"deleting schedule {name}")

    def _params(self, schedule: HostedSchedule) -> dict[str, Any]:
        _check_name(schedule.name, "schedule name")
        payload = {**schedule.payload, "scheduledTime": SCHEDULED_TIME}
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": json.dumps(payload, separators=(",", ":"), sort_keys=True),
            "RetryPolicy": dict(self._retry),
        }
        if self.dlq_arn:
            target["DeadLetterConfig"] = {"Arn": self.dlq_arn}
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
