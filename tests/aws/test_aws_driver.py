"""build_aws_driver assembles DynamoDB, S3, Scheduler and the dispatchers into a driver."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from moto_driver import SETTINGS

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.alarms import schedule_name
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.wiring import build_aws_driver, build_dispatchers
from relayflow.clock import VirtualClock
from relayflow.config import DispatchTarget, Settings
from relayflow.dispatch.http_dispatcher import HttpDispatcher
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher
from relayflow.errors import ValidationError
from relayflow.ports import DispatcherResolver
from relayflow.sdk.registry import workflow
from relayflow.worker.hosts import make_lambda_handler, make_step_host

T0 = 1_767_225_600_000


@workflow(id="aws.driver.nap")
def nap(data: Any, ctx: Any) -> dict[str, Any]:
    ctx.sleep("10m")
    return {"woke": True, "data": data}


def test_a_sleeping_run_is_stored_alarmed_and_woken(aws: None) -> None:
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
        Name=schedule_name("nap-1", T0 + 600_000), GroupName=SETTINGS.schedule_group
    )
    assert schedule["ScheduleExpression"] == "at(2026-01-01T00:10:00)"
    event = json.loads(schedule["Target"]["Input"])
    assert event == {"runId": "nap-1", "wakeAt": T0 + 600_000, "via": "scheduler"}
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


@workflow(id="aws.driver.big")
def big(data: Any, ctx: Any) -> dict[str, Any]:
    blob = ctx.step("render", lambda: "x" * data["bytes"])
    ctx.sleep("1m")
    return {"blob": blob, "size": len(blob)}


class InProcessLambda:
    """A Lambda client that runs the step host handler in this process (moto never runs code)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.request_sizes: list[int] = []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        payload = kwargs["Payload"]
        self.request_sizes.append(len(payload))
        answer = self.handler(json.loads(payload), None)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


def test_a_5_mb_step_output_round_trips_through_a_lambda_step_host(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    payloads = S3PayloadStore(SETTINGS.require("payload_bucket"), client_factory=clients.s3)
    host = InProcessLambda(make_lambda_handler(make_step_host(payload_store=payloads)))
    lambda_host = LambdaDispatcher("steps", client_factory=lambda: host)  # type: ignore[arg-type,return-value]
    # The host reads the wall clock (request deadlines), so virtual time starts at real time.
    start = int(time.time() * 1000)
    clock = VirtualClock(start)
    driver = build_aws_driver(
        SETTINGS,
        clients=clients,
        clock=clock,
        on_due=lambda r, at: None,
        dispatchers=DispatcherResolver(default=lambda_host),
    )
    size = 5 * 1024 * 1024

    run = driver.trigger("aws.driver.big", {"bytes": size}, run_id="big-1")
    assert run.status == "waiting"
    clock.advance(60_000)
    driver.engine.drive_from_event({"runId": "big-1", "wakeAt": start + 60_000})

    done = driver.admin.get_run("big-1")
    assert done.status == "completed"
    assert done.output["size"] == size
    assert done.output["blob"] == "x" * size
    # The 5 MB value crossed the wire as a pointer both ways, never inline.
    assert max(host.request_sizes) < 64 * 1024

    # History with values: a value over the per-entry cap is sized from its pointer and left
    # out (never fetched); one over the inline cap but under the entry cap is resolved.
    [render] = [e for e in driver.admin.get_run("big-1", values=True).timeline if e.id == "render"]
    assert (render.value, render.value_truncated) == (None, True)
    assert render.value_size is not None and render.value_size >= size
    mid = 40 * 1024
    driver.trigger("aws.driver.big", {"bytes": mid}, run_id="big-2")
    page = driver.admin.timeline("big-2", values=True)
    [render] = [e for e in page.entries if e.id == "render"]
    assert (render.value, render.value_truncated) == ("x" * mid, False)


@workflow(id="aws.driver.two_deliveries")
def two_deliveries(data: Any, ctx: Any) -> list[Any]:
    return [ctx.wait_for_event("first"), ctx.wait_for_signal("second")]


def _delivery_items(clients: AwsClients, run_id: str) -> list[dict[str, Any]]:
    answer = clients.dynamodb().query(
        TableName=SETTINGS.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"#delivery#run:{run_id}"}},
        ConsistentRead=True,
    )
    return list(answer["Items"])


def test_delivery_ids_live_as_long_as_their_run_then_expire_with_it(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    clock = VirtualClock(T0)
    driver = build_aws_driver(SETTINGS, clients=clients, clock=clock, on_due=lambda r, at: None)
    driver.trigger("aws.driver.two_deliveries", None, run_id="ids-1")
    assert driver.send_event("ids-1", "first", 1, event_id="e1").status == "resolved"
    clock.advance(400 * 86_400_000)  # longer than any fixed memory of ids
    assert driver.send_event("ids-1", "first", 1, event_id="e1").status == "duplicate"
    items = _delivery_items(clients, "ids-1")
    assert [i["sk"]["S"] for i in items] == ["EVENT:e1"]
    assert all("expiresAt" not in i for i in items), "no expiry while the run lives"
    assert driver.send_signal("ids-1", "second", 2, signal_id="s1").status == "resolved"
    assert driver.admin.get_run("ids-1").status == "completed"
    header = clients.dynamodb().get_item(
        TableName=SETTINGS.table_name, Key={"pk": {"S": "ids-1"}, "sk": {"S": "#run"}}
    )["Item"]
    items = _delivery_items(clients, "ids-1")
    assert sorted(i["sk"]["S"] for i in items) == ["EVENT:e1", "SIGNAL:s1"]
    assert {i["expiresAt"]["N"] for i in items} == {header["expiresAt"]["N"]}
