"""Reconciling schedules onto EventBridge Scheduler on moto, with states in DynamoDB: created,
changed and removed exactly as the manifest says; idempotent; pauses kept; concurrent
registrations converge; firings delivered through the drive handler."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from relayflow import Schedule, build_manifest, workflow
from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.manifests import DynamoDBManifestStore
from relayflow.adapters.aws.schedule_host import SchedulerScheduleHost
from relayflow.adapters.aws.schedule_states import DynamoDBScheduleStateStore
from relayflow.api.metrics import RecordingMetrics
from relayflow.config import Settings
from relayflow.drive.events import handle_drive_event
from relayflow.schedules.service import attach_schedules
from relayflow.testing import WorkflowTestEnv

GROUP = "relayflow-schedules"
SETTINGS = Settings(
    manifests_table="relayflow-manifests",
    recurring_schedule_group=GROUP,
    scheduler_role_arn="arn:aws:iam::123456789012:role/relayflow-scheduler",
    drive_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:relayflow-drive",
    region="eu-west-1",
)
START_MS = int(datetime(2026, 3, 2, tzinfo=UTC).timestamp() * 1000)


def body(input: Any, ctx: Any) -> Any:
    return ctx.step("echo", lambda: input)


@pytest.fixture
def env(aws: None) -> WorkflowTestEnv:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    env = WorkflowTestEnv(start_ms=START_MS, environment="production")
    env.driver.manifests = DynamoDBManifestStore.from_settings(
        SETTINGS, client_factory=clients.dynamodb, clock=env.clock
    )
    env.schedules = attach_schedules(
        env.driver,
        states=DynamoDBScheduleStateStore.from_settings(SETTINGS, client_factory=clients.dynamodb),
        host=SchedulerScheduleHost.from_settings(SETTINGS, client_factory=clients.scheduler),
    )
    env.scheduler = clients.scheduler()  # type: ignore[attr-defined]
    return env


def hosted(env: WorkflowTestEnv) -> dict[str, dict[str, Any]]:
    client = env.scheduler  # type: ignore[attr-defined]
    names = [s["Name"] for s in client.list_schedules(GroupName=GROUP)["Schedules"]]
    return {n: client.get_schedule(Name=n, GroupName=GROUP) for n in names}


def register(env: WorkflowTestEnv, *schedules: Any, workflow_id: str = "aws.sched") -> None:
    wf = workflow(id=workflow_id, schedule=list(schedules))(body)
    env.register_manifest(build_manifest(environment="production", workflows=[wf]))


def test_schedules_are_created_changed_and_removed_as_the_manifest_says(
    env: WorkflowTestEnv,
) -> None:
    register(
        env,
        Schedule.cron("0 9 * * MON-FRI", timezone="Europe/Berlin", name="morning"),
        Schedule.every("15m", name="poll"),
    )
    first = hosted(env)
    assert len(first) == 2
    by_expression = {s["ScheduleExpression"]: s for s in first.values()}
    morning = by_expression["cron(0 9 ? * MON-FRI *)"]
    assert morning["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert morning["State"] == "ENABLED"
    assert morning["ActionAfterCompletion"] == "NONE"
    assert morning["Target"]["Arn"] == SETTINGS.drive_function_arn
    payload = json.loads(morning["Target"]["Input"])
    assert payload["kind"] == "schedule"
    assert payload["environment"] == "production"
    assert payload["scheduledTime"] == "<aws.scheduler.scheduled-time>"
    poll = by_expression["rate(15 minutes)"]
    assert poll["StartDate"].timestamp() * 1000 == START_MS + 900_000
    for name in first:
        assert len(name) <= 64 and name.startswith("rfs-p-")

    again = env.schedules.reconcile("production")
    assert again.created == again.updated == again.deleted == []

    register(env, Schedule.cron("0 10 * * MON-FRI", timezone="Europe/Berlin", name="morning"))
    second = hosted(env)
    assert [s["ScheduleExpression"] for s in second.values()] == ["cron(0 10 ? * MON-FRI *)"]
    assert set(second) < set(first)  # same name kept for the named schedule

    env.register_manifest(build_manifest(environment="production", workflows=["aws.sched"]))
    assert hosted(env) == {}


def test_a_pause_survives_re_registration_on_scheduler(env: WorkflowTestEnv) -> None:
    register(env, Schedule.cron("0 * * * *", name="hourly"))
    (view,) = env.schedules.list("production")
    env.schedules.pause("production", view.spec.schedule_id)
    assert [s["State"] for s in hosted(env).values()] == ["DISABLED"]
    register(env, Schedule.cron("30 * * * *", name="hourly"))
    (schedule,) = hosted(env).values()
    assert (schedule["State"], schedule["ScheduleExpression"]) == ("DISABLED", "cron(30 * * * ? *)")
    env.schedules.resume("production", view.spec.schedule_id)
    assert [s["State"] for s in hosted(env).values()] == ["ENABLED"]


def test_a_registration_racing_a_reconcile_converges_on_the_current_manifest(
    env: WorkflowTestEnv,
) -> None:
    # Registration A is mid-way through reconciling (its first Scheduler write) when
    # registration B lands and reconciles; A's stale writes must not be the last word.
    older = workflow(id="aws.race", schedule=[Schedule.cron("0 * * * *")])(body)
    manifest_a = build_manifest(environment="production", workflows=[older])
    newer = workflow(id="aws.race", schedule=[Schedule.cron("30 * * * *")])(body)
    manifest_b = build_manifest(environment="production", workflows=[newer])
    host = env.schedules.host
    real_put = host.put
    raced: list[bool] = []

    def put_then_race(schedule: Any) -> None:
        real_put(schedule)
        if not raced:
            raced.append(True)
            env.register_manifest(manifest_b)

    host.put = put_then_race  # type: ignore[method-assign]
    env.register_manifest(manifest_a)

    assert raced == [True]
    current = env.driver.get_manifest("production")
    assert current is not None and current["versionId"] == manifest_b["versionId"]
    assert [s["ScheduleExpression"] for s in hosted(env).values()] == ["cron(30 * * * ? *)"]


def test_a_firing_through_the_drive_handler_starts_one_run(env: WorkflowTestEnv) -> None:
    register(env, Schedule.cron("0 9 * * *", input={"hello": "world"}))
    (schedule,) = hosted(env).values()
    template = schedule["Target"]["Input"]
    delivered = json.loads(
        template.replace("<aws.scheduler.scheduled-time>", "2026-03-02T09:00:00Z")
    )
    metrics = RecordingMetrics()
    first = handle_drive_event(env.driver, delivered, None, metrics)
    (result,) = first["driven"]
    assert result["status"] == "started"
    assert env.get_run(result["runId"]).output == {"hello": "world"}
    batch = {
        "Records": [
            {"messageId": "a", "eventSource": "aws:sqs", "body": json.dumps(delivered)},
        ]
    }
    second = handle_drive_event(env.driver, batch, None, metrics)
    assert second == {
        "batchItemFailures": [],
        "driven": [{**result, "status": "duplicate"}],
    }
    assert len(env.list_runs().runs) == 1
    states = env.schedules.states.list("production")
    assert [s.last_scheduled_ms for s in states] == [START_MS + 9 * 3_600_000]


def test_the_latest_run_and_how_it_started_are_kept_in_dynamodb(env: WorkflowTestEnv) -> None:
    register(env, Schedule.cron("0 9 * * *", name="daily", overlap="allow"))
    (schedule_id,) = [s.schedule_id for s in env.schedules.states.list("production")]
    env.fire_schedule(schedule_id, "2026-03-02T09:00:00Z")
    env.run_until_idle()
    (scheduled,) = env.schedules.list("production")
    assert scheduled.last_run is not None and scheduled.last_run.manual is False
    assert scheduled.last_run.scheduled_time == "2026-03-02T09:00:00Z"
    assert scheduled.last_run.status == "completed"

    fired = env.schedules.trigger_now("production", schedule_id)

    (manual,) = env.schedules.list("production")
    assert manual.last_run is not None
    assert (manual.last_run.run_id, manual.last_run.manual) == (fired.run_id, True)
    assert manual.last_run.status == "completed"
    (state,) = env.schedules.states.list("production")
    assert state.last_run_id == fired.run_id
    assert state.last_scheduled_ms == START_MS + 9 * 3_600_000  # a trigger now moves none
