"""The SQS delay path on moto: near wake-ups become delayed messages (moto honours
``DelaySeconds``), far ones go to Scheduler a few minutes early, and the early firing hands
the remaining seconds to the queue through the engine's re-arm."""

from __future__ import annotations

import json

import pytest

from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.sqs_alarms import (
    HorizonAlarmClock,
    SqsDelayAlarmClock,
    delay_seconds,
)
from relayflow.adapters.memory import InMemoryAlarmClock
from relayflow.clock import VirtualClock
from relayflow.errors import ValidationError

NOW = 1_700_000_000_000


@pytest.fixture
def queue(aws: None) -> tuple[object, str]:
    sqs = AwsClients(region="eu-west-1").sqs()
    return sqs, sqs.create_queue(QueueName="relayflow-alarms")["QueueUrl"]


def test_delays_round_up_and_are_capped() -> None:
    assert delay_seconds(NOW + 10_000, NOW) == 10
    assert delay_seconds(NOW + 10_001, NOW) == 11
    assert delay_seconds(NOW - 5_000, NOW) == 0
    assert delay_seconds(NOW + 2_000_000, NOW) == 900


def test_a_near_wake_up_is_a_delayed_message(queue: tuple[object, str]) -> None:
    sqs, url = queue
    clock = VirtualClock(NOW)
    alarms = SqsDelayAlarmClock(url, client_factory=lambda: sqs, clock=clock)  # type: ignore[arg-type,return-value]
    alarms.arm("run_a", NOW + 60_000)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]  # type: ignore[attr-defined]
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "1"
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []  # type: ignore[attr-defined]

    alarms.arm("run_b", NOW)  # due now: no delay
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]  # type: ignore[attr-defined]
    assert json.loads(message["Body"]) == {"runId": "run_b", "wakeAt": NOW}
    with pytest.raises(ValidationError, match="more than 900 s"):
        alarms.arm("run_c", NOW + 901_000)


def test_the_horizon_routes_near_to_the_queue_and_far_to_scheduler_early() -> None:
    clock = VirtualClock(NOW)
    near, far = InMemoryAlarmClock(), InMemoryAlarmClock()
    alarms = HorizonAlarmClock(near=near, far=far, clock=clock)
    alarms.arm("short", NOW + 10_000)
    alarms.arm("edge", NOW + 900_000)
    alarms.arm("long", NOW + 3_600_000)
    assert near.pending() == [("short", NOW + 10_000), ("edge", NOW + 900_000)]
    assert far.pending() == [("long", NOW + 3_600_000 - 180_000)]
    # The early Scheduler firing re-arms at the real wake time, now within the horizon.
    clock.set(NOW + 3_600_000 - 180_000)
    alarms.arm("long", NOW + 3_600_000)
    assert near.armed("long") == NOW + 3_600_000
    alarms.disarm("long")
    assert far.armed("long") is None and near.armed("long") is None
