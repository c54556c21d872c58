"""The driver contract suite's harness on moto: DynamoDB runs and manifests, S3 payloads,
Scheduler alarms (mirrored into the in-memory alarm clock that advances virtual time)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.alarms import SchedulerAlarmClock
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.manifests import DynamoDBManifestStore
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.runs import DynamoDBRunStore
from relayflow.config import Settings
from relayflow.drivers import WorkflowDriver
from relayflow.engine import Engine
from relayflow.ports import DispatcherResolver
from relayflow.testing import MirroredAlarmClock, WorkflowTestEnv

SETTINGS = Settings(
    table_name="relayflow-runs",
    manifests_table="relayflow-manifests",
    manifests_bucket="relayflow-manifests",
    payload_bucket="relayflow-payloads",
    schedule_group="relayflow",
    scheduler_role_arn="arn:aws:iam::123456789012:role/relayflow-scheduler",
    drive_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:relayflow-drive",
    dlq_arn="arn:aws:sqs:eu-west-1:123456789012:relayflow-dlq",
    region="eu-west-1",
)


def moto_driver(
    *,
    workflows: list[Any],
    services: Mapping[str, object] | None = None,
    step_mocks: Mapping[str, Any] | None = None,
) -> WorkflowTestEnv:
    """A ``WorkflowTestEnv`` whose runs, manifests, payloads and alarms use AWS adapters.

    Call it inside an active ``mock_aws``.
    """
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    payloads = S3PayloadStore(SETTINGS.require("payload_bucket"), client_factory=clients.s3)
    checkpoints = DynamoDBCheckpointLog(
        SETTINGS.require("table_name"), client_factory=clients.dynamodb, payload_store=payloads
    )
    env = WorkflowTestEnv(
        workflows=workflows, services=services, step_mocks=step_mocks, checkpoints=checkpoints
    )
    runs = DynamoDBRunStore.from_settings(
        SETTINGS, client_factory=clients.dynamodb, clock=env.clock, payload_store=payloads
    )
    scheduler = SchedulerAlarmClock.from_settings(
        SETTINGS,
        client_factory=clients.scheduler,
        clock=env.clock,
        on_due=lambda run_id, wake_at: None,
    )
    alarms = MirroredAlarmClock(scheduler, env.alarms)
    env.runs = runs  # type: ignore[assignment]
    env.alarms = alarms  # type: ignore[assignment]
    env.engine = Engine(
        runs=runs,
        alarms=alarms,
        dispatchers=DispatcherResolver(default=env.dispatcher),
        clock=env.clock,
        workflow_timeout=env._timeout_of,
        checkpoints=checkpoints,
    )
    manifests = DynamoDBManifestStore.from_settings(
        SETTINGS, client_factory=clients.dynamodb, s3_factory=clients.s3, clock=env.clock
    )
    env.driver = WorkflowDriver(engine=env.engine, manifests=manifests)
    env.admin = env.driver.admin
    return env
