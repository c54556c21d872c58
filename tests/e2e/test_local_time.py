"""The dev stack's stand-ins on moto: the local recurring scheduler fires Scheduler's cron,
rate and one-time schedules at their times (scheduled time filled in, paused ones not), and
the local event source mapping delivers the alarm queue's messages, keeping failed ones."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from relayflow.adapters.aws.schedule_host import SchedulerScheduleHost
from relayflow.local.queue_poller import LocalQueuePoller
from relayflow.local.recurring_scheduler import LocalRecurringScheduler
from relayflow.schedules.reconcile import HostedSchedule

GROUP = "relayflow-schedules"
START = int(datetime(2026, 3, 2, 8, 59, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name=GROUP)
        yield {"scheduler": scheduler, "sqs": boto3.client("sqs", region_name="us-east-1")}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


def put(client: Any, name: str, expression: str, **fields: Any) -> None:
    host = SchedulerScheduleHost(
        group=GROUP,
        target_arn="arn:aws:lambda:us-east-1:123456789012:function:drive",
        role_arn="arn:aws:iam::123456789012:role/scheduler",
        client_factory=lambda: client,
    )
    host.put(
        HostedSchedule(
            name=name,
            expression=expression,
            timezone=fields.pop("timezone", "UTC"),
            enabled=fields.pop("enabled", True),
            payload={"kind": "schedule", "environment": "development", "scheduleId": name},
            start_ms=fields.pop("start_ms", None),
        )
    )


def test_the_recurring_scheduler_fires_each_schedule_at_its_times(clients: dict[str, Any]) -> None:
    client = clients["scheduler"]
    clock = Clock()
    put(client, "rfs-d-cron", "cron(0 9 * * ? *)")
    put(client, "rfs-d-rate", "rate(30 minutes)", start_ms=START + 60_000)
    put(client, "rfs-d-once", "at(2026-03-02T09:10:00)")
    put(client, "rfs-d-paused", "cron(* * * * ? *)", enabled=False)
    fired: list[dict[str, Any]] = []
    local = LocalRecurringScheduler(client=client, group=GROUP, fire=fired.append, now_ms=clock)

    assert local.tick() == []
    clock.now = START + 60_000  # 09:00
    assert sorted(n for n, _ in local.tick()) == ["rfs-d-cron", "rfs-d-rate"]
    assert {(p["scheduleId"], p["scheduledTime"]) for p in fired} == {
        ("rfs-d-cron", "2026-03-02T09:00:00Z"),
        ("rfs-d-rate", "2026-03-02T09:00:00Z"),
    }
    clock.now = START + 11 * 60_000  # 09:10: the one-shot fires and is deleted
    assert local.tick() == [("rfs-d-once", START + 11 * 60_000)]
    names = {s["Name"] for s in client.list_schedules(GroupName=GROUP)["Schedules"]}
    assert "rfs-d-once" not in names
    clock.now = START + 31 * 60_000  # 09:30
    assert local.tick() == [("rfs-d-rate", START + 31 * 60_000)]
    assert all(p["scheduleId"] != "rfs-d-paused" for p in fired)


def test_a_schedule_far_behind_fires_once_for_its_latest_time(clients: dict[str, Any]) -> None:
    client = clients["scheduler"]
    clock = Clock()
    put(client, "rfs-d-minutely", "cron(* * * * ? *)")
    fired: list[dict[str, Any]] = []
    local = LocalRecurringScheduler(client=client, group=GROUP, fire=fired.append, now_ms=clock)
    local.tick()
    clock.now = START + 10 * 60_000
    assert len(local.tick()) == 1


def test_the_queue_poller_delivers_batches_and_keeps_failed_messages(
    clients: dict[str, Any],
) -> None:
    sqs = clients["sqs"]
    url = sqs.create_queue(QueueName="alarms", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"runId": "ok"}))
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"runId": "bad"}))
    sqs.send_message(QueueUrl=url, MessageBody="{}", DelaySeconds=900)  # not due yet
    seen: list[dict[str, Any]] = []

    def deliver(event: dict[str, Any]) -> dict[str, Any]:
        failures = []
        for record in event["Records"]:
            assert record["eventSource"] == "aws:sqs"
            seen.append(json.loads(record["body"]))
            if seen[-1] == {"runId": "bad"}:
                failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}

    poller = LocalQueuePoller(client=sqs, queue_url=url, deliver=deliver)
    assert poller.poll() == 2
    assert sorted(p["runId"] for p in seen) == ["bad", "ok"]
    assert poller.poll() == 1  # the failed one came back; the delayed one is still hidden
    assert seen[-1] == {"runId": "bad"}


def test_a_long_drive_does_not_hold_up_the_other_batches(clients: dict[str, Any]) -> None:
    sqs = clients["sqs"]
    url = sqs.create_queue(QueueName="handoffs")["QueueUrl"]
    slow_started, fast_done, release = threading.Event(), threading.Event(), threading.Event()

    def deliver(event: dict[str, Any]) -> dict[str, Any]:
        for record in event["Records"]:
            if json.loads(record["body"])["runId"] == "slow":
                slow_started.set()
                assert release.wait(30)
            else:
                fast_done.set()
        return {"batchItemFailures": []}

    poller = LocalQueuePoller(client=sqs, queue_url=url, deliver=deliver, interval_s=0.01)
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"runId": "slow"}))
    poller.start()
    try:
        assert slow_started.wait(10)
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"runId": "fast"}))
        # The mapping drives several batches at once: the second run's drive goes ahead.
        assert fast_done.wait(10), "a hand-off waited for another run's drive"
        assert not release.is_set()
    finally:
        release.set()
        poller.stop()
    # The slow batch was driven to its end (its message deleted) before stop returned.
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert counts == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }
