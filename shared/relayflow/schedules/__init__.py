"""Recurring schedules declared on workflows: declarations, cron semantics, fire times,
reconciling onto a host (EventBridge Scheduler or memory), firing and operating them."""

from relayflow.schedules.cron import CronExpression, parse_cron, scheduler_to_unix
from relayflow.schedules.declaration import OVERLAPS, Schedule, schedules_from
from relayflow.schedules.firing import FiringResult, QueuedFiringRelease, ScheduleFirer
from relayflow.schedules.reconcile import (
    HostedSchedule,
    InMemoryScheduleHost,
    ReconcileReport,
    ScheduleHost,
)
from relayflow.schedules.service import ScheduleService, ScheduleView, is_schedule_firing
from relayflow.schedules.spec import ScheduleSpec, manifest_schedules
from relayflow.schedules.state import (
    InMemoryScheduleStateStore,
    ScheduleState,
    ScheduleStateStore,
)
from relayflow.schedules.times import cron_fire_times, expression_fire_times

__all__ = [
    "OVERLAPS",
    "CronExpression",
    "FiringResult",
    "HostedSchedule",
    "InMemoryScheduleHost",
    "InMemoryScheduleStateStore",
    "QueuedFiringRelease",
    "ReconcileReport",
    "Schedule",
    "ScheduleFirer",
    "ScheduleHost",
    "ScheduleService",
    "ScheduleSpec",
    "ScheduleState",
    "ScheduleStateStore",
    "ScheduleView",
    "cron_fire_times",
    "expression_fire_times",
    "is_schedule_firing",
    "manifest_schedules",
    "parse_cron",
    "scheduler_to_unix",
    "schedules_from",
]
