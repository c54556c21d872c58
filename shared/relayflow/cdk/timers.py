"""Precise timers and recurring schedules for relayflow: the alarm queue that delivers
wake-ups less than 15 minutes ahead to the drive function (per-message delays, partial batch
failures, the deployment's dead-letter queue behind it) and the schedule group holding the
workflows' recurring schedules."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from relayflow.cdk.schedule_groups import HoldsScheduleGroup

__all__ = ["RelayflowTimers"]

#: Deliveries of one alarm message before it goes to the dead-letter queue.
MAX_RECEIVES = 5


class RelayflowTimers(HoldsScheduleGroup, Construct):
    """The alarm queue (consumed by the drive function) and the recurring schedule group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dead_letter_queue: sqs.IQueue,
        drive_timeout: Duration,
        removal_policy: RemovalPolicy,
    ) -> None:
        """Create the queue (failed messages move to `dead_letter_queue`) and the group."""
        super().__init__(scope, construct_id)
        self.alarm_queue = sqs.Queue(
            self,
            "AlarmQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            # Lambda needs the queue to hide a message at least as long as the function runs.
            visibility_timeout=drive_timeout.plus(Duration.seconds(30)),
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dead_letter_queue, max_receive_count=MAX_RECEIVES
            ),
            removal_policy=removal_policy,
        )
        self._create_group(self, "RecurringGroup")

    def consume_with(self, drive: lambda_.IFunction) -> None:
        """Let `drive` (the drive function's alias) consume the alarm queue, reporting only
        the failed messages of a batch."""
        drive.add_event_source(
            sources.SqsEventSource(
                self.alarm_queue,
                batch_size=10,
                max_batching_window=Duration.seconds(0),
                report_batch_item_failures=True,
            )
        )
