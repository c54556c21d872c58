"""The AlarmClock port contract: an alarm per wake time, never early and at most a second
late; re-arming arms the new wake (an alarm of an older wake may stay behind and fire to find
nothing due); a disarm names its wake, so a late one never removes a newer alarm; arming and
disarming are idempotent. One probe per clock reads what is armed where the clock keeps it
(memory, or Scheduler's schedules in moto).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Protocol

import boto3
import pytest

from relayflow.adapters.aws.alarms import SchedulerAlarmClock
from relayflow.adapters.memory import InMemoryAlarmClock
from relayflow.ports import AlarmClock
from tests.moto_support import moto_backend, use_fake_credentials

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
GROUP = "relayflow-alarms"
DRIVE = "arn:aws:lambda:eu-west-1:123456789012:function:relayflow-drive"
ROLE = "arn:aws:iam::123456789012:role/relayflow-scheduler"
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")


class VirtualClock:
    def __init__(self) -> None:
        self.now = T0

    def now_ms(self) -> int:
        return self.now


class Probe(Protocol):
    """An alarm clock and a view of what it has armed."""

    clock: AlarmClock

    def armed(self) -> dict[str, set[tuple[int, int]]]:
        """``run id -> {(when an alarm fires, the wake time the drive is told)}``."""
        ...

    def fire(self, run_id: str, wake_at: int) -> None:
        """What the platform does when the run's alarm for ``wake_at`` fires (it is gone)."""
        ...


class MemoryProbe:
    def __init__(self, now: VirtualClock) -> None:
        self.memory = InMemoryAlarmClock()
        self.clock: AlarmClock = self.memory

    def armed(self) -> dict[str, set[tuple[int, int]]]:
        return {run_id: {(wake, wake)} for run_id, wake in self.memory.pending()}

    def fire(self, run_id: str, wake_at: int) -> None:
        assert self.memory.take(run_id, wake_at)


class SchedulerProbe:
    """Scheduler on moto: the schedules themselves are read back."""

    def __init__(self, now: VirtualClock) -> None:
        self.client = boto3.client("scheduler", region_name="eu-west-1")
        self.client.create_schedule_group(Name=GROUP)
        self.clock = SchedulerAlarmClock(
            group=GROUP, target_arn=DRIVE, role_arn=ROLE, client_factory=lambda: self.client,
            clock=now,
        )  # fmt: skip

    def armed(self) -> dict[str, set[tuple[int, int]]]:
        out: dict[str, set[tuple[int, int]]] = {}
        for listed in self.client.list_schedules(GroupName=GROUP)["Schedules"]:
            schedule = self.client.get_schedule(Name=listed["Name"], GroupName=GROUP)
            payload = json.loads(schedule["Target"]["Input"])
            fires = (_at_ms(schedule["ScheduleExpression"]), payload["wakeAt"])
            out.setdefault(payload["runId"], set()).add(fires)
        return out

    def fire(self, run_id: str, wake_at: int) -> None:
        # One-time schedules are created with ActionAfterCompletion=DELETE.
        name = self.clock.name_of(run_id, wake_at)
        self.client.delete_schedule(Name=name, GroupName=GROUP)


def _at_ms(expression: str) -> int:
    match = _AT.match(expression)
    assert match is not None, expression
    stamp = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)


PROBE_FACTORIES: dict[str, Callable[[VirtualClock], Probe]] = {
    "memory": MemoryProbe,
    "scheduler-moto": SchedulerProbe,
}
ON_MOTO = {"scheduler-moto"}


@pytest.fixture
def now() -> VirtualClock:
    return VirtualClock()


@pytest.fixture(params=sorted(PROBE_FACTORIES))
def probe(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, now: VirtualClock
) -> Iterator[Probe]:
    if request.param not in ON_MOTO:
        yield PROBE_FACTORIES[request.param](now)
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield PROBE_FACTORIES[request.param](now)


def assert_fires_for(probe: Probe, run_id: str, wake_at: int) -> None:
    """An alarm of the run fires at ``wake_at`` or within the next second, telling it so."""
    armed = probe.armed()
    assert run_id in armed, armed
    assert any(
        wake_at <= fires_at < wake_at + 1000 and told == wake_at for fires_at, told in armed[run_id]
    ), armed[run_id]


@pytest.mark.parametrize("offset", [1, 999, 1000, 90_500, 86_400_000 * 30])
def test_an_alarm_fires_at_its_wake_time_never_before(probe: Probe, offset: int) -> None:
    probe.clock.arm("run-1", T0 + offset)
    assert_fires_for(probe, "run-1", T0 + offset)
    assert list(probe.armed()) == ["run-1"]


def test_re_arming_arms_the_new_wake(probe: Probe) -> None:
    probe.clock.arm("run-1", T0 + 60_000)
    probe.clock.arm("run-1", T0 + 3_600_000)
    assert_fires_for(probe, "run-1", T0 + 3_600_000)
    probe.clock.arm("run-1", T0 + 5_000)
    assert_fires_for(probe, "run-1", T0 + 5_000)
    assert list(probe.armed()) == ["run-1"]


def test_a_late_disarm_of_an_older_wake_leaves_the_newer_alarm(probe: Probe) -> None:
    probe.clock.arm("run-1", T0 + 60_000)
    probe.clock.arm("run-1", T0 + 120_000)
    probe.clock.disarm("run-1", T0 + 60_000)
    assert_fires_for(probe, "run-1", T0 + 120_000)
    probe.clock.disarm("run-1", T0 + 120_000)
    assert probe.armed() == {}


def test_arming_twice_at_the_same_time_is_one_alarm(probe: Probe) -> None:
    probe.clock.arm("run-1", T0 + 60_000)
    probe.clock.arm("run-1", T0 + 60_000)
    assert_fires_for(probe, "run-1", T0 + 60_000)
    assert len(probe.armed()) == 1


def test_disarming_removes_the_alarm_and_is_idempotent(probe: Probe) -> None:
    probe.clock.arm("run-1", T0 + 60_000)
    probe.clock.disarm("run-1")
    assert probe.armed() == {}
    probe.clock.disarm("run-1")
    probe.clock.disarm("never-armed")
    assert probe.armed() == {}


def test_alarms_of_different_runs_are_independent(probe: Probe) -> None:
    probe.clock.arm("run-1", T0 + 60_000)
    probe.clock.arm("run-2", T0 + 120_000)
    probe.clock.disarm("run-1")
    assert list(probe.armed()) == ["run-2"]
    assert_fires_for(probe, "run-2", T0 + 120_000)


def test_run_ids_that_differ_only_in_unusual_characters_get_separate_alarms(
    probe: Probe,
) -> None:
    long_prefix = "x" * 300
    ids = ["parent/child", "parent_child", "parent child", f"{long_prefix}-a", f"{long_prefix}-b"]
    for i, run_id in enumerate(ids):
        probe.clock.arm(run_id, T0 + 60_000 * (i + 1))
    for i, run_id in enumerate(ids):
        assert_fires_for(probe, run_id, T0 + 60_000 * (i + 1))
    probe.clock.disarm("parent/child")
    assert sorted(probe.armed()) == sorted(ids[1:])


def test_a_fired_alarm_can_be_armed_again_and_disarmed(probe: Probe) -> None:
    probe.clock.arm("run-1", T0 + 60_000)
    probe.fire("run-1", T0 + 60_000)
    assert probe.armed() == {}
    probe.clock.disarm("run-1")
    probe.clock.arm("run-1", T0 + 120_000)
    assert_fires_for(probe, "run-1", T0 + 120_000)


@pytest.mark.parametrize("ago", [0, 1, 3_600_000])
def test_a_wake_time_already_passed_is_not_lost(probe: Probe, now: VirtualClock, ago: int) -> None:
    probe.clock.arm("run-1", now.now - ago)
    [(fires_at, told)] = probe.armed()["run-1"]
    assert fires_at <= now.now + 2000
    assert told == now.now - ago
