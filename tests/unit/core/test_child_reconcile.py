"""Waits on attached child runs are checked periodically, so a child start or a parent
resumption lost when the process died between two writes is recovered by the alarm or the
sweeper; a parent whose child is alive costs one check per period."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from core_builders import T0, fresh_run, respond, waiting, wp

from relayflow.adapters.memory import InMemoryAlarmClock, InMemoryRunStore
from relayflow.clock import VirtualClock
from relayflow.core.effects import ArmAlarm, ChildOutcome, Dispatch, StartChild
from relayflow.core.inbox import Injection
from relayflow.core.interventions import cancel, child_ended, on_alarm
from relayflow.core.record import RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.trigger import TriggerSpec
from relayflow.core.waits import reconcile_time
from relayflow.engine import Engine
from relayflow.errors import DriveAbandoned, ValidationError
from relayflow.ports import DispatcherResolver, RunPage, RunQuery

START = 1_000_000
LEASE = 30_000
PERIOD = 60_000
SETTINGS = CoreSettings(lease_ms=LEASE, child_reconcile_ms=PERIOD)
CHILD = "p/invoke:child:0"

# ----- pure transitions ---------------------------------------------------------------------


def _run_wait(**meta: Any) -> dict[str, Any]:
    return wp("invoke:child:0", "RUN", childWorkflowId="child", **meta)


def _parked(*waits: dict[str, Any]) -> RunRecord:
    run, _, _ = respond(fresh_run(), waiting(*waits))
    return run


def test_a_wait_on_an_attached_child_parks_the_run_until_its_first_check() -> None:
    period = CoreSettings().child_reconcile_ms
    run, _, effects = respond(fresh_run(), waiting(_run_wait()))
    assert (run.status, run.reconcile_at, run.wake_at) == ("waiting", T0 + period, T0 + period)
    assert ArmAlarm("r1", T0 + period) in effects
    assert [type(e) for e in effects].count(StartChild) == 1


@pytest.mark.parametrize(
    ("waits", "wake_at"),
    [
        # A detached child resolves at once: nothing to check, the run is invoked again.
        ((_run_wait(detach=True),), T0),
        # An earlier wake time wins; the check stays behind it.
        ((_run_wait(), wp("sleep:0", "DATETIME", durationMs=1_000)), T0 + 1_000),
        ((wp("sleep:0", "DATETIME", durationMs=1_000),), T0 + 1_000),
    ],
)
def test_the_check_takes_part_in_the_wake_time_only_for_attached_children(
    waits: tuple[dict[str, Any], ...], wake_at: int
) -> None:
    run, _, _ = respond(fresh_run(), waiting(*waits))
    attached = any(w["kind"] == "RUN" and not w["meta"].get("detach") for w in waits)
    assert (run.reconcile_at is not None) == attached
    assert run.wake_at == wake_at


def test_a_due_check_reissues_the_child_start_and_parks_until_the_next_one() -> None:
    settings = CoreSettings()
    period = settings.child_reconcile_ms
    run = _parked(_run_wait())

    early = on_alarm(run, T0 + period - 1, settings)
    assert not early.changed and early.effects == (ArmAlarm("r1", T0 + period),)

    due = on_alarm(run, T0 + period + 5, settings)
    (start,) = [e for e in due.effects if isinstance(e, StartChild)]
    assert (start.spec.run_id, start.reconcile) == ("r1/invoke:child:0", True)
    assert not [e for e in due.effects if isinstance(e, Dispatch)]
    assert due.record.status == "waiting"
    assert due.record.reconcile_at == due.record.wake_at == T0 + 2 * period + 5
    assert ArmAlarm("r1", T0 + 2 * period + 5) in due.effects
    assert due.record.children == run.children  # no second link


def test_a_run_stored_without_a_check_time_gets_one_at_its_next_alarm() -> None:
    settings = CoreSettings()
    legacy = _parked(_run_wait()).model_copy(update={"reconcile_at": None, "wake_at": T0})
    t = on_alarm(legacy, T0, settings)
    assert t.changed and not [e for e in t.effects if isinstance(e, StartChild)]
    assert t.record.reconcile_at == t.record.wake_at == T0 + settings.child_reconcile_ms


DONE = ChildOutcome("r1/invoke:child:0", "completed", output=1)


@pytest.mark.parametrize(
    ("leave", "status", "wake_at"),
    [
        (lambda r: child_ended(r, "invoke:child:0", DONE, T0 + 1).record, "running", T0 + 1),
        (lambda r: cancel(r, "stop", True, T0 + 1).record, "running", T0 + 1),
        (lambda r: cancel(r, "stop", False, T0 + 1).record, "cancelled", None),
    ],
    ids=["child-ended", "compensating", "cancelled"],
)
def test_a_run_no_longer_waiting_on_its_child_has_no_check_time(
    leave: Callable[[RunRecord], RunRecord], status: str, wake_at: int | None
) -> None:
    after = leave(_parked(_run_wait()))
    assert after.status == status
    assert reconcile_time(after) is None
    assert after.wake_at == wake_at  # due only when it must be invoked


def test_parking_again_on_something_else_drops_the_check_time() -> None:
    run = _parked(_run_wait())
    resumed = child_ended(run, "invoke:child:0", DONE, T0 + 1).record
    body = waiting(wp("sleep:0", "DATETIME", durationMs=5_000))
    again, _, effects = respond(resumed, body, now=T0 + 2)
    assert again.status == "waiting" and again.reconcile_at is None
    assert again.wake_at == T0 + 2 + 5_000
    assert ArmAlarm("r1", T0 + 2 + 5_000) in effects


def test_the_check_period_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        CoreSettings(child_reconcile_ms=0)


# ----- through the engine ---------------------------------------------------------------------


class DyingRunStore:
    """The in-memory run store, with the process dying once at a chosen call (before it, or
    right after it was stored)."""

    def __init__(self) -> None:
        self.inner = InMemoryRunStore()
        self.die_before_insert: str | None = None
        self.die_after_terminal_save: str | None = None
        self.inserts: list[str] = []

    def get(self, run_id: str) -> RunRecord | None:
        return self.inner.get(run_id)

    def get_header(self, run_id: str) -> RunRecord | None:
        return self.inner.get_header(run_id)

    def try_insert(self, record: RunRecord) -> RunRecord:
        self.inserts.append(record.id)
        if record.id == self.die_before_insert:
            self.die_before_insert = None
            raise DriveAbandoned(f"process died before inserting {record.id}")
        return self.inner.try_insert(record)

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        saved = self.inner.save(record, expected_version=expected_version)
        if record.id == self.die_after_terminal_save and record.is_terminal:
            self.die_after_terminal_save = None
            raise DriveAbandoned(f"process died after {record.id} ended")
        return saved

    def list_runs(self, query: RunQuery) -> RunPage:
        return self.inner.list_runs(query)

    def due_runs(self, before_ms: int, limit: int = 100) -> list[str]:
        return self.inner.due_runs(before_ms, limit)


class Hosts:
    """A parent that invokes ``child`` and returns its output; a child that completes with
    ``{"n": 1}`` at once, or first waits for an event of type ``go``."""

    def __init__(self, *, child_waits: bool = False) -> None:
        self.child_waits = child_waits
        self.calls: list[str] = []

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.calls.append(request["runId"])
        done = request["journal"].get("waitpointsResolved", {})
        if request["workflowId"] == "parent":
            if "invoke:child:0" not in done:
                return 200, waiting(_run_wait(childInput={"n": 1}))
            return 200, {"status": "completed", "output": done["invoke:child:0"]["payload"]}
        if self.child_waits and "event:go:0" not in done:
            return 200, waiting(wp("event:go:0", "EVENT", eventType="go"))
        return 200, {"status": "completed", "output": {"n": 1}}


class Deployment:
    def __init__(self, hosts: Hosts) -> None:
        self.clock = VirtualClock(START)
        self.runs = DyingRunStore()
        self.alarms = InMemoryAlarmClock()
        self.hosts = hosts
        self.alarms_fired: list[tuple[str, int]] = []

    def engine(self) -> Engine:
        """A new process (a new engine on the shared store, alarms and clock)."""
        return Engine(
            runs=self.runs,
            alarms=self.alarms,
            dispatchers=DispatcherResolver(default=self.hosts),
            clock=self.clock,
            settings=SETTINGS,
        )

    def trigger_parent(self) -> None:
        self.engine().trigger(TriggerSpec(workflow_id="parent", input=None, run_id="p"))

    def fire_until(self, target: int) -> None:
        """Fire every alarm due up to ``target``, in order, each in a new process."""
        while (nxt := self.alarms.next_alarm()) is not None and nxt[1] <= target:
            self.clock.set(nxt[1])
            self.alarms.take(*nxt)
            self.alarms_fired.append(nxt)
            self.engine().drive_from_event({"runId": nxt[0], "wakeAt": nxt[1]})
        self.clock.set(target)

    def run(self, run_id: str) -> RunRecord:
        record = self.runs.get(run_id)
        assert record is not None, run_id
        return record


def test_a_crash_between_the_parent_save_and_the_child_insert_is_recovered_by_the_sweeper() -> None:
    world = Deployment(Hosts())
    world.runs.die_before_insert = CHILD

    world.trigger_parent()

    parent = world.run("p")
    assert parent.status == "waiting" and [c.run_id for c in parent.children] == [CHILD]
    assert world.runs.get(CHILD) is None
    assert world.alarms.armed("p") is None  # the process died before arming it
    assert parent.wake_at == START + PERIOD  # ... but the sweeper's index has the check time
    world.clock.set(START + PERIOD - 1)
    assert world.engine().sweep() == []

    world.clock.set(START + PERIOD)
    assert world.engine().sweep() == ["p"]

    assert world.run(CHILD).status == "completed"
    done = world.run("p")
    assert (done.status, done.output) == ("completed", {"n": 1})
    assert done.completed_at == START + PERIOD
    assert world.alarms.armed("p") is None and world.runs.due_runs(10**15) == []


def test_a_crash_between_the_child_end_and_the_parent_resume_is_recovered_by_the_alarm() -> None:
    world = Deployment(Hosts())
    world.runs.die_after_terminal_save = CHILD

    world.trigger_parent()

    assert world.run(CHILD).status == "completed"
    parent = world.run("p")
    assert parent.status == "waiting" and parent.pending_waitpoints
    assert world.alarms.armed("p") == START + PERIOD

    world.fire_until(START + 10 * PERIOD)

    done = world.run("p")
    assert (done.status, done.output) == ("completed", {"n": 1})
    assert done.completed_at == START + PERIOD
    assert world.alarms_fired == [("p", START + PERIOD)]
    assert world.hosts.calls == ["p", CHILD, "p"]  # the child never ran again


def test_the_same_crash_is_recovered_by_the_sweeper_when_the_alarm_is_lost() -> None:
    world = Deployment(Hosts())
    world.runs.die_after_terminal_save = CHILD
    world.trigger_parent()
    world.alarms.disarm("p")

    world.clock.set(START + PERIOD)
    assert world.engine().sweep() == ["p"]

    assert world.run("p").output == {"n": 1}


def test_a_parent_of_a_live_child_costs_one_check_per_period() -> None:
    world = Deployment(Hosts(child_waits=True))
    world.trigger_parent()
    assert world.run(CHILD).status == "waiting" and world.alarms.armed(CHILD) is None
    versions = world.run("p").version

    world.fire_until(START + 3 * PERIOD)

    assert world.alarms_fired == [("p", START + k * PERIOD) for k in (1, 2, 3)]
    assert world.alarms.armed("p") == START + 4 * PERIOD
    assert world.run("p").wake_at == START + 4 * PERIOD
    assert world.hosts.calls == ["p", CHILD]  # checks invoke neither host
    assert world.runs.inserts == ["p", CHILD]  # a check reads the child, never re-inserts it
    assert world.run("p").version - versions == 3  # one save per period: the check itself

    world.engine().inject(CHILD, Injection(kind="EVENT", key="go", id="go-1", payload=None))

    done = world.run("p")
    assert (done.status, done.output) == ("completed", {"n": 1})
    assert done.reconcile_at is None and world.alarms.armed("p") is None
