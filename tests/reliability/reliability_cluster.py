"""A deployment on moto for fault tests: every request runs in a fresh "process" (the AWS
driver built by ``build_aws_driver``), alarms live in Scheduler (moto) and are fired by a pump
on a virtual clock, and asynchronous drive invocations are re-delivered when a process dies.

Call everything here inside an active ``mock_aws``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fault_injection import ClientTap, CrashPlan, ErrorInjector, OutagePlan, ProcessKilled
from reliability_tally import add
from reliability_workflows import LEDGER, STEP_WORK

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.errors import AwsServiceError
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.api.metrics import RecordingMetrics
from relayflow.clock import VirtualClock
from relayflow.config import Settings
from relayflow.core.settings import CoreSettings
from relayflow.core.views import RunDetail, RunSummary
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.drivers import WorkflowDriver
from relayflow.local.scheduler import due_time_ms
from relayflow.observability import RunMetrics
from relayflow.ports import Dispatcher, DispatcherResolver
from relayflow.worker import ExecutorOptions

T = TypeVar("T")

SETTINGS = Settings(
    table_name="reliability-runs",
    manifests_table="reliability-manifests",
    manifests_bucket="reliability-manifests",
    payload_bucket="reliability-payloads",
    schedule_group="reliability",
    scheduler_role_arn="arn:aws:iam::123456789012:role/reliability-scheduler",
    drive_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:reliability-drive",
    region="eu-west-1",
)
GROUP = SETTINGS.require("schedule_group")
START_MS = 1_700_000_000_000
#: The same deployment with near wake-ups (under 15 minutes) on an SQS delay queue.
QUEUE_SETTINGS = dataclasses.replace(
    SETTINGS,
    alarm_queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/reliability-alarms",
)
SERVICES = ("dynamodb", "s3", "scheduler", "sqs", "lambda")
TERMINAL = frozenset({"completed", "failed", "cancelled", "compensated", "compensation_failed"})


class TappedDispatcher:
    """A dispatcher whose calls are fault points: before the host runs, and after it ran
    (its effects happened) but before its answer reaches the engine."""

    def __init__(self, inner: Dispatcher, tap: ClientTap) -> None:
        self._inner = inner
        self._tap = tap

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Dispatch through the inner dispatcher, passing the fault points."""
        plan = self._tap.plan
        number = plan.point("host:Dispatch", "before") if plan is not None else None
        answer = self._inner.dispatch(request)
        if plan is not None:
            plan.point("host:Dispatch", "after", number)
        return answer


@dataclass(frozen=True)
class Outcome:
    """What a run ended as, compared between a faulty and a fault-free execution."""

    status: str
    output: Any
    error_code: str | None
    compensations: tuple[tuple[str, str], ...]
    children: tuple[tuple[str, Any], ...]


class Cluster:
    """The shared state of a deployment (moto resources, virtual clock, pending deliveries)
    and the way requests reach it (each in a new process)."""

    def __init__(
        self,
        *,
        core_settings: CoreSettings | None = None,
        services: Mapping[str, object] | None = None,
        host_log: bool = True,
        settings: Settings = SETTINGS,
        group_checkpoints: bool = True,
    ) -> None:
        self.settings = settings
        # False: one write per checkpoint entry, so every run makes the same calls (a sweep
        # by call number needs that; grouped writes depend on what is in flight).
        self.group_checkpoints = group_checkpoints
        self.clock = VirtualClock(START_MS)
        # False builds the inline step host without a checkpoint log of its own: the engine
        # must hand it its log.
        self.host_log = host_log
        self.tap = ClientTap()
        self.injector = ErrorInjector()
        self.clients = AwsClients(region=SETTINGS.region)
        for service in SERVICES:
            client = self.clients.client(service)
            self.tap.install(client)
            self.injector.install(client)
        tables.create_resources(self.clients, settings)
        # The pump stands for EventBridge Scheduler itself: its calls are not the product's.
        self._backstage = AwsClients(region=SETTINGS.region)
        self._scheduler = self._backstage.scheduler()
        self.core_settings = core_settings or CoreSettings()
        self.services = dict(services or {})
        self._observer = self._observing_driver()
        #: What the deployment's functions counted (``runs.driven_again``...), over every process.
        self.metrics = RecordingMetrics()
        self.deliveries: deque[dict[str, Any]] = deque()
        self.crashes = 0
        self.failed_invocations = 0
        self.processes = 0

    def _observing_driver(self) -> WorkflowDriver:
        # Reads by the test itself go through untapped clients: they are no fault points.
        driver: WorkflowDriver = build_aws_driver(
            self.settings, clients=self._backstage, clock=self.clock, on_due=lambda *_: None
        )
        return driver

    # ----- processes ----------------------------------------------------------------------

    def process(self) -> WorkflowDriver:
        """A new process: the AWS driver with no cached state, on the shared clients."""
        self.processes += 1
        STEP_WORK.clock = self.clock
        options = ExecutorOptions(sleep=self._sleep, group_checkpoints=self.group_checkpoints)
        # The host writes its per-step checkpoints through the tapped clients too, so every
        # call of the checkpoint path is a fault point.
        payloads = S3PayloadStore(
            self.settings.require("payload_bucket"), client_factory=self.clients.s3
        )
        checkpoints = DynamoDBCheckpointLog(
            self.settings.require("table_name"),
            client_factory=self.clients.dynamodb,
            clock=self.clock,
            payload_store=payloads,
        )
        host_options: dict[str, Any] = {"options": options}
        if self.host_log:
            host_options["checkpoints"] = checkpoints
        inline = InlineDispatcher(
            services=self.services, clock=self.clock, handler_options=host_options
        )
        driver: WorkflowDriver = build_aws_driver(
            self.settings,
            clients=self.clients,
            clock=self.clock,
            dispatchers=DispatcherResolver(default=TappedDispatcher(inline, self.tap)),
            on_due=self._hand_off,
            core_settings=self.core_settings,
        )
        driver.engine.add_observer(RunMetrics(self.metrics))
        return driver

    def _sleep(self, seconds: float) -> None:
        # In-process retry waits of the step host move the virtual clock.
        self.clock.advance(round(seconds * 1000))

    def _hand_off(self, run_id: str, wake_at: int) -> None:
        # The drive function invoked asynchronously (InvocationType=Event), as in production.
        plan = self.tap.plan
        if plan is not None:
            plan.point("lambda:Invoke(Event)", "before")
        self.deliveries.append({"runId": run_id, "wakeAt": wake_at})
        if plan is not None:
            plan.point("lambda:Invoke(Event)", "after")

    def attempt(self, action: Callable[[WorkflowDriver], T]) -> tuple[bool, T | None]:
        """Run ``action`` in a new process; (False, None) when the process was killed."""
        driver = self.process()
        try:
            return True, action(driver)
        except ProcessKilled:
            self.crashes += 1
            return False, None
        except AwsServiceError as exc:
            # The invocation failed on a backing service that stayed busy past botocore's
            # retries: the API answers 503 (the client retries), Lambda re-delivers events.
            if not exc.transient:
                raise
            self.failed_invocations += 1
            return False, None

    def client_call(
        self,
        action: Callable[[WorkflowDriver], T],
        *,
        done_on: tuple[type[Exception], ...] = (),
        retries: int = 5,
    ) -> T | None:
        """A client request retried (with the same idempotency key or event id) until a
        process answers; ``done_on`` errors mean an earlier, killed attempt already did it."""
        for _ in range(retries):
            try:
                ok, value = self.attempt(action)
            except done_on:
                return None
            if ok:
                return value
        raise AssertionError(f"the request never got an answer in {retries} attempts")

    # ----- alarms and asynchronous deliveries ---------------------------------------------

    def armed(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every armed alarm as (due ms, schedule name, payload), earliest first."""
        found: list[tuple[int, str, dict[str, Any]]] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"GroupName": GROUP, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            page = self._scheduler.list_schedules(**params)
            for item in page.get("Schedules", []):
                schedule = self._scheduler.get_schedule(Name=item["Name"], GroupName=GROUP)
                payload = json.loads(schedule["Target"]["Input"])
                due = due_time_ms(schedule["ScheduleExpression"], payload)
                assert due is not None, schedule
                found.append((due, item["Name"], payload))
            token = page.get("NextToken")
            if not token:
                break
        return sorted(found, key=lambda entry: (entry[0], entry[1]))

    def _queue(self) -> Any:
        """moto's alarm queue (None without one): SQS itself, whose delays run on real time,
        so the pump makes a message visible once the virtual clock reaches its wake time."""
        url = self.settings.alarm_queue_url
        if not url:
            return None
        from moto.sqs.models import sqs_backends

        return sqs_backends["123456789012"][SETTINGS.region].queues[url.rsplit("/", 1)[-1]]

    def queued(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every alarm waiting in the queue as (wake ms, "", payload) (no schedule name)."""
        queue = self._queue()
        if queue is None:
            return []
        found = []
        for message in list(queue._messages):
            payload = json.loads(message.body)
            found.append((int(payload["wakeAt"]), "", payload))
        return found

    def _receive_due(self, now: int) -> bool:
        """Receive (and delete) the queued alarms due at ``now`` into the deliveries, as the
        queue's event source mapping would; True when there were any."""
        queue = self._queue()
        if queue is None:
            return False
        due = [m for m in list(queue._messages) if json.loads(m.body)["wakeAt"] <= now]
        if not due:
            return False
        for message in due:
            message.delayed_until = 0
        sqs = self._backstage.sqs()
        url = self.settings.require("alarm_queue_url")
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not got:
                return True
            for message in got:
                self.deliveries.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def deliver(self, payload: dict[str, Any]) -> None:
        """Invoke the drive function with ``payload``; a killed process gets it again later
        (asynchronous invocations are retried)."""
        ok, _ = self.attempt(lambda driver: driver.engine.drive_from_event(payload))
        if not ok:
            self.deliveries.append(payload)

    def settle(self, horizon_ms: int = 0, *, limit: int = 500) -> None:
        """Deliver pending invocations and fire alarms, jumping the clock from alarm to alarm
        up to ``horizon_ms`` from now."""
        deadline = self.clock.now_ms() + horizon_ms
        for _ in range(limit):
            if self.deliveries:
                self.deliver(self.deliveries.popleft())
                continue
            armed = self.armed() + self.queued()
            now = self.clock.now_ms()
            if self._receive_due(now):
                continue
            due = [entry for entry in armed if entry[0] <= now and entry[1]]
            if due:
                for _, name, payload in due:
                    # Scheduler deletes a one-time schedule once it fired it.
                    self._scheduler.delete_schedule(Name=name, GroupName=GROUP)
                    self.deliveries.append(payload)
                continue
            upcoming = [entry[0] for entry in armed if entry[0] <= deadline]
            if not upcoming:
                return
            self.clock.set(min(upcoming))
        raise AssertionError(f"the deployment did not settle in {limit} rounds")

    def sweep_after_lease(self) -> None:
        """Let every lease of a dead process expire and every wake time whose alarm a dead
        process never armed pass (a parent's next check on its children at the latest),
        then run the sweeper, as its periodic calls would by then."""
        settings = self.core_settings
        self.clock.advance(max(settings.lease_ms, settings.child_reconcile_ms) + 1)
        for _ in range(10):
            ok, _ = self.attempt(lambda driver: driver.engine.sweep())
            if ok:
                break
        self.settle()

    def run(self, run_id: str) -> RunDetail:
        """The run as stored (read by a fault-free process)."""
        detail = self.find(run_id)
        assert detail is not None, f"run {run_id} is gone"
        return detail

    def find(self, run_id: str) -> RunDetail | None:
        """The run as stored, or None."""
        found: RunDetail | None = self._observer.admin.get_run(run_id)
        return found

    def runs_of(self, workflow_id: str) -> list[RunSummary]:
        """Every stored run of ``workflow_id`` (read by a fault-free process)."""
        found: list[RunSummary] = []
        cursor: str | None = None
        while True:
            page = self._observer.admin.list_runs(workflow=workflow_id, cursor=cursor)
            found.extend(page.runs)
            cursor = page.next_cursor
            if cursor is None:
                return found

    def finish(self, run_id: str, *, rounds: int = 8) -> RunDetail:
        """Recover by the normal means (sweeper after lease expiry, alarms, re-deliveries)
        until the run and its children ended."""
        # Each round lets the periodic checks of parents on their children come due too: they
        # are the normal means that recover a child start or a parent resumption lost in a
        # crash.
        horizon = max(60_000, self.core_settings.child_reconcile_ms)
        for _ in range(rounds):
            self.settle(horizon)
            detail = self.run(run_id)
            children = [self.find(child) for child in detail.children]
            ended = all(c is not None and c.status in TERMINAL for c in children)
            if detail.status in TERMINAL and ended:
                return detail
            self.sweep_after_lease()
        return self.run(run_id)

    def lost_child_link(self, run_id: str) -> str | None:
        """Why ``run_id`` waits forever on a child run (missing, or ended without resuming
        it), or None when it does not."""
        detail = self.run(run_id)
        if detail.status != "waiting":
            return None
        for child_id in detail.children:
            child = self.find(child_id)
            if child is None:
                return f"child {child_id} was never started"
            if child.status in TERMINAL:
                return f"child {child_id} ended {child.status} but the parent never resumed"
        return None

    def outcome(self, run_id: str) -> Outcome:
        """The comparable end state of a run and its children."""
        detail = self.run(run_id)
        add("runs_checked")
        children = tuple(
            ("missing", None) if c is None else (c.status, c.output)
            for c in map(self.find, detail.children)
        )
        return Outcome(
            status=detail.status,
            output=detail.output,
            error_code=detail.error.code if detail.error is not None else None,
            compensations=tuple((r.step_id, r.status) for r in detail.compensations),
            children=children,
        )

    def reset(self) -> None:
        """Empty the runs table and the schedule group (a fresh deployment, kept warm)."""
        db = self._backstage.dynamodb()
        table = SETTINGS.require("table_name")
        for page in db.get_paginator("scan").paginate(TableName=table):
            for item in page.get("Items", []):
                key = {name: item[name] for name in (tables.PK, tables.SK)}
                db.delete_item(TableName=table, Key=key)
        for _, name, _ in self.armed():
            self._scheduler.delete_schedule(Name=name, GroupName=GROUP)
        queue = self._queue()
        if queue is not None:
            queue._messages.clear()
        self.deliveries.clear()
        self.injector.bursts.clear()
        self.tap.plan = None
        self.metrics = RecordingMetrics()
        # The observer's store remembers the runs it read by version; a run id used again
        # after the reset restarts at version 1, which must not find a remembered record.
        self._observer = self._observing_driver()

    def fault_free(self, scenario: Callable[[Cluster], Outcome]) -> tuple[CrashPlan, Outcome]:
        """Run ``scenario`` on an empty deployment without faults, recording every call (and
        every step execution in the ledger); the deployment is emptied again after."""
        self.reset()
        LEDGER.reset()
        plan = CrashPlan()
        self.use_plan(plan)
        outcome = scenario(self)
        self.reset()
        return plan, outcome

    def use_plan(self, plan: CrashPlan | OutagePlan | None) -> None:
        """Apply ``plan`` to every later call (None: no faults)."""
        self.tap.plan = plan
