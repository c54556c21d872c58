"""Alarms of a relayflow deployment: function errors and throttles, DLQ depth, API 5xx."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from relayflow.cdk.suppressions import acknowledge

__all__ = ["RelayflowMonitoring"]

_PERIOD = Duration.minutes(5)


class RelayflowMonitoring(Construct):
    """CloudWatch alarms, optionally notifying an SNS topic (created for an e-mail address)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_queue: sqs.IQueue,
        http_api: apigwv2.HttpApi,
        alarm_email: str | None,
        alarm_topic: sns.ITopic | None,
    ) -> None:
        """Alarm on every function in `functions`, the DLQ and the API."""
        super().__init__(scope, construct_id)
        self.topic = alarm_topic or (self._email_topic(alarm_email) if alarm_email else None)
        self.alarms: list[cloudwatch.Alarm] = []
        for name, function in functions.items():
            self._alarm(
                f"{name.capitalize()}Errors",
                function.metric_errors(period=_PERIOD, statistic="Sum"),
                f"relayflow {name} function raised errors",
            )
            self._alarm(
                f"{name.capitalize()}Throttles",
                function.metric_throttles(period=_PERIOD, statistic="Sum"),
                f"relayflow {name} function was throttled",
            )
        self._alarm(
            "DeadLetterDepth",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=_PERIOD, statistic="Maximum"
            ),
            "relayflow alarm or async drive deliveries failed and wait in the dead-letter queue",
        )
        self._alarm(
            "ApiServerErrors",
            http_api.metric_server_error(period=_PERIOD, statistic="Sum"),
            "relayflow HTTP API answered 5xx",
        )

    def _email_topic(self, address: str) -> sns.Topic:
        topic = sns.Topic(self, "AlarmTopic", display_name="relayflow alarms", enforce_ssl=True)
        topic.add_subscription(subscriptions.EmailSubscription(address))
        acknowledge(
            topic,
            "AwsSolutions-SNS2",
            (
                "CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed SNS "
                "key, and a customer-managed key would cost money at rest; alarm notifications "
                "carry alarm names and states only, no workflow data."
            ),
        )
        return topic

    def _alarm(self, construct_id: str, metric: cloudwatch.Metric, description: str) -> None:
        alarm = metric.create_alarm(
            self,
            construct_id,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        if self.topic is not None:
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self.alarms.append(alarm)
