"""The AWS driver (``build_aws_driver``) on in-process moto, metered, on a virtual clock.

Alarms are armed on Scheduler (moto) as in production and recorded so that virtual time can
fire them through the engine's drive entry (``drive_from_event``), as the drive Lambda would.
Lambda invocations are counted from what would invoke a function in a deployment: the API
call that triggers a run, each alarm Scheduler fires, each "drive now" hand-off, and each
step dispatch when the step host is a separate function.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.loaders
import botocore.session

from bench import workloads  # registers the benchmark workflows
from bench.aws_meter import AwsMeter, PricedWrite, Tally, table_specs
from relayflow.adapters.aws import tables
from relayflow.adapters.aws.alarms import SchedulerAlarmClock
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.adapters.memory import InMemoryAlarmClock
from relayflow.api.metrics import RecordingMetrics
from relayflow.clock import VirtualClock
from relayflow.config import Settings
from relayflow.core.views import RunDetail
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.drive.events import handle_drive_event
from relayflow.drivers import WorkflowDriver
from relayflow.ports import DispatcherResolver
from relayflow.testing import MirroredAlarmClock
from relayflow.testing.aws import mock_aws
from relayflow.worker import ExecutorOptions

REGION = "eu-west-1"
SETTINGS = Settings(
    table_name="relayflow-runs",
    manifests_table="relayflow-manifests",
    manifests_bucket="relayflow-manifests",
    payload_bucket="relayflow-payloads",
    schedule_group="relayflow",
    scheduler_role_arn="arn:aws:iam::123456789012:role/relayflow-scheduler",
    drive_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:relayflow-drive",
    dlq_arn="arn:aws:sqs:eu-west-1:123456789012:relayflow-dlq",
    region=REGION,
)
_MAX_ALARMS = 1_000_000
#: The DynamoDB requests that write (a write latency is injected into each).
WRITE_OPERATIONS = (
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
)
_FAST_READS = frozenset({"Query", "GetItem", "Scan", "BatchGetItem"})


@functools.cache
def _loader() -> Any:
    return botocore.loaders.create_loader()


def _session() -> boto3.Session:
    """A new boto3 session (own event hooks) sharing one model loader, so that service
    models are parsed once per process rather than once per stack."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _loader())
    return boto3.Session(botocore_session=core, region_name=REGION)


@contextlib.contextmanager
def fast_moto_transactions() -> Iterator[None]:
    """Spare moto its table backup in ``TransactWriteItems`` when no condition can fail.

    moto 5.2 deep-copies the whole table for every item of a transaction (to roll back on
    failure), which makes long runs quadratic in moto itself. Conditions are checked first
    here, against the same state moto checks them against (the atomic mock runs one request
    at a time); when all hold, the transaction
    runs without the backup, otherwise moto's own path (with the backup) runs unchanged.
    """
    import moto.dynamodb.models as models

    original = models.DynamoDBBackend.transact_write_items

    def no_backup_needed(backend: Any, transact_items: list[dict[str, Any]]) -> bool:
        try:
            for action in transact_items:
                ((kind, op),) = action.items()
                condition = op.get("ConditionExpression")
                if condition is None:
                    continue
                if kind == "Put":
                    table = backend.get_table(op["TableName"])
                    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                    if table.range_key_attr is not None:
                        key[table.range_key_attr] = op["Item"][table.range_key_attr]
                else:
                    key = op["Key"]
                current = backend.get_item(op["TableName"], key)
                check = models.get_filter_expression(  # type: ignore[attr-defined]
                    condition,
                    op.get("ExpressionAttributeNames"),
                    op.get("ExpressionAttributeValues"),
                )
                if not check.expr(current):
                    return False
        except Exception:
            return False
        return True

    def without_backup(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if not no_backup_needed(self, transact_items):
            original(self, transact_items)
            return
        saved_copy = models.copy  # type: ignore[attr-defined]
        shallow = types.SimpleNamespace(deepcopy=lambda obj, memo=None: obj)
        models.copy = shallow  # type: ignore[attr-defined, assignment]
        try:
            original(self, transact_items)
        finally:
            models.copy = saved_copy  # type: ignore[attr-defined]

    models.DynamoDBBackend.transact_write_items = without_backup  # type: ignore[method-assign]
    try:
        yield
    finally:
        models.DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]


@contextlib.contextmanager
def fast_moto_reads() -> Iterator[None]:
    """Let moto answer DynamoDB reads with ``json.dumps`` instead of its generic serializer.

    moto's serializer walks the response model for every attribute of every item, which
    makes reading a long run's partition take tenths of a second; the JSON sent back is the
    same (the results are already in DynamoDB's wire form).
    """
    from moto.dynamodb import responses

    original = responses.DynamoResult.execute_result

    def as_json(self: Any, context: Any) -> Any:
        if context.operation_model.name in _FAST_READS:
            try:
                body = json.dumps(self.result, separators=(",", ":"))
            except TypeError:
                return original(self, context)
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original(self, context)

    responses.DynamoResult.execute_result = as_json  # type: ignore[method-assign]
    try:
        yield
    finally:
        responses.DynamoResult.execute_result = original  # type: ignore[method-assign]


@dataclass
class LambdaCounts:
    """Function invocations a deployment would see."""

    api: int = 0
    alarm_drives: int = 0
    handoff_drives: int = 0
    step_dispatches: int = 0

    def total(self, *, separate_step_host: bool) -> int:
        """All invocations; step dispatches count only when the step host is its own function."""
        drives = self.api + self.alarm_drives + self.handoff_drives
        return drives + (self.step_dispatches if separate_step_host else 0)


class CountingDispatcher:
    """The in-process step host, counting each dispatch."""

    def __init__(self, inner: InlineDispatcher, counts: LambdaCounts) -> None:
        self.inner = inner
        self.counts = counts

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.counts.step_dispatches += 1
        return self.inner.dispatch(request)


class MotoStack:
    """A metered AWS driver on moto; use as a context manager (it owns the moto mock).

    Args:
        services: What ``ctx.services`` resolves in workflow bodies.
        checkpoint_interval_ms: The step host's checkpoint interval (0: every step is saved
            before the next one runs; None: the default, 5 s of work per invocation).
        cold_drives: Build a new driver (empty caches, as in a new Lambda container) before
            each alarm is delivered.
        containers: Processes the alarms are delivered to in turn, each with its own clients,
            usage meter and driver (as Lambda containers of the drive function); the first
            also serves ``trigger``.
        on_write: Called with every DynamoDB item write the meter prices.
        write_latency_ms: Added to every DynamoDB write request (moto answers at once, so
            without it no checkpoint write is ever in flight while another entry is ready).
        group_checkpoints: The step host's ``ExecutorOptions.group_checkpoints``.
    """

    def __init__(
        self,
        services: Mapping[str, object] | None = None,
        *,
        checkpoint_interval_ms: int | None = None,
        cold_drives: bool = False,
        containers: int = 1,
        on_write: Callable[[PricedWrite], None] | None = None,
        write_latency_ms: float = 0,
        group_checkpoints: bool = True,
    ) -> None:
        self._services = services
        self._write_latency_s = write_latency_ms / 1000
        self._group_checkpoints = group_checkpoints
        #: DynamoDB write requests the latency was added to.
        self.delayed_writes = 0
        self._on_write = on_write
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._cold_drives = cold_drives
        self._container_count = containers
        #: The clients and driver of each container (the first is ``clients``/``driver``).
        self.containers: list[tuple[AwsClients, WorkflowDriver]] = []
        self._exits = contextlib.ExitStack()
        self.counts = LambdaCounts()
        self._handoffs: set[tuple[str, int]] = set()
        self.clock = VirtualClock()
        self._metrics = RecordingMetrics()
        self.armed = InMemoryAlarmClock()
        self.meter: AwsMeter
        self.driver: WorkflowDriver
        self.clients: AwsClients

    def __enter__(self) -> MotoStack:
        exits = self._exits
        exits.enter_context(fast_moto_transactions())
        exits.enter_context(fast_moto_reads())
        exits.enter_context(
            mock_aws(
                config={"core": {"reset_boto3_session": False}, "lambda": {"use_docker": False}},
                region=REGION,
            )
        )
        session = _session()
        self.meter = AwsMeter(
            session,
            table_specs(
                [
                    (SETTINGS.require("table_name"), tables.RUNS_TABLE),
                    (SETTINGS.require("manifests_table"), tables.MANIFESTS_TABLE),
                ]
            ),
            on_write=self._on_write,
        )
        # Before any client exists: a client copies the session's event hooks when created.
        if self._write_latency_s:
            for operation in WRITE_OPERATIONS:
                session.events.register(f"before-call.dynamodb.{operation}", self._delay)
        self.clients = AwsClients(session=session, region=REGION)
        tables.create_resources(self.clients, SETTINGS)
        # Scheduler's own deletion of a fired schedule is not a request the driver makes.
        self._unmetered_scheduler = _session().client("scheduler")
        clock = self.clock

        def sleep(seconds: float) -> None:
            clock.advance(max(0, round(seconds * 1000)))

        options = ExecutorOptions(sleep=sleep, group_checkpoints=self._group_checkpoints)
        if self._checkpoint_interval_ms is not None:
            options = ExecutorOptions(
                sleep=sleep,
                checkpoint_interval_ms=self._checkpoint_interval_ms,
                group_checkpoints=self._group_checkpoints,
            )

        # The in-process step host writes its per-step checkpoints with the metered clients,
        # as a Lambda worker with RELAYFLOW_CHECKPOINT_TABLE would.
        checkpoints = DynamoDBCheckpointLog(
            SETTINGS.require("table_name"),
            client_factory=self.clients.dynamodb,
            clock=clock,
            payload_store=S3PayloadStore(
                SETTINGS.require("payload_bucket"), client_factory=self.clients.s3
            ),
        )
        services = {workloads.CLOCK_SERVICE: clock, **(self._services or {})}
        host = InlineDispatcher(
            services=services,
            clock=clock,
            handler_options={"options": options, "checkpoints": checkpoints},
        )
        self._dispatcher = CountingDispatcher(host, self.counts)
        self.driver = self._build_driver()
        self.containers = [(self.clients, self.driver)]
        for _ in range(1, self._container_count):
            own = AwsClients(session=session, region=REGION)
            self.containers.append((own, self._build_driver(own)))
        self.meter.reset()
        return self

    def _delay(self, **_: Any) -> None:
        self.delayed_writes += 1
        time.sleep(self._write_latency_s)

    def _build_driver(self, clients: AwsClients | None = None) -> WorkflowDriver:
        driver = build_aws_driver(
            SETTINGS,
            clients=clients or self.clients,
            clock=self.clock,
            dispatchers=DispatcherResolver(default=self._dispatcher),
            on_due=self._due_now,
        )
        engine = driver.engine
        scheduler = engine.alarms
        assert isinstance(scheduler, SchedulerAlarmClock)
        self._schedules = scheduler
        engine.alarms = MirroredAlarmClock(scheduler, self.armed)
        return driver

    def __exit__(self, *exc: object) -> None:
        self._exits.close()

    def _due_now(self, run_id: str, wake_at_ms: int) -> None:
        # In a deployment this invokes the drive function asynchronously.
        self.counts.handoff_drives += 1
        self._handoffs.add((run_id, wake_at_ms))
        self.armed.arm(run_id, wake_at_ms)

    # ---- running -------------------------------------------------------------------------

    def trigger(self, workflow_id: str, data: Any) -> RunDetail:
        """Start a run as the API function would (one invocation), driving it inline."""
        self.counts.api += 1
        return self.driver.trigger(workflow_id, data, environment="production")

    def run_until_idle(self) -> None:
        """Jump to each next alarm and deliver it to the drive entry, until none is left."""
        for delivered in range(_MAX_ALARMS):
            upcoming = self.armed.next_alarm()
            if upcoming is None:
                return
            run_id, wake_at = upcoming
            self.clock.set(wake_at)
            self.armed.take(run_id, wake_at)
            # A hand-off invokes the drive function with what ``lambda_event_on_due`` sends; an
            # alarm with the input of the schedule that fires it.
            payload: dict[str, Any] = {"runId": run_id, "wakeAt": wake_at}
            if (run_id, wake_at) in self._handoffs:
                self._handoffs.discard((run_id, wake_at))
            else:
                self.counts.alarm_drives += 1
                payload = self._fire(run_id, wake_at)
            if self._cold_drives:
                self.driver = self._build_driver()
            driver = self.driver
            if len(self.containers) > 1:
                driver = self.containers[(delivered + 1) % len(self.containers)][1]
            handle_drive_event(driver, payload, None, self._metrics)
        raise RuntimeError(f"more than {_MAX_ALARMS} alarms fired; a run never settles")

    def fresh_driver(self) -> WorkflowDriver:
        """A new driver on the same resources (empty caches, as in a new container)."""
        return self._build_driver()

    def _fire(self, run_id: str, wake_at: int) -> dict[str, Any]:
        """The input of the run's schedule for ``wake_at``, which is then deleted (what
        ``ActionAfterCompletion=DELETE`` does after a one-time schedule fires)."""
        name = self._schedules.name_of(run_id, wake_at)
        group = self._schedules.group
        schedule = self._unmetered_scheduler.get_schedule(Name=name, GroupName=group)
        with contextlib.suppress(Exception):
            self._unmetered_scheduler.delete_schedule(Name=name, GroupName=group)
        payload: dict[str, Any] = json.loads(schedule["Target"]["Input"])
        return payload

    def run(self, workflow_id: str, data: Any) -> RunDetail:
        """Trigger a run, fire its alarms until it settles, and return its final detail."""
        started = self.trigger(workflow_id, data)
        self.run_until_idle()
        found = self.driver.admin.get_run(started.id)
        assert found is not None
        return found

    def take(self) -> tuple[Tally, LambdaCounts]:
        """What was metered since the last ``take`` (or since the stack started), then reset."""
        counts, self.counts = self.counts, LambdaCounts()
        self._dispatcher.counts = self.counts
        return self.meter.reset(), counts
