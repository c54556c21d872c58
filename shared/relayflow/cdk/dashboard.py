"""The CloudWatch dashboard of a relayflow deployment: what its functions emit (runs, steps,
queues and alarm lateness per workflow) next to Lambda, DynamoDB and SQS health.

Metric names and the namespace come from :mod:`relayflow.api.metrics`, the module the
functions emit them with, so the graphs always name what is emitted.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from relayflow.api import metrics as m

__all__ = ["WORKFLOW_SCHEMA", "RelayflowDashboard"]

_PERIOD = Duration.minutes(5)
_WIDTH = 12
#: Every workflow's line of a metric: the functions emit it with these dimensions.
WORKFLOW_SCHEMA = (
    "{" + f"{m.NAMESPACE},{m.ENVIRONMENT_DIMENSION},service,{m.WORKFLOW_DIMENSION}" + "}"
)


class RelayflowDashboard(Construct):
    """One dashboard named ``relayflow-<environment>``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment_name: str,
        functions: Mapping[str, lambda_.IFunction],
        runs_table: dynamodb.ITable,
        alarm_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        """Graph the relayflow metrics of every workflow and the health of ``functions``,
        ``runs_table`` and the queues."""
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"relayflow-{environment_name}",
            default_interval=Duration.hours(3),
        )
        per_workflow = functools.partial(_per_workflow, environment_name)
        self.dashboard.add_widgets(
            per_workflow("Runs started", m.RUNS_STARTED, "Sum"),
            per_workflow("Runs completed", m.RUNS_COMPLETED, "Sum"),
        )
        self.dashboard.add_widgets(
            per_workflow("Runs failed", m.RUNS_FAILED, "Sum"),
            per_workflow("Step attempts", m.STEPS_ATTEMPTS, "Sum"),
        )
        self.dashboard.add_widgets(
            per_workflow("Step attempts retried", m.STEPS_RETRIED, "Sum"),
            per_workflow("Queue depth (deepest place taken)", m.QUEUE_DEPTH, "Maximum"),
        )
        self.dashboard.add_widgets(
            per_workflow("Alarm lateness p99 (ms)", m.ALARMS_LATENESS, "p99"),
            _graph(
                "Lambda errors",
                [f.metric_errors(period=_PERIOD, statistic="Sum") for f in functions.values()],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "Lambda duration p99 (ms)",
                [f.metric_duration(period=_PERIOD, statistic="p99") for f in functions.values()],
            ),
            _graph(
                "DynamoDB throttled requests",
                [
                    runs_table.metric_throttled_requests_for_operations(
                        period=_PERIOD, statistic="Sum"
                    )
                ],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "SQS age of oldest message (s)",
                [
                    queue.metric_approximate_age_of_oldest_message(
                        period=_PERIOD, statistic="Maximum"
                    )
                    for queue in (alarm_queue, dead_letter_queue)
                ],
            ),
        )


def _per_workflow(
    environment: str, title: str, name: str, statistic: str
) -> cloudwatch.GraphWidget:
    """A line per workflow and function of relayflow metric ``name`` in deployment
    ``environment`` (the service dimension tells api, drive and sweeper apart)."""
    search = cloudwatch.MathExpression(
        expression=(
            f'SEARCH(\'{WORKFLOW_SCHEMA} {m.ENVIRONMENT_DIMENSION}="{environment}" '
            f'MetricName="{name}"\', '
            f"'{statistic}', {_PERIOD.to_seconds()})"
        ),
        label="",
        period=_PERIOD,
        using_metrics={},
    )
    return _graph(title, [search])


def _graph(title: str, metrics: list[cloudwatch.IMetric]) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=metrics, width=_WIDTH, height=6)
