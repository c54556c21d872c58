"""What a construct holding an EventBridge Scheduler schedule group gives the others: the
group, its name, and an ARN pattern covering its schedules (for IAM statements)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

__all__ = ["HoldsScheduleGroup"]


class HoldsScheduleGroup:
    """Mixed into a construct that creates one schedule group with :meth:`_create_group`."""

    schedule_group: scheduler.ScheduleGroup

    def _create_group(self, scope: Construct, construct_id: str) -> None:
        # Schedules are runtime data (alarms, reconciled schedules): the group goes with them.
        self.schedule_group = scheduler.ScheduleGroup(
            scope, construct_id, removal_policy=RemovalPolicy.DESTROY
        )

    @property
    def schedule_group_name(self) -> str:
        """Name of the group."""
        return self.schedule_group.schedule_group_name

    def schedule_arn_pattern(self) -> str:
        """ARN matching every schedule of the group, whatever its name."""
        return Stack.of(self.schedule_group).format_arn(
            service="scheduler",
            resource="schedule",
            resource_name=f"{self.schedule_group_name}/*",
        )
