"""The engine with scripted step hosts: alarms, leases and dirty marks, races, children,
transport failures and crashes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from relayflow.adapters.memory import InMemoryAlarmClock, InMemoryRunStore
from relayflow.clock import VirtualClock
from relayflow.core.inbox import Injection
from relayflow.core.record import Lease, RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.trigger import TriggerSpec
from relayflow.engine import Engine
from relayflow.errors import DispatchError, DriveAbandoned, RunTerminalError
from relayflow.ports import DispatcherResolver

Host = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


class Scripted:
    """A dispatcher answering with ``host(request)`` and counting calls."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.calls.append(request)
        return self.host(request)


def resolved(request: dict[str, Any]) -> dict[str, Any]:
    return request["journal"].get("waitpointsResolved", {})


def waiting(*wps: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {"status": "waiting", "waitpoints": list(wps)}


def sleeps(n: int, ms: int = 1000) -> Host:
    """A body that sleeps ``n`` times, then completes with the number of sleeps."""

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        done = resolved(request)
        for i in range(n):
            if f"sleep:{i}" not in done:
                wp = {"clientWaitpointId": f"sleep:{i}", "kind": "DATETIME"}
                return waiting(wp | {"meta": {"durationMs": ms}})
        return 200, {"status": "completed", "output": n}

    return host


def events(n: int) -> Host:
    """A body that waits for ``n`` events of type ``e`` and returns their payloads."""

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        done = resolved(request)
        payloads = []
        for i in range(n):
            wid = f"event:e:{i}"
            if wid not in done:
                return waiting(
                    {"clientWaitpointId": wid, "kind": "EVENT", "meta": {"eventType": "e"}}
                )
            payloads.append(done[wid]["payload"])
        return 200, {"status": "completed", "output": payloads}

    return host


class World:
    def __init__(self, host: Host, settings: CoreSettings | None = None) -> None:
        self.clock = VirtualClock(1_000_000)
        self.runs = InMemoryRunStore()
        self.alarms = InMemoryAlarmClock()
        self.host = Scripted(host)
        self.engine = Engine(
            runs=self.runs,
            alarms=self.alarms,
            dispatchers=DispatcherResolver(default=self.host),
            clock=self.clock,
            settings=settings,
        )

    def trigger(self, run_id: str = "r", workflow_id: str = "wf") -> str:
        record, _ = self.engine.trigger(
            TriggerSpec(workflow_id=workflow_id, input=None, run_id=run_id)
        )
        return record.id

    def fire_all(self) -> None:
        while (nxt := self.alarms.next_alarm()) is not None:
            self.clock.set(nxt[1])
            self.alarms.take(*nxt)
            self.engine.drive_from_event({"runId": nxt[0], "wakeAt": nxt[1]})

    def status(self, run_id: str = "r") -> str:
        record = self.runs.get(run_id)
        assert record is not None
        return record.status


def test_a_sleeping_run_parks_with_an_alarm_and_completes_when_it_fires() -> None:
    world = World(sleeps(2))
    world.trigger()
    assert world.status() == "waiting"
    assert world.alarms.armed("r") == 1_001_000
    world.fire_all()
    record = world.runs.get("r")
    assert record is not None and record.status == "completed" and record.output == 2
    assert record.lease is None and world.alarms.armed("r") is None
    assert len(world.host.calls) == 3


def test_early_and_duplicate_alarms_are_harmless() -> None:
    world = World(sleeps(1))
    world.trigger()
    world.engine.drive_from_event({"runId": "r", "wakeAt": 0})
    assert world.status() == "waiting" and len(world.host.calls) == 1
    assert world.alarms.armed("r") == 1_001_000
    world.fire_all()
    world.engine.drive_from_event({"runId": "r", "wakeAt": 1_001_000})
    assert world.status() == "completed" and len(world.host.calls) == 2


def test_the_same_run_id_is_inserted_once_and_returned_untouched() -> None:
    world = World(sleeps(0))
    _first, created = world.engine.trigger(TriggerSpec(workflow_id="wf", input=1, run_id="x"))
    again, created_again = world.engine.trigger(TriggerSpec(workflow_id="wf", input=2, run_id="x"))
    assert (created, created_again) == (True, False)
    assert again.input == 1 and len(world.host.calls) == 1


def test_concurrent_injections_are_each_consumed_once() -> None:
    world = World(events(8))
    world.trigger()
    barrier = threading.Barrier(8)

    def send(n: int) -> None:
        barrier.wait()
        world.engine.inject("r", Injection(kind="EVENT", key="e", id=f"e{n}", payload=n))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = world.runs.get("r")
    assert record is not None and record.status == "completed"
    assert sorted(record.output) == list(range(8))
    assert record.lease is None and not record.inbox


def test_a_change_to_a_leased_run_leaves_a_dirty_mark_and_the_holder_drives_again() -> None:
    world = World(events(1))
    world.trigger()
    record = world.runs.get("r")
    assert record is not None
    held = record.model_copy(update={"lease": Lease(owner="other", expires_at=10**15)})
    world.runs.save(held, expected_version=record.version)
    result, after = world.engine.inject("r", Injection(kind="EVENT", key="e", id="e1", payload=1))
    assert result.status == "resolved" and after.dirty and after.status == "running"
    assert len(world.host.calls) == 1  # the lease holder, not us, drives it


def test_a_crash_abandons_the_drive_and_recovery_re_drives_from_the_saved_record() -> None:
    crashes = {"left": 1}

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if crashes["left"]:
            crashes["left"] -= 1
            raise DriveAbandoned("host died")
        return 200, {"status": "completed", "output": "ok"}

    world = World(host)
    world.trigger()
    record = world.runs.get("r")
    assert record is not None and record.status == "running" and record.lease is not None
    world.engine.sweep()  # the dead driver's lease has not expired: nothing happens
    assert len(world.host.calls) == 1
    recovered = world.engine.recover("r")
    assert recovered is not None and recovered.status == "completed"


def test_the_sweeper_takes_over_an_expired_lease() -> None:
    calls = {"n": 0}

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise DriveAbandoned("host died")
        return 200, {"status": "completed"}

    world = World(host, CoreSettings(lease_ms=5000))
    world.trigger()
    world.clock.advance(5000)
    assert world.engine.sweep() == ["r"]
    assert world.status() == "completed"


@pytest.mark.parametrize(
    ("failure", "final"),
    [
        (DispatchError("down", transient=True, status=503), "completed"),
        (DispatchError("bad", transient=False, status=400), "failed"),
    ],
)
def test_transient_dispatch_failures_are_retried_through_the_alarm(
    failure: DispatchError, final: str
) -> None:
    calls = {"n": 0}

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise failure
        return 200, {"status": "completed"}

    world = World(host)
    world.trigger()
    world.fire_all()
    record = world.runs.get("r")
    assert record is not None and record.status == final
    if final == "completed":
        assert world.clock.now_ms() == 1_000_000 + 1000 + 2000  # backoff 1 s then 2 s
    else:
        assert record.error is not None and record.error.code == "handler_error"


def test_persistent_transient_failures_fail_the_run_with_handler_error() -> None:
    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 503, {"error": "unavailable", "message": "try later"}

    world = World(host, CoreSettings(dispatch_max_attempts=3))
    world.trigger()
    world.fire_all()
    record = world.runs.get("r")
    assert record is not None and record.status == "failed" and record.error is not None
    assert record.error.code == "handler_error" and len(world.host.calls) == 3


def test_the_inline_budget_hands_the_run_off_through_an_alarm() -> None:
    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = request["invocationCount"]
        if n < 5:
            wp = {"clientWaitpointId": f"checkpoint:{n}", "kind": "DATETIME"}
            return waiting(wp | {"meta": {"wakeAt": 0, "reason": "deadline"}})
        return 200, {"status": "completed"}

    world = World(host, CoreSettings(inline_invocations=2))
    world.trigger()
    assert world.status() == "running" and world.alarms.armed("r") == 1_000_000
    world.fire_all()
    assert world.status() == "completed" and len(world.host.calls) == 5


def _parent_child_host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if request["workflowId"] == "child":
        return sleeps(1)(request)
    done = resolved(request)
    if "invoke:child:0" in done:
        return 200, {"status": "completed", "output": done["invoke:child:0"].get("payload")}
    meta = {"childWorkflowId": "child", "childInput": None}
    return waiting({"clientWaitpointId": "invoke:child:0", "kind": "RUN", "meta": meta})


def test_a_child_end_resumes_its_parent() -> None:
    world = World(_parent_child_host)
    world.trigger("p", "parent")
    assert world.status("p") == "waiting" and world.status("p/invoke:child:0") == "waiting"
    world.fire_all()
    parent = world.runs.get("p")
    assert parent is not None and parent.status == "completed" and parent.output == 1


def test_cancelling_a_parent_cancels_its_children() -> None:
    world = World(_parent_child_host)
    world.trigger("p", "parent")
    world.engine.cancel("p", reason="stop")
    assert world.status("p") == "cancelled"
    assert world.status("p/invoke:child:0") == "cancelled"
    with pytest.raises(RunTerminalError):
        world.engine.cancel("p")


def test_an_unexpected_dispatcher_error_is_retried_then_fails_the_run() -> None:
    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raise RuntimeError("socket exploded")

    world = World(host, CoreSettings(dispatch_max_attempts=2))
    world.trigger()
    world.fire_all()
    record = world.runs.get("r")
    assert record is not None and record.error is not None
    assert record.error.code == "handler_error" and "socket exploded" in record.error.message
    assert len(world.host.calls) == 2


def test_the_dispatcher_is_chosen_by_tenant_script_then_workflow_then_default() -> None:
    default, by_script, by_workflow = Scripted(sleeps(0)), Scripted(sleeps(0)), Scripted(sleeps(0))
    resolver = DispatcherResolver(
        default=default, by_tenant_script={"t": by_script}, by_workflow={"wf": by_workflow}
    )
    assert resolver.resolve(workflow_id="wf", tenant_script="t") is by_script
    assert resolver.resolve(workflow_id="wf", tenant_script="other") is by_workflow
    assert resolver.resolve(workflow_id="x", tenant_script=None) is default


def test_the_inline_dispatcher_turns_a_host_crash_into_an_abandoned_drive() -> None:
    from relayflow.dispatch.inline import InlineDispatcher
    from relayflow.errors import HostCrashSignal

    def dying_host(raw: dict[str, Any], **_: Any) -> tuple[int, dict[str, Any]]:
        raise HostCrashSignal("gone")

    with pytest.raises(DriveAbandoned):
        InlineDispatcher(handler=dying_host).dispatch({"runId": "r"})


class CountingRunStore(InMemoryRunStore):
    """Records the runs read in full (a read of a long run parses its whole journal)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def get(self, run_id: str) -> RunRecord | None:
        self.reads.append(run_id)
        return super().get(run_id)


@pytest.mark.parametrize(
    ("host", "run_id", "workflow_id"),
    [(sleeps(0), "r", "wf"), (sleeps(2), "r", "wf"), (_parent_child_host, "p", "parent")],
)
def test_a_trigger_returns_the_run_as_its_drive_saved_it_without_reading_it_back(
    host: Host, run_id: str, workflow_id: str
) -> None:
    world = World(host)
    world.runs = world.engine.runs = CountingRunStore()
    record, created = world.engine.trigger(
        TriggerSpec(workflow_id=workflow_id, input=None, run_id=run_id)
    )
    assert created and run_id not in world.runs.reads
    assert record == world.runs.get(run_id) and record.version > 1


class SaveCountingRunStore(InMemoryRunStore):
    """Counts the conditional saves of a run."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        self.saves += 1
        return super().save(record, expected_version=expected_version)


def yields(n: int) -> Host:
    """A body that yields ``n`` times with a checkpoint wait due at once, then completes."""

    def host(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        done = resolved(request)
        for i in range(n):
            if f"checkpoint:{i}" not in done:
                wp = {"clientWaitpointId": f"checkpoint:{i}", "kind": "DATETIME"}
                return waiting(wp | {"meta": {"wakeAt": 0, "reason": "size"}})
        return 200, {"status": "completed", "output": n}

    return host


def test_an_answer_that_leaves_the_run_due_is_saved_with_the_next_invocation_begun() -> None:
    world = World(yields(3))
    world.runs = world.engine.runs = SaveCountingRunStore()
    world.trigger()
    record = world.runs.get("r")
    assert record is not None and record.status == "completed" and record.output == 3
    assert [call["invocationCount"] for call in world.host.calls] == [1, 2, 3, 4]
    # The first invocation's beginning, then one save per answer (each but the last also
    # beginning the next invocation): not a save for each beginning and each answer.
    assert world.runs.saves == 1 + 4
    assert record.lease is None and record.invocation_count == 4


def test_an_invocation_begun_with_an_answer_stops_at_the_drive_s_invocation_limit() -> None:
    world = World(yields(5), settings=CoreSettings(inline_invocations=2))
    world.runs = world.engine.runs = SaveCountingRunStore()
    world.trigger()
    assert [call["invocationCount"] for call in world.host.calls] == [1, 2]
    record = world.runs.get("r")
    assert record is not None and record.status == "running" and record.invocation_count == 2
