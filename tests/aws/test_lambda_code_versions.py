"""Runs reach the Lambda function version they are pinned to: the worker function through the
Lambda dispatcher's qualifier, the drive function's in-process host by handing the request to
its own earlier version; DynamoDB and Scheduler on atomic moto, Lambda a fake that runs each
published version's code with that version's environment."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest

from relayflow import workflow
from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.api.handler import make_lambda_handler as make_api_handler
from relayflow.api.metrics import RecordingMetrics
from relayflow.clock import VirtualClock, wall_ms
from relayflow.config import DispatchTarget, Settings
from relayflow.core.views import RunDetail
from relayflow.drive.handlers import make_drive_handler
from relayflow.drivers import WorkflowDriver
from relayflow.protocol import CodeVersion
from relayflow.worker.hosts import (
    make_lambda_handler,
    serving_step_requests,
    step_host_from_settings,
)
from tests.aws.fake_lambda import FakeLambda, Invocation
from tests.aws.moto_driver import SETTINGS

pytestmark = pytest.mark.usefixtures("aws", "clean_registry")

WORKER = "stack-worker"
DRIVE = "stack-drive"
API = "stack-api"


class FakeLambdaClients(AwsClients):
    """boto3 clients on moto, with the fake Lambda in place of moto's."""

    def __init__(self, fake: FakeLambda) -> None:
        super().__init__(region="eu-west-1")
        self.fake = fake

    def lambda_(self) -> Any:
        return self.fake


class Deployment:
    """A deployment on moto whose functions are versions published on a fake Lambda.

    The orchestrator's wake-ups are Scheduler schedules in moto; :meth:`fire_next` moves the
    clock to the earliest and delivers its event to ``deliver`` (the drive function's alias,
    or the engine of the test process).
    """

    def __init__(self, settings: Settings) -> None:
        self.fake = FakeLambda()
        self.clients = FakeLambdaClients(self.fake)
        self.settings = settings
        tables.create_resources(self.clients, settings)
        # The step hosts read the wall clock: the orchestrator's starts there too.
        self.clock = VirtualClock(wall_ms())
        self.handed_off: list[dict[str, Any]] = []
        self.driver: WorkflowDriver = build_aws_driver(
            settings, clients=self.clients, clock=self.clock, on_due=self._due_now
        )
        self.step_host = step_host_from_settings(settings, checkpoint_table=settings.table_name)

    def _due_now(self, run_id: str, wake_at: int) -> None:
        self.handed_off.append({"runId": run_id, "wakeAt": wake_at})

    def worker_code(self) -> Any:
        """The worker function's handler (its entry point, over this deployment's host)."""
        return make_lambda_handler(self.step_host)

    def drive_code(self) -> Any:
        """The drive function's handler: alarms drive runs, step requests are answered."""
        drive = make_drive_handler(
            lambda: self.driver, metrics=RecordingMetrics(), settings=lambda: self.settings
        )
        return serving_step_requests(drive, lambda: self.step_host)

    def invoke_drive(self, event: dict[str, Any]) -> Any:
        """Deliver ``event`` to the drive function as Scheduler does: through its alias."""
        answer = self.fake.invoke(
            FunctionName=f"{DRIVE}:live",
            InvocationType="RequestResponse",
            Payload=json.dumps(event).encode(),
        )
        return json.loads(answer["Payload"].read())

    def fire_next(self, deliver: Any) -> bool:
        """Move the clock to the earliest schedule and deliver its event (False: none)."""
        while self.handed_off:
            deliver(self.handed_off.pop(0))
        scheduler = self.clients.scheduler()
        group = self.settings.require("schedule_group")
        events = []
        for summary in scheduler.list_schedules(GroupName=group)["Schedules"]:
            found = scheduler.get_schedule(Name=summary["Name"], GroupName=group)
            events.append({"name": summary["Name"], **json.loads(found["Target"]["Input"])})
        if not events:
            return False
        event = min(events, key=lambda e: e["wakeAt"])
        self.clock.set(max(self.clock.now_ms(), event["wakeAt"]))
        scheduler.delete_schedule(Name=event["name"], GroupName=group)
        deliver({"runId": event["runId"], "wakeAt": event["wakeAt"]})
        return True

    def settle(self, deliver: Any, most: int = 10) -> None:
        """Fire every wake-up until none is left (a run waiting for its version never
        stops waking up: then this fails)."""
        for _ in range(most):
            if not self.fire_next(deliver):
                return
        raise AssertionError(f"the runs still wake up after {most} alarms")

    def run(self, run_id: str) -> RunDetail:
        found = self.driver.admin.get_run(run_id)
        assert found is not None
        return found

    def move_to_current_code(self, run_id: str) -> None:
        """The operator's ``upgrade`` action."""
        self.driver.engine.upgrade(run_id, by="oncall")


def _running_version() -> str:
    return os.environ["AWS_LAMBDA_FUNCTION_VERSION"]


def _register(versioning: Any) -> None:
    @workflow(id="lambda.versions", versioning=versioning)
    async def two_steps(data: Any, ctx: Any) -> Any:
        first = await ctx.step("first", _running_version)
        await ctx.sleep("1m")
        return [first, await ctx.step("second", _running_version)]


def _worker_deployment() -> Deployment:
    settings = dataclasses.replace(SETTINGS, dispatcher=DispatchTarget("lambda", f"{WORKER}:live"))
    return Deployment(settings)


def _drive_deployment() -> Deployment:
    # Signed: a hand-off to an earlier version carries a signature that version checks.
    return Deployment(dataclasses.replace(SETTINGS, signing_secret="deploy-secret"))


def _calls(fake: FakeLambda, function: str) -> list[Invocation]:
    return [call for call in fake.invocations if call.function == function]


def test_a_run_keeps_its_worker_version_after_a_deploy_while_new_runs_use_the_new_one() -> None:
    _register("pinned")
    deployment = _worker_deployment()
    fake = deployment.fake
    fake.publish(WORKER, build="build-1", code=deployment.worker_code())
    old = deployment.driver.trigger("lambda.versions", {})
    assert old.status == "waiting"
    assert old.code_version == CodeVersion(build="build-1", function=f"{WORKER}:1")

    fake.publish(WORKER, build="build-2", code=deployment.worker_code())
    new = deployment.driver.trigger("lambda.versions", {})
    assert new.code_version == CodeVersion(build="build-2", function=f"{WORKER}:2")
    deployment.settle(deployment.driver.engine.drive_from_event)

    finished_old, finished_new = deployment.run(old.id), deployment.run(new.id)
    assert finished_old.status == "completed" and finished_old.output == ["1", "1"]
    assert finished_old.code_version == CodeVersion(build="build-1", function=f"{WORKER}:1")
    assert finished_new.status == "completed" and finished_new.output == ["2", "2"]
    pinned = [c for c in fake.invocations if c.event.get("runId") == old.id]
    assert [(c.qualifier, c.executed) for c in pinned] == [("live", "1"), ("1", "1")]


def test_an_upgrade_run_moves_to_the_new_worker_version() -> None:
    _register("upgrade")
    deployment = _worker_deployment()
    fake = deployment.fake
    fake.publish(WORKER, build="build-1", code=deployment.worker_code())
    run = deployment.driver.trigger("lambda.versions", {})
    assert run.code_version == CodeVersion(build="build-1", function=f"{WORKER}:1")
    assert run.versioning == "upgrade"

    fake.publish(WORKER, build="build-2", code=deployment.worker_code())
    deployment.settle(deployment.driver.engine.drive_from_event)

    done = deployment.run(run.id)
    assert done.status == "completed" and done.output == ["1", "2"]
    assert done.code_version == CodeVersion(build="build-2", function=f"{WORKER}:2")
    assert [c.qualifier for c in fake.invocations] == ["live", "live"]


def test_an_alarm_through_the_drive_alias_reaches_the_drive_version_the_run_started_on() -> None:
    _register("pinned")
    deployment = _drive_deployment()
    fake = deployment.fake
    fake.publish(DRIVE, build="build-1", code=deployment.drive_code())
    with fake.running(DRIVE, "1"):
        run = deployment.driver.trigger("lambda.versions", {})
    assert run.status == "waiting"
    assert run.code_version == CodeVersion(build="build-1", function=f"{DRIVE}:1")

    fake.publish(DRIVE, build="build-2", code=deployment.drive_code())
    deployment.settle(deployment.invoke_drive)

    done = deployment.run(run.id)
    assert done.status == "completed" and done.output == ["1", "1"]
    assert done.code_version == CodeVersion(build="build-1", function=f"{DRIVE}:1")
    assert [(c.qualifier, c.executed) for c in fake.invocations] == [
        ("live", "2"),  # the alarm, on the newest version: its host refuses build 1...
        ("1", "1"),  # ...and hands the step request to version 1, which runs the body
    ]
    handed = fake.invocations[1].event
    assert set(handed) == {"headers", "body"}, "the hand-off is signed"
    assert json.loads(handed["body"])["codeVersion"]["function"] == f"{DRIVE}:1"


def test_a_new_run_on_the_new_drive_version_invokes_nothing_more() -> None:
    _register("pinned")
    deployment = _drive_deployment()
    fake = deployment.fake
    fake.publish(DRIVE, build="build-1", code=deployment.drive_code())
    fake.publish(DRIVE, build="build-2", code=deployment.drive_code())
    with fake.running(DRIVE, "2"):
        run = deployment.driver.trigger("lambda.versions", {})
    deployment.settle(deployment.invoke_drive)
    assert deployment.run(run.id).output == ["2", "2"]
    assert [(c.qualifier, c.executed) for c in fake.invocations] == [("live", "2")]


def test_a_deleted_drive_version_leaves_the_run_waiting_until_it_is_moved() -> None:
    _register("pinned")
    deployment = _drive_deployment()
    fake = deployment.fake
    fake.publish(DRIVE, build="build-1", code=deployment.drive_code())
    with fake.running(DRIVE, "1"):
        run = deployment.driver.trigger("lambda.versions", {})
    fake.publish(DRIVE, build="build-2", code=deployment.drive_code())
    fake.delete_version(DRIVE, "1")

    assert deployment.fire_next(deployment.invoke_drive)
    held = deployment.run(run.id)
    assert held.status == "running", "a version that is gone makes the run wait, not fail"
    assert held.version_wait is not None
    assert "version 1 of step host function stack-drive no longer exists" in (
        held.version_wait.reason
    )
    assert held.status_detail is not None and "waiting for its code version" in (held.status_detail)
    assert deployment.fire_next(deployment.invoke_drive), "it tries again on its alarm"
    assert deployment.run(run.id).version_wait.attempts == 2  # type: ignore[union-attr]

    with fake.running(DRIVE, "2"):
        deployment.move_to_current_code(run.id)
    deployment.settle(deployment.invoke_drive)
    done = deployment.run(run.id)
    assert done.status == "completed" and done.output == ["1", "2"]
    assert done.code_version == CodeVersion(build="build-2", function=f"{DRIVE}:2")
    assert done.version_wait is None


def test_a_run_on_latest_is_recorded_with_a_warning_in_its_view() -> None:
    _register("pinned")
    settings = dataclasses.replace(SETTINGS, dispatcher=DispatchTarget("lambda", WORKER))
    deployment = Deployment(settings)
    deployment.fake.publish(WORKER, build="build-1", code=deployment.worker_code())
    run = deployment.driver.trigger("lambda.versions", {})
    assert run.code_version == CodeVersion(build="build-1", function=f"{WORKER}:$LATEST")
    assert run.version_warning is not None
    assert "stack-worker:$LATEST, which is not a published version" in run.version_warning

    pinned = _worker_deployment()
    pinned.fake.publish(WORKER, build="build-1", code=pinned.worker_code())
    assert pinned.driver.trigger("lambda.versions", {}).version_warning is None


def test_a_run_started_by_the_api_function_is_handed_to_that_api_version() -> None:
    _register("pinned")
    deployment = _drive_deployment()
    fake = deployment.fake

    def api_not_needed() -> Any:
        raise AssertionError("a step request is answered without building the HTTP API")

    api_code = serving_step_requests(make_api_handler(api_not_needed), lambda: deployment.step_host)
    for build in ("build-1", "build-2"):
        fake.publish(API, build=build, code=api_code)
        fake.publish(DRIVE, build=build, code=deployment.drive_code())
    with fake.running(API, "1"):
        run = deployment.driver.trigger("lambda.versions", {})
    assert run.code_version == CodeVersion(build="build-1", function=f"{API}:1")

    deployment.settle(deployment.invoke_drive)
    done = deployment.run(run.id)
    assert done.status == "completed" and done.output == ["1", "1"]
    assert [(c.function, c.qualifier, c.executed) for c in fake.invocations] == [
        (DRIVE, "live", "2"),
        (API, "1", "1"),
    ]
