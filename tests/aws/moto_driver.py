"""The driver contract suite's harness on moto: DynamoDB runs and manifests, S3 payloads,
Scheduler alarms read back from moto as relayflow left them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.alarms import SchedulerAlarmClock
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.adapters.aws.debounces import DynamoDBDebouncer
from relayflow.adapters.aws.manifests import DynamoDBManifestStore
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.pending import DynamoDBPendingDeliveries
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.adapters.aws.stats import DynamoDBRunStatistics
from relayflow.clock import VirtualClock
from relayflow.config import Settings
from relayflow.core.settings import CoreSettings
from relayflow.deliveries import DAY_MS
from relayflow.testing import WorkflowTestEnv
from relayflow.testing.alarms import EmulatedScheduler
from relayflow.testing.env import DEFAULT_START_MS

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
    settings: CoreSettings | None = None,
    start_ms: int = DEFAULT_START_MS,
) -> WorkflowTestEnv:
    """A ``WorkflowTestEnv`` whose runs, manifests, payloads and alarms use AWS adapters.

    Checkpoints go to the run's log in DynamoDB. Alarms are the schedules relayflow creates in
    moto's Scheduler; the emulation only does what Scheduler does by itself (fire a due
    schedule, delete it after completion). Call it inside an active
    ``relayflow.testing.aws.mock_aws``.
    """
    clock = VirtualClock(start_ms)
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    payloads = S3PayloadStore(SETTINGS.require("payload_bucket"), client_factory=clients.s3)
    checkpoints = DynamoDBCheckpointLog(
        SETTINGS.require("table_name"), client_factory=clients.dynamodb, payload_store=payloads
    )
    runs = DynamoDBRunStore.from_settings(
        SETTINGS, client_factory=clients.dynamodb, clock=clock, payload_store=payloads
    )
    alarms = EmulatedScheduler(
        lambda on_due: SchedulerAlarmClock.from_settings(
            SETTINGS, client_factory=clients.scheduler, clock=clock, on_due=on_due
        ),
        client_factory=clients.scheduler,
    )
    manifests = DynamoDBManifestStore.from_settings(
        SETTINGS, client_factory=clients.dynamodb, s3_factory=clients.s3, clock=clock
    )
    return WorkflowTestEnv(
        workflows=workflows,
        services=services,
        step_mocks=step_mocks,
        settings=settings,
        clock=clock,
        runs=runs,
        alarms=alarms,
        manifests=manifests,
        payloads=payloads,
        checkpoints=checkpoints,
        pending=DynamoDBPendingDeliveries(
            SETTINGS.require("table_name"), client_factory=clients.dynamodb, keep_ms=DAY_MS
        ),
        slots=DynamoDBConcurrencySlots(
            SETTINGS.require("table_name"), client_factory=clients.dynamodb
        ),
        debouncer=DynamoDBDebouncer(
            SETTINGS.require("table_name"), client_factory=clients.dynamodb
        ),
        statistics=DynamoDBRunStatistics(
            SETTINGS.require("table_name"), client_factory=clients.dynamodb
        ),
    )
