"""Step rate limits on the AWS driver's inline step host: slots reserved in DynamoDB (atomic
moto), waiting runs parked on Scheduler alarms and woken by their events, on a virtual clock."""

from __future__ import annotations

import json
from typing import Any

from moto_driver import SETTINGS

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.rate_limits import PARTITION_PREFIX, STATE_SK
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.clock import VirtualClock
from relayflow.drivers import WorkflowDriver
from relayflow.flow import RateLimit
from relayflow.sdk.registry import workflow
from relayflow.testing import crash

T0 = 1_767_225_600_000
SECOND = 1_000


class Harness:
    """The AWS driver on moto with its default (inline) step host and Scheduler alarms."""

    def __init__(self) -> None:
        self.clients = AwsClients(region="eu-west-1")
        tables.create_resources(self.clients, SETTINGS)
        self.clock = VirtualClock(T0)
        self.driver: WorkflowDriver = build_aws_driver(
            SETTINGS, clients=self.clients, clock=self.clock, on_due=self._due_now
        )
        self.handed_off: list[dict[str, Any]] = []

    def _due_now(self, run_id: str, wake_at: int) -> None:
        self.handed_off.append({"runId": run_id, "wakeAt": wake_at})

    def schedules(self) -> list[dict[str, Any]]:
        """The events of the schedules relayflow left in moto's Scheduler, earliest first."""
        scheduler = self.clients.scheduler()
        events = []
        for page in scheduler.get_paginator("list_schedules").paginate(
            GroupName=SETTINGS.schedule_group
        ):
            for summary in page["Schedules"]:
                found = scheduler.get_schedule(
                    Name=summary["Name"], GroupName=SETTINGS.schedule_group
                )
                events.append({"name": summary["Name"], **json.loads(found["Target"]["Input"])})
        return sorted(events, key=lambda event: event["wakeAt"])

    def fire_next(self) -> bool:
        """Move the clock to the earliest schedule and deliver its event as Scheduler does."""
        while self.handed_off:
            self.driver.engine.drive_from_event(self.handed_off.pop(0))
        pending = self.schedules()
        if not pending:
            return False
        event = pending[0]
        assert event["wakeAt"] >= self.clock.now_ms(), "an alarm was left behind"
        self.clock.set(event["wakeAt"])
        self.clients.scheduler().delete_schedule(
            Name=event["name"], GroupName=SETTINGS.schedule_group
        )
        self.driver.engine.drive_from_event({"runId": event["runId"], "wakeAt": event["wakeAt"]})
        return True

    def limiter_item(self, key: str) -> dict[str, Any]:
        item: dict[str, Any] = self.clients.dynamodb().get_item(
            TableName=SETTINGS.table_name,
            Key={"pk": {"S": PARTITION_PREFIX + key}, "sk": {"S": STATE_SK}},
            ConsistentRead=True,
        )["Item"]
        return item


def test_ten_a_minute_admits_ten_at_once_then_one_every_six_seconds_none_early(
    aws: None,
) -> None:
    harness = Harness()
    calls: list[tuple[int, str]] = []

    def call_partner(n: int) -> int:
        calls.append((harness.clock.now_ms(), f"n{n}"))
        return n

    @workflow(id="aws.rate.push")
    def push(data: Any, ctx: Any) -> Any:
        limit = RateLimit(key="partner-api", limit=10, window="1m")
        return ctx.step("push", call_partner, data["n"], rate_limit=limit)

    runs = [harness.driver.trigger("aws.rate.push", {"n": n}) for n in range(60)]
    assert [run.status for run in runs].count("completed") == 10
    assert {run.status for run in runs[10:]} == {"waiting"}, "the rest wait for their slots"
    while harness.fire_next():
        pass
    assert {harness.driver.admin.get_run(run.id).status for run in runs} == {"completed"}
    assert len(calls) == 60, "each run called the partner once"
    times = sorted(t for t, _ in calls)
    assert times[:10] == [T0] * 10
    earliest = [T0 + max(0, i - 9) * 6 * SECOND for i in range(60)]
    assert all(t >= due for t, due in zip(times, earliest, strict=True)), "a call came early"
    # Every waiting run woke at its own slot: no two calls after the burst share an instant.
    assert len(set(times[10:])) == 50
    assert times[-1] == earliest[-1], "alarms fire at the reserved slot, not later"


def test_a_crashed_invocation_gets_its_own_slot_back_and_takes_no_second_one(
    aws: None,
) -> None:
    harness = Harness()
    calls: list[tuple[str, int]] = []
    crashes = {"left": 1}

    def call_partner(name: str) -> str:
        if name == "first" and crashes["left"]:
            crashes["left"] -= 1
            crash()
        calls.append((name, harness.clock.now_ms()))
        return name

    @workflow(id="aws.rate.once")
    def once(data: Any, ctx: Any) -> Any:
        limit = RateLimit(key="one-a-minute", limit=1, window="1m")
        return ctx.step("call", call_partner, data["name"], rate_limit=limit)

    first = harness.driver.trigger("aws.rate.once", {"name": "first"}, run_id="first")
    assert first.status == "running", "the host died holding the slot"
    reserved = json.loads(harness.limiter_item("one-a-minute")["res"]["S"])
    assert len(reserved) == 1
    # The dead driver's run is taken over: the same attempt finds its reservation.
    recovered = harness.driver.engine.drive("first", take_over=True)
    assert recovered is not None and recovered.status == "completed"
    assert calls == [("first", T0)]
    item = harness.limiter_item("one-a-minute")
    assert json.loads(item["res"]["S"]).keys() == reserved.keys(), "no second reservation"
    second = harness.driver.trigger("aws.rate.once", {"name": "second"}, run_id="second")
    assert second.status == "waiting"
    while harness.fire_next():
        pass
    assert calls == [("first", T0), ("second", T0 + 60 * SECOND)], "the slot after the first"
