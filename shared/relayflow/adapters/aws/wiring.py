"""Wiring: assembles the AWS adapters, the dispatchers and the engine into a WorkflowDriver."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.alarms import DueCallback, SchedulerAlarmClock, lambda_event_on_due
from relayflow.adapters.aws.billing import table_specs
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.adapters.aws.debounces import DynamoDBDebouncer
from relayflow.adapters.aws.deliveries import DynamoDBDeliveryLog
from relayflow.adapters.aws.manifests import DynamoDBManifestStore
from relayflow.adapters.aws.operations import DynamoDBAuditLog, DynamoDBWorkflowPauses
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.pending import DynamoDBPendingDeliveries
from relayflow.adapters.aws.rate_limits import DynamoDBRateLimiter
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.adapters.aws.schedule_host import SchedulerScheduleHost
from relayflow.adapters.aws.schedule_states import DynamoDBScheduleStateStore
from relayflow.adapters.aws.sqs_alarms import HorizonAlarmClock, SqsDelayAlarmClock
from relayflow.adapters.aws.stats import DynamoDBRunStatistics
from relayflow.clock import SystemClock
from relayflow.config import DispatchTarget, Settings
from relayflow.core.settings import CoreSettings
from relayflow.deliveries import DAY_MS, DeliveryIdClaims
from relayflow.dispatch.http_dispatcher import HttpDispatcher, TransportRetry
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher, PinnedFunctionHandOff
from relayflow.drivers import WorkflowDriver
from relayflow.engine import Engine
from relayflow.flow.declared import DeclaredConcurrency
from relayflow.operations.paused import PausedWorkflows
from relayflow.ports import (
    AlarmClock,
    CheckpointLog,
    Clock,
    Dispatcher,
    DispatcherResolver,
    PayloadStore,
)
from relayflow.schedules.service import attach_schedules
from relayflow.sdk.invocation import ExecutorOptions
from relayflow.sdk.registry import registered_concurrency, registered_timeout_ms
from relayflow.stats import attach_statistics

if TYPE_CHECKING:
    from relayflow.protocol import TenantMeta


def build_dispatcher(
    target: DispatchTarget,
    settings: Settings,
    clients: AwsClients,
    *,
    services: Mapping[str, object] | None = None,
    clock: Clock | None = None,
    checkpoints: CheckpointLog | None = None,
) -> Dispatcher:
    """The dispatcher of one ``DispatchTarget`` (signed with the configured secret).

    An inline step host writes its per-step checkpoints into ``checkpoints`` and reserves
    its steps' rate limits in the runs table (``settings.table_name``, when named). In
    Lambda, a request it refuses because its run is pinned to a version of a function is
    handed to that version (see :class:`PinnedFunctionHandOff`).
    """
    retry = TransportRetry(retries=settings.dispatch_retries)
    if target.kind == "lambda":
        return LambdaDispatcher(
            target.target,
            client_factory=clients.lambda_,
            secret=settings.signing_secret,
            mode=settings.signing_mode,
            retry=retry,
            usage=clients.usage,
        )
    if target.kind == "http":
        return HttpDispatcher(
            target.target,
            secret=settings.signing_secret,
            mode=settings.signing_mode,
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            retry=retry,
            checkpoint_url=settings.http_checkpoint_url,
        )
    options: dict[str, object] = {}
    if checkpoints is not None:
        options["checkpoints"] = checkpoints
    if settings.table_name:
        options["options"] = ExecutorOptions(
            rate_limiter=DynamoDBRateLimiter(settings.table_name, client_factory=clients.dynamodb)
        )
    pinned = PinnedFunctionHandOff(
        client_factory=clients.lambda_,
        secret=settings.signing_secret,
        mode=settings.signing_mode,
        retry=retry,
    )
    return InlineDispatcher(services=services, clock=clock, handler_options=options, pinned=pinned)


def build_dispatchers(
    settings: Settings,
    clients: AwsClients,
    *,
    services: Mapping[str, object] | None = None,
    clock: Clock | None = None,
    checkpoints: CheckpointLog | None = None,
) -> DispatcherResolver:
    """The default dispatcher plus ``RELAYFLOW_DISPATCH_MAP`` overrides.

    A map key names a ``tenantScript`` or a workflow id; the tenant script wins, as in
    :meth:`Settings.dispatch_target_for`.
    """
    built: dict[DispatchTarget, Dispatcher] = {}

    def one(target: DispatchTarget) -> Dispatcher:
        if target not in built:
            built[target] = build_dispatcher(
                target, settings, clients, services=services, clock=clock, checkpoints=checkpoints
            )
        return built[target]

    overrides = {key: one(target) for key, target in settings.dispatch_map.items()}
    return DispatcherResolver(
        default=one(settings.dispatcher), by_tenant_script=overrides, by_workflow=overrides
    )


def build_aws_driver(
    settings: Settings,
    *,
    clients: AwsClients | None = None,
    clock: Clock | None = None,
    dispatchers: DispatcherResolver | None = None,
    services: Mapping[str, object] | None = None,
    on_due: DueCallback | None = None,
    core_settings: CoreSettings | None = None,
    tenant_meta: TenantMeta | None = None,
    workflow_timeout: Callable[[str], int | None] | None = registered_timeout_ms,
) -> WorkflowDriver:
    """A :class:`~relayflow.drivers.WorkflowDriver` on DynamoDB, S3 and Scheduler.

    Args:
        settings: Resource names and dispatch configuration (``Settings.from_env()``).
        clients: boto3 clients (built for ``settings.region`` when None).
        clock: Time source (the wall clock when None).
        dispatchers: Step hosts per run (built from ``settings`` when None).
        services: What inline-hosted workflows resolve through ``ctx.services``.
        on_due: Drives a run whose wake time already passed; by default the drive function
            is invoked asynchronously with ``{"runId", "wakeAt"}``.
        core_settings: Limits and timings of the engine (``settings.core_settings()`` when
            None).
        tenant_meta: Owner given to runs this driver starts.
        workflow_timeout: A workflow's ``timeout`` in ms by id; by default read from the
            workflows registered in this process (import your workflow modules, e.g. through
            ``RELAYFLOW_WORKFLOW_MODULES``, so the orchestrator knows them).

    Raises:
        ValidationError: A setting the driver needs is missing (the message names it).
    """
    clients = clients or AwsClients.from_settings(settings)
    clock = clock or SystemClock()
    payloads: PayloadStore | None = None
    if settings.payload_bucket:
        payloads = S3PayloadStore(settings.payload_bucket, client_factory=clients.s3)
    clients.record_usage(
        table_specs(
            [
                (settings.require("table_name"), tables.RUNS_TABLE),
                *(
                    [(settings.manifests_table, tables.MANIFESTS_TABLE)]
                    if settings.manifests_table
                    else []
                ),
            ]
        ),
        settings.table_name,
    )
    runs = DynamoDBRunStore.from_settings(
        settings,
        client_factory=clients.dynamodb,
        clock=clock,
        payload_store=payloads,
        usage=clients.usage,
        pricing=clients.recorder,
    )
    checkpoints = DynamoDBCheckpointLog(
        settings.require("table_name"),
        client_factory=clients.dynamodb,
        payload_store=payloads,
        clock=clock,
    )
    if on_due is None:
        on_due = lambda_event_on_due(settings.require("drive_function_arn"), clients.lambda_)
    scheduler_alarms = SchedulerAlarmClock.from_settings(
        settings, client_factory=clients.scheduler, clock=clock, on_due=on_due
    )
    alarms: AlarmClock = scheduler_alarms
    if settings.alarm_queue_url:
        near = SqsDelayAlarmClock(settings.alarm_queue_url, client_factory=clients.sqs, clock=clock)
        alarms = HorizonAlarmClock(near=near, far=scheduler_alarms, clock=clock)
    manifests = DynamoDBManifestStore.from_settings(
        settings, client_factory=clients.dynamodb, s3_factory=clients.s3, clock=clock
    )
    engine = Engine(
        runs=runs,
        alarms=alarms,
        dispatchers=dispatchers
        or build_dispatchers(
            settings, clients, services=services, clock=clock, checkpoints=checkpoints
        ),
        clock=clock,
        settings=core_settings or settings.core_settings(),
        workflow_timeout=workflow_timeout,
        checkpoints=checkpoints,
        pending=DynamoDBPendingDeliveries(
            settings.require("table_name"),
            client_factory=clients.dynamodb,
            keep_ms=settings.retention_days * DAY_MS,
        ),
        slots=DynamoDBConcurrencySlots(
            settings.require("table_name"), client_factory=clients.dynamodb
        ),
        concurrency_of=DeclaredConcurrency(registered_concurrency, manifests, clock),
        debouncer=DynamoDBDebouncer(
            settings.require("table_name"), client_factory=clients.dynamodb
        ),
        audit=DynamoDBAuditLog(
            settings.require("table_name"), client_factory=clients.dynamodb, clock=clock
        ),
        # Every trigger reads its workflow's mark: through the cache, one read per workflow
        # every 5 s per process.
        workflow_pauses=PausedWorkflows(
            DynamoDBWorkflowPauses(settings.require("table_name"), client_factory=clients.dynamodb),
            clock,
        ),
        usage=clients.usage,
    )
    deliveries = DeliveryIdClaims(
        DynamoDBDeliveryLog.from_settings(settings, client_factory=clients.dynamodb),
        clock,
        hold_ms=settings.inline_drive_budget_ms + settings.lambda_margin_ms,
        memory_ms=settings.delivery_id_memory_ms + settings.retention_days * DAY_MS,
    )
    driver = WorkflowDriver(
        engine=engine,
        manifests=manifests,
        tenant_meta=tenant_meta,
        payloads=payloads,
        deliveries=deliveries,
    )
    attach_statistics(
        driver,
        DynamoDBRunStatistics(settings.require("table_name"), client_factory=clients.dynamodb),
        settings.price_table,
    )
    driver.admin.prices = settings.price_table
    if settings.recurring_schedule_group:
        attach_schedules(
            driver,
            states=DynamoDBScheduleStateStore.from_settings(
                settings, client_factory=clients.dynamodb
            ),
            host=SchedulerScheduleHost.from_settings(settings, client_factory=clients.scheduler),
        )
    return driver
