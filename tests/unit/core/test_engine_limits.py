"""Bounded drives, hand-offs, upkeep that cannot be starved or misled, effects that are all
attempted, and runs that cannot be saved."""

from __future__ import annotations

from typing import Any

from test_engine import World, sleeps

from relayflow.core.inbox import Injection
from relayflow.core.record import Lease, RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.trigger import TriggerSpec
from relayflow.errors import ValidationError

T0 = 1_000_000


def slow_steps(n: int, step_ms: int, world: list[World]) -> Any:
    """A host that runs one step of ``step_ms`` per invocation (moving virtual time), then
    yields for the next, ``n`` times, then completes."""

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        done = request["journal"].get("waitpointsResolved", {})
        count = sum(1 for key in done if key.startswith("checkpoint:"))
        world[0].clock.advance(step_ms)
        if count >= n:
            return 200, {"status": "completed", "output": count}
        wait = {
            "clientWaitpointId": f"checkpoint:{request['invocationCount']}",
            "kind": "DATETIME",
            "meta": {"wakeAt": world[0].clock.now_ms()},
        }
        return 200, {"status": "waiting", "waitpoints": [wait]}

    return host


def test_a_drive_stops_at_its_budget_and_hands_the_run_off() -> None:
    holder: list[World] = []
    handed: list[str] = []
    world = World(slow_steps(120, 1_000, holder))
    holder.append(world)
    world.engine._handoff = lambda run_id, at: handed.append(run_id)
    with world.engine.budget(10_000):
        world.trigger()
    calls = len(world.host.calls)
    # 1 s per invocation, none started with less than min_invocation_ms (1 s) left.
    assert 9 <= calls <= 10
    assert world.clock.now_ms() - T0 <= 10_000
    assert handed == ["r"]
    record = world.runs.get("r")
    assert record is not None and record.status == "running" and record.lease is None


def test_the_request_deadline_and_the_lease_derive_from_the_budget() -> None:
    leases: list[int] = []
    world = World(sleeps(1), CoreSettings(lease_grace_ms=2_000))
    original = world.runs.save

    def spy(record: RunRecord, *, expected_version: int) -> RunRecord:
        if record.lease is not None:
            leases.append(record.lease.expires_at)
        return original(record, expected_version=expected_version)

    world.runs.save = spy  # type: ignore[method-assign]
    with world.engine.budget(10_000):
        world.trigger()
    deadline = world.host.calls[0]["deadline"]
    assert deadline == T0 + 10_000
    assert leases and all(lease == T0 + 12_000 for lease in leases)
    assert all(lease > deadline for lease in leases), "the lease outlasts the work under it"


def test_without_a_budget_a_drive_gets_the_configured_one() -> None:
    world = World(sleeps(1), CoreSettings(drive_budget_ms=30_000, invocation_timeout_ms=600_000))
    world.trigger()
    assert world.host.calls[0]["deadline"] == T0 + 30_000


def test_handing_off_drives_nothing_in_this_process() -> None:
    handed: list[str] = []
    world = World(sleeps(1))
    world.engine._handoff = lambda run_id, at: handed.append(run_id)
    with world.engine.handing_off():
        world.trigger()
    assert world.host.calls == []
    assert handed == ["r"]


def test_a_delivery_to_a_run_another_process_drives_is_only_marked() -> None:
    handed: list[str] = []
    world = World(sleeps(1))
    world.engine._handoff = lambda run_id, at: handed.append(run_id)
    world.runs.try_insert(
        RunRecord(
            id="r",
            workflow_id="wf",
            status="running",
            started_at=T0,
            lease=Lease(owner="other", expires_at=T0 + 60_000),
        )
    )
    with world.engine.handing_off():
        result, _ = world.engine.inject("r", Injection(kind="EVENT", key="e", id="e1"))
    assert result.status == "buffered"
    stored = world.runs.get("r")
    assert stored is not None and stored.dirty and stored.lease is not None
    assert handed == [] and world.host.calls == []


def leased_run(run_id: str, now: int, lease_until: int, wake_at: int) -> RunRecord:
    return RunRecord(
        id=run_id,
        workflow_id="wf",
        status="running",
        started_at=now,
        wake_at=wake_at,
        lease=Lease(owner="busy", expires_at=lease_until),
    )


def test_a_run_in_flight_is_due_only_when_its_lease_ends() -> None:
    holder: list[World] = []
    world = World(slow_steps(0, 0, holder))
    holder.append(world)
    seen: list[int | None] = []
    original = world.runs.save

    def spy(record: RunRecord, *, expected_version: int) -> RunRecord:
        if record.lease is not None:
            seen.append(record.wake_at)
        return original(record, expected_version=expected_version)

    world.runs.save = spy  # type: ignore[method-assign]
    with world.engine.budget(10_000):
        world.trigger()
    assert seen and all(wake is not None and wake > T0 + 10_000 for wake in seen)


def test_the_sweeper_finds_a_lost_alarm_among_many_runs_in_flight() -> None:
    world = World(sleeps(1))
    for n in range(150):
        # Runs driven elsewhere, stored as the engine stores them: due at their lease's end.
        world.runs.try_insert(leased_run(f"busy-{n}", T0, T0 + 60_000, T0 + 60_000))
    world.runs.try_insert(
        RunRecord(id="lost", workflow_id="wf", status="running", started_at=T0, wake_at=T0)
    )
    swept = world.engine.sweep()
    assert swept == ["lost"]
    assert world.status("lost") == "waiting"


def test_the_sweeper_leaves_runs_it_only_saw_leased_alone() -> None:
    world = World(sleeps(1))
    # Stored by an older release: due "now" while leased by a live driver.
    world.runs.try_insert(leased_run("busy", T0, T0 + 60_000, T0))
    assert world.engine.sweep() == ["busy"]
    stored = world.runs.get("busy")
    assert stored is not None and not stored.dirty and stored.version == 1


class FailingAlarms:
    def __init__(self) -> None:
        self.armed: list[tuple[str, int]] = []

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        if run_id == "a":
            raise ValidationError("scheduler refused")
        self.armed.append((run_id, wake_at_ms))

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        raise ValidationError("scheduler refused")


def test_every_effect_is_attempted_when_an_earlier_one_fails() -> None:
    from relayflow.core.effects import ArmAlarm, DisarmAlarm
    from relayflow.engine._base import Work

    world = World(sleeps(1))
    alarms = FailingAlarms()
    world.engine.alarms = alarms  # type: ignore[assignment]
    effects = [ArmAlarm("a", 5), DisarmAlarm("b", 6), ArmAlarm("c", 7)]
    try:
        world.engine._apply_effects(effects, Work())
    except ValidationError as exc:
        assert "scheduler refused" in exc.message
    else:
        raise AssertionError("the first failure is raised after the others ran")
    assert alarms.armed == [("c", 7)]


def test_a_run_whose_save_is_refused_for_good_ends_failed() -> None:
    world = World(sleeps(1))
    original = world.runs.save

    def refuse_waiting(record: RunRecord, *, expected_version: int) -> RunRecord:
        if record.status == "waiting":
            raise ValidationError("entry is 500000 bytes, too large for a DynamoDB item")
        return original(record, expected_version=expected_version)

    world.runs.save = refuse_waiting  # type: ignore[method-assign]
    world.engine.trigger(TriggerSpec(workflow_id="wf", input=None, run_id="r"))
    record = world.runs.get("r")
    assert record is not None and record.status == "failed" and record.lease is None
    assert record.error is not None and record.error.code == "run_save_refused"
    assert "too large" in record.error.message
