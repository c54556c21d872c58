"""Time for relayflow: the run-alarm schedule group, its role, the DLQ and the sweeper schedule."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from relayflow.cdk.schedule_groups import HoldsScheduleGroup
from relayflow.cdk.suppressions import acknowledge

__all__ = ["RelayflowScheduling"]

_SCHEDULER = "scheduler.amazonaws.com"


def rate_expression(interval: Duration) -> str:
    """Scheduler's rate expression for ``interval`` (whole minutes, at least one).

    Raises:
        ValueError: ``interval`` is under a minute or not whole minutes.
    """
    minutes = interval.to_minutes(integral=False)
    if minutes < 1 or minutes != int(minutes):
        raise ValueError(f"the sweeper's interval must be whole minutes, at least one: {minutes}")
    return "rate(1 minute)" if minutes == 1 else f"rate({int(minutes)} minutes)"


class RelayflowScheduling(HoldsScheduleGroup, Construct):
    """The schedule group run alarms live in, the roles Scheduler assumes, and the DLQ.

    Run alarms are created at run time by the orchestrator (one one-time schedule per wake of
    a waiting run) in `schedule_group`, assuming `alarm_role`, whose only permission is to
    invoke the drive function. Deliveries Scheduler gives up on land in `dead_letter_queue`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        drive_function_arn: str,
        removal_policy: RemovalPolicy,
    ) -> None:
        """Create the group, the alarm role and the DLQ; `drive_function_arn` is the target."""
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=removal_policy,
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of Scheduler deliveries and of failed "
            "asynchronous invocations; a queue behind it would only move the same messages.",
        )
        self._create_group(self, "AlarmGroup")
        self.alarm_role = self._invoke_role("AlarmRole", drive_function_arn)

    def add_sweeper_schedule(self, sweeper: lambda_.IFunction, interval: Duration) -> None:
        """Invoke `sweeper` every `interval` through its own role (it may invoke only it)."""
        role = self._invoke_role("SweeperScheduleRole", sweeper.function_arn)
        scheduler.CfnSchedule(
            self,
            "SweeperSchedule",
            description="relayflow sweeper: drives runs whose alarm was missed or holder died",
            schedule_expression=rate_expression(interval),
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=sweeper.function_arn,
                role_arn=role.role_arn,
                input="{}",
                dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
                    arn=self.dead_letter_queue.queue_arn
                ),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_event_age_in_seconds=int(interval.to_seconds()),
                    maximum_retry_attempts=2,
                ),
            ),
        )

    def _invoke_role(self, construct_id: str, function_arn: str) -> iam.Role:
        stack = Stack.of(self)
        role = iam.Role(
            self,
            construct_id,
            assumed_by=iam.ServicePrincipal(
                _SCHEDULER,
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description="EventBridge Scheduler: invoke one relayflow function",
            inline_policies={
                "Invoke": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            actions=["lambda:InvokeFunction"], resources=[function_arn]
                        )
                    ]
                )
            },
        )
        # Scheduler sends undeliverable invocations to the DLQ as this role; the queue's own
        # policy allows it, so the role itself keeps a single permission.
        self.dead_letter_queue.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage"],
                principals=[iam.ArnPrincipal(role.role_arn)],
                resources=[self.dead_letter_queue.queue_arn],
            )
        )
        return role
