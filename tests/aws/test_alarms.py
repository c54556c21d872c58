"""Run alarms are one-time Scheduler schedules; arming and disarming are idempotent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from relayflow.adapters.aws.alarms import (
    SchedulerAlarmClock,
    at_expression,
    lambda_event_on_due,
    legacy_schedule_name,
    schedule_name,
)
from relayflow.adapters.aws.errors import AwsServiceError
from relayflow.config import Settings
from relayflow.errors import ValidationError

GROUP = "relayflow-alarms"
DRIVE = "arn:aws:lambda:eu-west-1:123456789012:function:relayflow-drive"
ROLE = "arn:aws:iam::123456789012:role/relayflow-scheduler"
DLQ = "arn:aws:sqs:eu-west-1:123456789012:relayflow-dlq"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


class VirtualClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


@pytest.fixture
def scheduler(aws: None) -> Iterator[Any]:
    client = boto3.client("scheduler", region_name="eu-west-1")
    client.create_schedule_group(Name=GROUP)
    yield client


def make_clock(scheduler: Any, **kwargs: Any) -> SchedulerAlarmClock:
    return SchedulerAlarmClock(
        group=GROUP,
        target_arn=DRIVE,
        role_arn=ROLE,
        dlq_arn=DLQ,
        client_factory=lambda: scheduler,
        clock=kwargs.pop("clock", VirtualClock(T0)),
        **kwargs,
    )


def test_arm_creates_a_one_time_schedule_for_the_drive_function(scheduler: Any) -> None:
    alarms = make_clock(scheduler)
    alarms.arm("run-1", T0 + 90_500)
    schedule = scheduler.get_schedule(Name=schedule_name("run-1", T0 + 90_500), GroupName=GROUP)
    assert schedule["ScheduleExpression"] == "at(2026-01-01T00:01:31)"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["State"] == "ENABLED"
    target = schedule["Target"]
    assert target["Arn"] == DRIVE
    assert target["RoleArn"] == ROLE
    assert json.loads(target["Input"]) == {
        "runId": "run-1",
        "wakeAt": T0 + 90_500,
        "via": "scheduler",
    }
    assert target["DeadLetterConfig"] == {"Arn": DLQ}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}


def test_re_arming_one_wake_updates_its_schedule(scheduler: Any) -> None:
    alarms = make_clock(scheduler)
    alarms.arm("run-1", T0 + 3_600_000)
    alarms.arm("run-1", T0 + 3_600_000)
    listed = scheduler.list_schedules(GroupName=GROUP)["Schedules"]
    assert [s["Name"] for s in listed] == [schedule_name("run-1", T0 + 3_600_000)]
    assert alarms.armed_at("run-1") == "at(2026-01-01T01:00:00)"
    schedule = scheduler.get_schedule(Name=schedule_name("run-1", T0 + 3_600_000), GroupName=GROUP)
    assert json.loads(schedule["Target"]["Input"])["wakeAt"] == T0 + 3_600_000


def test_each_wake_has_its_own_schedule_and_a_late_disarm_spares_a_newer_one(
    scheduler: Any,
) -> None:
    alarms = make_clock(scheduler)
    alarms.arm("run-1", T0 + 60_000)
    # Another process parks the run again for a later wake, then this process's disarm of
    # the first wake arrives late: the newer alarm must survive it.
    alarms.arm("run-1", T0 + 3_600_000)
    alarms.disarm("run-1", T0 + 60_000)
    listed = scheduler.list_schedules(GroupName=GROUP)["Schedules"]
    assert [s["Name"] for s in listed] == [schedule_name("run-1", T0 + 3_600_000)]
    assert alarms.armed_at("run-1") == "at(2026-01-01T01:00:00)"


def test_disarm_deletes_and_is_idempotent(scheduler: Any) -> None:
    alarms = make_clock(scheduler)
    alarms.arm("run-1", T0 + 60_000)
    alarms.disarm("run-1", T0 + 60_000)
    assert alarms.armed_at("run-1") is None
    alarms.disarm("run-1", T0 + 60_000)
    alarms.disarm("never-armed", T0)
    assert scheduler.list_schedules(GroupName=GROUP)["Schedules"] == []


def test_disarm_without_a_wake_time_removes_every_alarm_of_the_run(scheduler: Any) -> None:
    alarms = make_clock(scheduler)
    alarms.arm("run-1", T0 + 60_000)
    alarms.arm("run-1", T0 + 120_000)
    alarms.arm("run-10", T0 + 60_000)
    alarms.disarm("run-1")
    listed = scheduler.list_schedules(GroupName=GROUP)["Schedules"]
    assert [s["Name"] for s in listed] == [schedule_name("run-10", T0 + 60_000)]


def test_disarm_without_a_wake_time_also_removes_a_schedule_named_the_old_way(
    scheduler: Any,
) -> None:
    alarms = make_clock(scheduler)
    params = alarms._schedule_params("run-1", T0 + 60_000, T0 + 60_000)
    scheduler.create_schedule(**{**params, "Name": legacy_schedule_name("run-1")})
    alarms.disarm("run-1")
    assert scheduler.list_schedules(GroupName=GROUP)["Schedules"] == []


def test_a_past_wake_time_drives_at_once_instead_of_arming(scheduler: Any) -> None:
    due: list[tuple[str, int]] = []
    alarms = make_clock(scheduler, on_due=lambda run_id, at: due.append((run_id, at)))
    alarms.arm("run-1", T0 + 60_000)
    alarms.arm("run-1", T0 - 5)
    alarms.arm("run-2", T0)
    assert due == [("run-1", T0 - 5), ("run-2", T0)]
    # The earlier schedule is left to fire and find nothing due: deleting it could race
    # with another process arming it again.
    assert alarms.armed_at("run-1") == "at(2026-01-01T00:01:00)"
    assert alarms.armed_at("run-2") is None


def test_without_on_due_a_past_wake_time_is_armed_for_the_next_second(scheduler: Any) -> None:
    alarms = make_clock(scheduler, clock=VirtualClock(T0 + 250))
    alarms.arm("run-1", T0 - 10_000)
    assert alarms.armed_at("run-1") == "at(2026-01-01T00:00:02)"


def test_lambda_event_on_due_invokes_the_drive_function_asynchronously() -> None:
    calls: list[dict[str, Any]] = []

    class FakeLambda:
        def invoke(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            return {"StatusCode": 202}

    on_due = lambda_event_on_due(DRIVE, lambda: FakeLambda())  # type: ignore[arg-type,return-value]
    on_due("run-9", T0)
    assert calls[0]["FunctionName"] == DRIVE
    assert calls[0]["InvocationType"] == "Event"
    assert json.loads(calls[0]["Payload"]) == {"runId": "run-9", "wakeAt": T0}


@pytest.mark.parametrize(
    ("wake_at", "expression"),
    [
        (T0, "at(2026-01-01T00:00:00)"),
        (T0 + 1, "at(2026-01-01T00:00:01)"),
        (T0 + 999, "at(2026-01-01T00:00:01)"),
        (T0 + 1000, "at(2026-01-01T00:00:01)"),
        (T0 + 86_400_000 * 31 + 1, "at(2026-02-01T00:00:01)"),
    ],
)
def test_at_expressions_are_utc_rounded_up_to_the_second(wake_at: int, expression: str) -> None:
    assert at_expression(wake_at) == expression


@pytest.mark.parametrize(
    "run_id",
    [
        "run-1",
        "idem-orders.fulfil-key with spaces/and:colons",
        "parent-run/invoke:child.workflow:3",
        "x" * 300,
        "ünïcødé",
        "",
    ],
)
def test_schedule_names_are_valid_and_stable(run_id: str) -> None:
    name = schedule_name(run_id, T0)
    assert 1 <= len(name) <= 64
    assert all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
    assert name == schedule_name(run_id, T0)


def test_schedule_names_of_similar_ids_or_other_wakes_differ() -> None:
    a, b = "p/invoke:c:1", "p_invoke_c_1"
    assert schedule_name(a, T0) != schedule_name(b, T0)
    assert schedule_name("x" * 100 + "a", T0) != schedule_name("x" * 100 + "b", T0)
    assert schedule_name("run-1", T0).startswith("rf-run-1-")
    assert schedule_name("run-1", T0) != schedule_name("run-1", T0 + 1_000)
    # One name per wake second, as Scheduler's precision is a second.
    assert schedule_name("run-1", T0 + 1) == schedule_name("run-1", T0 + 999)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("group", "bad group!", "schedule group"),
        ("group", "g" * 65, "schedule group"),
        ("role_arn", "not-an-arn", "IAM role ARN"),
        ("target_arn", "drive", "ARN"),
        ("max_retry_attempts", 186, "max_retry_attempts"),
        ("max_event_age_s", 59, "max_event_age_s"),
    ],
)
def test_bad_configuration_is_refused_up_front(field: str, value: Any, message: str) -> None:
    kwargs: dict[str, Any] = {
        "group": GROUP,
        "target_arn": DRIVE,
        "role_arn": ROLE,
        "client_factory": lambda: None,
        field: value,
    }
    with pytest.raises(ValidationError, match=message):
        SchedulerAlarmClock(**kwargs)


def test_from_settings_requires_the_alarm_settings() -> None:
    with pytest.raises(ValidationError, match="RELAYFLOW_SCHEDULE_GROUP"):
        SchedulerAlarmClock.from_settings(Settings(), client_factory=lambda: None)  # type: ignore[arg-type,return-value]
    settings = Settings(
        schedule_group=GROUP, drive_function_arn=DRIVE, scheduler_role_arn=ROLE, dlq_arn=DLQ
    )
    alarms = SchedulerAlarmClock.from_settings(settings, client_factory=lambda: None)  # type: ignore[arg-type,return-value]
    assert (alarms.group, alarms.target_arn, alarms.role_arn, alarms.dlq_arn) == (
        GROUP,
        DRIVE,
        ROLE,
        DLQ,
    )


def test_a_missing_group_is_a_clear_error(aws: None) -> None:
    client = boto3.client("scheduler", region_name="eu-west-1")
    alarms = SchedulerAlarmClock(
        group="absent",
        target_arn=DRIVE,
        role_arn=ROLE,
        client_factory=lambda: client,
        clock=VirtualClock(T0),
    )
    with pytest.raises((ValidationError, AwsServiceError)):
        alarms.arm("run-1", T0 + 60_000)


def test_the_client_is_created_on_first_use(scheduler: Any) -> None:
    created: list[Any] = []

    def factory() -> Any:
        created.append(scheduler)
        return scheduler

    alarms = SchedulerAlarmClock(
        group=GROUP,
        target_arn=DRIVE,
        role_arn=ROLE,
        client_factory=factory,
        clock=VirtualClock(T0),
    )
    assert created == []
    alarms.arm("r", T0 + 5_000)
    alarms.disarm("r", T0 + 5_000)
    assert len(created) == 1
