"""build_aws_driver assembles DynamoDB, S3, Scheduler and the dispatchers into a driver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto_driver import SETTINGS

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.alarms import schedule_name
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.driver import build_aws_driver, build_dispatchers
from relayflow.adapters.memory.clock import VirtualClock
from relayflow.config import DispatchTarget, Settings
from relayflow.dispatch.http_dispatcher import HttpDispatcher
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher
from relayflow.errors import ValidationError
from relayflow.sdk.registry import workflow

T0 = 1_767_225_600_000


@workflow(id="aws.driver.nap")
def nap(data: Any, ctx: Any) -> dict[str, Any]:
    ctx.sleep("10m")
    return {"woke": True, "data": data}


def test_a_sleeping_run_is_stored_alarmed_and_woken(aws: None, fast_transactions: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    clock = VirtualClock(T0)
    due: list[tuple[str, int]] = []
    driver = build_aws_driver(
        SETTINGS, clients=clients, clock=clock, on_due=lambda r, at: due.append((r, at))
    )
    run = driver.trigger("aws.driver.nap", {"n": 1}, run_id="nap-1")
    assert run.status == "waiting"
    schedule = clients.scheduler().get_schedule(
        Name=schedule_name("nap-1"), GroupName=SETTINGS.schedule_group
    )
    assert schedule["ScheduleExpression"] == "at(2026-01-01T00:10:00)"
    event = json.loads(schedule["Target"]["Input"])
    assert event == {"runId": "nap-1", "wakeAt": T0 + 600_000}
    clock.advance(600_000)
    driver.engine.drive_from_event(event)
    done = driver.admin.get_run("nap-1")
    assert done.status == "completed"
    assert done.output == {"woke": True, "data": {"n": 1}}
    stored = clients.dynamodb().get_item(
        TableName=SETTINGS.table_name, Key={"pk": {"S": "nap-1"}, "sk": {"S": "#run"}}
    )["Item"]
    assert stored["status"]["S"] == "completed"
    assert "expiresAt" in stored


def test_the_driver_needs_its_resources_named() -> None:
    with pytest.raises(ValidationError, match="RELAYFLOW_TABLE_NAME"):
        build_aws_driver(Settings(region="eu-west-1"))


def test_dispatchers_follow_the_settings() -> None:
    settings = Settings.from_env(
        {
            "RELAYFLOW_DISPATCHER": "lambda",
            "RELAYFLOW_DISPATCH_FUNCTION": "steps",
            "RELAYFLOW_DISPATCH_MAP": json.dumps(
                {"tenant-a": "http:https://a.example/step", "wf.local": "inline"}
            ),
        }
    )
    resolver = build_dispatchers(settings, AwsClients(region="eu-west-1"))
    assert isinstance(resolver.resolve(workflow_id="x", tenant_script=None), LambdaDispatcher)
    by_tenant = resolver.resolve(workflow_id="wf.local", tenant_script="tenant-a")
    assert isinstance(by_tenant, HttpDispatcher) and by_tenant.url == "https://a.example/step"
    assert isinstance(
        resolver.resolve(workflow_id="wf.local", tenant_script=None), InlineDispatcher
    )
    assert settings.dispatch_target_for("wf.local") == DispatchTarget("inline")
