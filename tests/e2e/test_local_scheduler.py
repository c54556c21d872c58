"""The local scheduler fires due one-time schedules of moto's Scheduler into a callback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from relayflow.local.scheduler import LocalScheduler, due_time_ms
from relayflow.testing.aws import mock_aws

GROUP = "relayflow-local"
NOW = 1_700_000_000_000


@pytest.fixture
def scheduler_client() -> Iterator[Any]:
    with mock_aws(region="us-east-1"):
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name=GROUP)
        yield client


def arm(client: Any, name: str, run_id: str, wake_at: int, expression: str) -> None:
    client.create_schedule(
        Name=name,
        GroupName=GROUP,
        ScheduleExpression=expression,
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:drive",
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": json.dumps({"runId": run_id, "wakeAt": wake_at}),
        },
    )


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def make(client: Any, clock: Clock) -> tuple[LocalScheduler, list[dict[str, Any]]]:
    fired: list[dict[str, Any]] = []
    return LocalScheduler(client=client, group=GROUP, fire=fired.append, now_ms=clock), fired


def test_a_due_schedule_fires_once_and_is_deleted(scheduler_client: Any) -> None:
    clock = Clock()
    arm(scheduler_client, "rf-a", "run_a", NOW + 1500, "at(2023-11-14T22:13:22)")
    scheduler, fired = make(scheduler_client, clock)
    try:
        assert scheduler.tick() == []
        clock.now = NOW + 1500
        assert scheduler.tick() == ["rf-a"]
        assert fired == [{"runId": "run_a", "wakeAt": NOW + 1500}]
        assert scheduler_client.list_schedules(GroupName=GROUP)["Schedules"] == []
        assert scheduler.tick() == []
    finally:
        scheduler.stop()


def test_only_due_schedules_fire(scheduler_client: Any) -> None:
    clock = Clock()
    arm(scheduler_client, "rf-early", "run_e", NOW - 10, "at(2023-11-14T22:13:20)")
    arm(scheduler_client, "rf-late", "run_l", NOW + 60_000, "at(2023-11-14T22:14:20)")
    scheduler, fired = make(scheduler_client, clock)
    try:
        assert scheduler.tick() == ["rf-early"]
        assert [p["runId"] for p in fired] == ["run_e"]
        names = [s["Name"] for s in scheduler_client.list_schedules(GroupName=GROUP)["Schedules"]]
        assert names == ["rf-late"]
    finally:
        scheduler.stop()


def test_a_rearmed_schedule_fires_at_its_new_time(scheduler_client: Any) -> None:
    clock = Clock()
    arm(scheduler_client, "rf-a", "run_a", NOW + 60_000, "at(2023-11-14T22:14:20)")
    scheduler, fired = make(scheduler_client, clock)
    try:
        assert scheduler.tick() == []
        scheduler_client.delete_schedule(Name="rf-a", GroupName=GROUP)
        arm(scheduler_client, "rf-a", "run_a", NOW + 100, "at(2023-11-14T22:13:21)")
        clock.now = NOW + 100
        assert scheduler.tick() == ["rf-a"]
        assert fired == [{"runId": "run_a", "wakeAt": NOW + 100}]
    finally:
        scheduler.stop()


def test_a_failing_drive_does_not_stop_the_scheduler(scheduler_client: Any) -> None:
    clock = Clock()
    arm(scheduler_client, "rf-a", "run_a", NOW, "at(2023-11-14T22:13:20)")

    def broken(payload: dict[str, Any]) -> None:
        raise RuntimeError("drive failed")

    scheduler = LocalScheduler(client=scheduler_client, group=GROUP, fire=broken, now_ms=clock)
    try:
        assert scheduler.tick() == ["rf-a"]
        arm(scheduler_client, "rf-b", "run_b", NOW, "at(2023-11-14T22:13:20)")
        assert scheduler.tick() == ["rf-b"]
    finally:
        scheduler.stop()


@pytest.mark.parametrize(
    ("expression", "payload", "expected"),
    [
        ("at(2023-11-14T22:13:21)", {"runId": "r", "wakeAt": NOW + 300}, NOW + 300),
        ("at(2023-11-14T22:13:21)", {"runId": "r"}, NOW + 1000),
        ("at(2023-11-14T22:13:21)", None, NOW + 1000),
        ("rate(5 minutes)", None, None),
    ],
)
def test_due_time(expression: str, payload: dict[str, Any] | None, expected: int | None) -> None:
    assert due_time_ms(expression, payload) == expected


class DisarmingBetweenPages:
    """A Scheduler client whose next page loses schedules while the first is being read, as
    when drives disarm alarms (or the scheduler's own deletes land) during a listing: the
    page token names a schedule that is gone when it is used."""

    def __init__(self, client: Any, disarm: int) -> None:
        self._client = client
        self._disarm = disarm
        self.disarmed: list[str] = []
        self.exceptions = client.exceptions

    def list_schedules(self, **params: Any) -> Any:
        page = self._client.list_schedules(**params)
        if "NextToken" not in params and page.get("NextToken") and not self.disarmed:
            following = self._client.list_schedules(**params, NextToken=page["NextToken"])
            for item in following["Schedules"][: self._disarm]:
                self._client.delete_schedule(Name=item["Name"], GroupName=GROUP)
                self.disarmed.append(item["Name"])
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_schedules_disarmed_while_a_listing_pages_do_not_stop_the_others(
    scheduler_client: Any,
) -> None:
    clock = Clock()
    for index in range(250):
        arm(scheduler_client, f"rf-{index:03d}", f"run_{index}", NOW, "at(2023-11-14T22:13:20)")
    client = DisarmingBetweenPages(scheduler_client, disarm=5)
    fired: list[dict[str, Any]] = []
    scheduler = LocalScheduler(client=client, group=GROUP, fire=fired.append, now_ms=clock)
    try:
        names = scheduler.tick()
    finally:
        scheduler.stop()
    assert len(client.disarmed) == 5
    assert sorted(names) == sorted(
        f"rf-{i:03d}" for i in range(250) if f"rf-{i:03d}" not in client.disarmed
    )
    assert len(fired) == 245
    assert scheduler_client.list_schedules(GroupName=GROUP)["Schedules"] == []
