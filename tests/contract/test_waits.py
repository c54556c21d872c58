"""Waits over every driver: sleeps and alarms, events, signals, tokens, the inbox, timeouts."""

from __future__ import annotations

import threading
from collections.abc import Callable

import contract_workflows as wf
import pytest

from relayflow.core.settings import CoreSettings
from relayflow.errors import RunTerminalError
from relayflow.testing import DriverHarness

MakeEnv = Callable[..., DriverHarness]
MINUTE = 60_000


def test_a_sleep_parks_the_run_until_its_alarm(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.sleepy], services={"rec": recorder})
    start = env.now()
    run = env.trigger("ct.sleepy", None)
    assert run.status == "waiting"
    assert env.armed_alarm(run.id) == start + 10 * MINUTE
    env.advance("9m")
    assert env.get_run(run.id).status == "waiting"
    env.advance("1m")
    done = env.get_run(run.id)
    assert (done.status, done.output) == ("completed", "rested")
    assert recorder.items == ["before", "after"]
    [sleep] = [e for e in done.timeline if e.type == "wait"]
    assert (sleep.id, sleep.started_at, sleep.ended_at) == (
        "sleep:0",
        start,
        start + 10 * MINUTE,
    )


def test_early_and_duplicate_alarms_are_harmless(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.sleepy], services={"rec": recorder})
    run = env.trigger("ct.sleepy", None)
    wake = env.armed_alarm(run.id)
    env.fire_alarm(run.id, env.now())
    assert env.get_run(run.id).status == "waiting"
    assert env.armed_alarm(run.id) == wake
    env.advance("10m")
    env.fire_alarm(run.id, wake)
    assert env.get_run(run.id).status == "completed"
    assert recorder.items == ["before", "after"]


def test_a_run_with_200_sleeps_completes(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.many_sleeps])
    run = env.trigger("ct.many_sleeps", {"n": 200})
    env.run_until_idle()
    done = env.get_run(run.id)
    assert (done.status, done.output) == ("completed", 200)
    assert env.now() - done.started_at == 200_000


def test_an_event_resolves_a_wait_whose_match_it_satisfies(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.shipment])
    run = env.trigger("ct.shipment", {"id": "o1"})
    other = env.send_event(run.id, "shipment.created", {"orderId": "o2"})
    assert other.status == "buffered" and env.get_run(run.id).status == "waiting"
    mine = env.send_event(run.id, "shipment.created", {"orderId": "o1", "carrier": "ups"})
    assert mine.status == "resolved"
    assert env.get_run(run.id).output == {"orderId": "o1", "carrier": "ups"}


def test_a_signal_resumes_the_run(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.approval])
    run = env.trigger("ct.approval", None)
    env.signal(run.id, "approve", {"by": "ann"})
    assert env.get_run(run.id).output == {"by": "ann"}


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("complete", {"value": {"ok": True}}),
        ("fail", {"failed": "declined"}),
    ],
)
def test_tokens_are_completed_or_failed(make_env: MakeEnv, action: str, expected: dict) -> None:
    env = make_env(workflows=[wf.token])
    run = env.trigger("ct.token", {})
    token_id = env.get_run(run.id).metadata["token"]
    if action == "complete":
        env.complete_token(token_id, {"ok": True})
    else:
        env.fail_token(token_id, "declined", run_id=run.id)
    assert env.get_run(run.id).output == expected


def test_a_token_settles_once_for_the_run_s_whole_life(make_env: MakeEnv) -> None:
    limit = CoreSettings().seen_ids_limit
    env = make_env(workflows=[wf.token_then_items])
    run = env.trigger("ct.token_then_items", {"n": limit + 2})
    token_id = env.get_run(run.id).metadata["token"]
    assert env.complete_token(token_id, {"ok": True}).status == "resolved"
    # More deliveries than the run keeps ids of push the token's id out of its record.
    for n in range(limit + 2):
        assert env.send_event(run.id, "item", n, event_id=f"e{n}").status == "resolved"
    assert env.complete_token(token_id, {"ok": True}).status == "duplicate"
    assert env.complete_token(token_id, {"other": 1}).status == "duplicate"
    assert env.fail_token(token_id, "declined").status == "duplicate"
    env.send_event(run.id, "end", None)
    assert env.get_run(run.id).output == {"token": {"ok": True}, "items": list(range(limit + 2))}


def test_generated_token_ids_locate_their_run_among_many(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.token])
    runs = [env.trigger("ct.token", {}) for _ in range(3)]
    tokens = [env.get_run(r.id).metadata["token"] for r in runs]
    assert len(set(tokens)) == 3, "the same position in three runs gives three ids"

    env.driver.complete_token(tokens[1], {"n": 1})
    env.driver.fail_token(tokens[2], "declined")

    assert [env.get_run(r.id).output for r in runs] == [
        None,
        {"value": {"n": 1}},
        {"failed": "declined"},
    ]
    assert env.get_run(runs[0].id).status == "waiting"


def test_heartbeats_keep_a_token_wait_alive_until_they_stop(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.token])
    run = env.trigger("ct.token", {"heartbeat": "1m"})
    token_id = env.get_run(run.id).metadata["token"]
    env.advance("50s")
    env.heartbeat_token(token_id)
    env.advance("50s")
    assert env.get_run(run.id).status == "waiting"
    env.advance("11s")
    assert env.get_run(run.id).output == {"heartbeat": "missed"}


def test_an_early_event_waits_in_the_inbox_for_its_wait(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.after_sleep_event])
    run = env.trigger("ct.after_sleep_event", {})
    assert env.send_event(run.id, "paid", {"amount": 5}).status == "buffered"
    env.advance("10m")
    done = env.get_run(run.id)
    assert (done.status, done.output) == ("completed", {"amount": 5})
    event_wait = next(e for e in done.timeline if e.id.startswith("event:"))
    assert event_wait.source == "inbox"


def test_lookback_ignores_buffered_events_that_are_too_old(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.after_sleep_event])
    run = env.trigger("ct.after_sleep_event", {"lookback": "1m"})
    env.send_event(run.id, "paid", {"amount": 5})
    env.advance("10m")
    assert env.get_run(run.id).status == "waiting"
    env.send_event(run.id, "paid", {"amount": 7})
    assert env.get_run(run.id).output == {"amount": 7}


def test_a_duplicate_event_id_is_delivered_once(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.collect])
    run = env.trigger("ct.collect", {"n": 2})
    env.send_event(run.id, "item", 1, event_id="e1")
    assert env.send_event(run.id, "item", 1, event_id="e1").status == "duplicate"
    env.send_event(run.id, "item", 2, event_id="e2")
    assert env.get_run(run.id).output == [1, 2]


@pytest.mark.race
def test_concurrent_injections_are_each_consumed_once(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.collect])
    run = env.trigger("ct.collect", {"n": 6})
    barrier = threading.Barrier(6)

    def send(n: int) -> None:
        barrier.wait()
        env.send_event(run.id, "item", n, event_id=f"e{n}")

    threads = [threading.Thread(target=send, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed" and sorted(done.output) == list(range(6))


class Gate:
    """A step that blocks until the test opens it (the run stays leased meanwhile)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def wait_open(self) -> str:
        self.entered.set()
        assert self.opened.wait(60), "the gate was never opened"
        return "open"


@pytest.mark.race
def test_deliveries_into_a_run_being_driven_are_acknowledged_at_once_and_taken_once(
    make_env: MakeEnv,
) -> None:
    gate = Gate()
    env = make_env(workflows=[wf.gated_collect], services={"gate": gate})
    n = 8
    run_id = "run_hot"
    driving = threading.Thread(
        target=lambda: env.trigger("ct.gated_collect", {"n": n}, run_id=run_id), daemon=True
    )
    driving.start()
    assert gate.entered.wait(60)
    barrier = threading.Barrier(n)
    answers: dict[int, str] = {}

    def send(k: int) -> None:
        barrier.wait()
        answers[k] = env.send_event(run_id, "item", k, event_id=f"e{k}").status

    senders = [threading.Thread(target=send, args=(k,)) for k in range(n)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(60)
    # Every delivery was answered while the run's drive was still inside its step.
    assert not gate.opened.is_set() and driving.is_alive()
    assert answers == {k: "buffered" for k in range(n)}
    again = env.send_event(run_id, "item", 0, event_id="e0")
    assert again.status == "duplicate"
    gate.opened.set()
    driving.join(60)
    assert not driving.is_alive(), "the drive never let go of the run"
    env.run_until_idle()
    done = env.get_run(run_id)
    assert done.status == "completed"
    assert sorted(done.output) == list(range(n)), "each delivery is taken exactly once"


def held_in_its_first_step(
    make_env: MakeEnv, run_id: str
) -> tuple[DriverHarness, Gate, threading.Thread]:
    """A run of ``ct.gated_sleep_then_item`` held by a drive inside its gated first step."""
    gate = Gate()
    env = make_env(workflows=[wf.gated_sleep_then_item], services={"gate": gate})
    driving = threading.Thread(
        target=lambda: env.trigger("ct.gated_sleep_then_item", None, run_id=run_id), daemon=True
    )
    driving.start()
    assert gate.entered.wait(60)
    return env, gate, driving


@pytest.mark.race
def test_a_delivery_that_sees_the_run_held_marks_it_and_is_taken_when_the_holder_lets_go(
    make_env: MakeEnv,
) -> None:
    run_id = "run_marked"
    env, gate, driving = held_in_its_first_step(make_env, run_id)
    assert env.send_event(run_id, "item", {"n": 1}, event_id="e1").status == "buffered"
    held = env.engine.runs.get(run_id)
    assert held is not None and held.lease is not None and held.dirty, "the delivery marks it"
    # A second delivery finds the mark and leaves the run as it is.
    assert env.send_event(run_id, "other", None, event_id="e2").status == "buffered"
    assert env.engine.runs.get(run_id).version == held.version
    gate.opened.set()
    driving.join(60)
    assert not driving.is_alive(), "the drive never let go of the run"
    # The run now waits on its sleep alone; the holder took both deliveries as it let go.
    parked = env.get_run(run_id)
    assert parked.status == "waiting"
    pending = env.engine.pending
    assert pending is not None and pending.pending(run_id) == []
    env.advance("1m")
    done = env.get_run(run_id)
    assert (done.status, done.output) == ("completed", {"n": 1})


@pytest.mark.race
def test_a_delivery_whose_mark_comes_after_the_holder_let_go_takes_itself_into_the_run(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = "run_late_mark"
    env, gate, driving = held_in_its_first_step(make_env, run_id)
    runs = env.engine.runs
    mark = runs.mark_dirty

    def mark_after_the_holder_let_go(marked_id: str, *, version: int) -> bool:
        gate.opened.set()
        driving.join(60)
        return mark(marked_id, version=version)

    monkeypatch.setattr(runs, "mark_dirty", mark_after_the_holder_let_go)
    assert env.send_event(run_id, "item", {"n": 2}, event_id="e1").status == "buffered"
    assert not driving.is_alive(), "the drive never let go of the run"
    parked = env.engine.runs.get(run_id)
    assert parked is not None and parked.lease is None and not parked.dirty
    assert [item.id for item in parked.inbox] == ["e1"]
    pending = env.engine.pending
    assert pending is not None and pending.pending(run_id) == []
    env.advance("1m")
    done = env.get_run(run_id)
    assert (done.status, done.output) == ("completed", {"n": 2})


def test_a_run_that_parks_on_a_timer_unmarked_does_not_read_its_stored_deliveries(
    make_env: MakeEnv,
) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.sleepy], services={"rec": recorder})
    pending = env.engine.pending
    assert pending is not None
    reads: list[str] = []
    read = pending.pending
    env.engine.pending.pending = lambda run_id: reads.append(run_id) or read(run_id)  # type: ignore[method-assign]
    run = env.trigger("ct.sleepy", None)
    assert run.status == "waiting"
    env.advance("10m")
    assert env.get_run(run.id).status == "completed"
    assert reads == []


@pytest.mark.parametrize(("on_timeout", "output"), [("null", {"got": None})])
def test_a_wait_timeout_resolves_to_none(make_env: MakeEnv, on_timeout: str, output: dict) -> None:
    env = make_env(workflows=[wf.event_timeout])
    run = env.trigger("ct.event_timeout", {"on_timeout": on_timeout})
    env.advance("59m")
    assert env.get_run(run.id).status == "waiting"
    env.advance("1m")
    assert env.get_run(run.id).output == output


def test_a_wait_timeout_raises_when_asked(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.raise_timeout, wf.event_timeout])
    caught = env.trigger("ct.raise_timeout", None)
    uncaught = env.trigger("ct.event_timeout", {"on_timeout": "raise"})
    env.advance("1h")
    assert env.get_run(caught.id).output == {"caught": "WAIT_TIMEOUT"}
    failed = env.get_run(uncaught.id)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "WAIT_TIMEOUT"


def test_injections_into_finished_runs_are_refused(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.approval])
    run = env.trigger("ct.approval", None)
    env.signal(run.id, "approve", 1)
    with pytest.raises(RunTerminalError) as info:
        env.signal(run.id, "approve", 2)
    assert info.value.code == "run_terminal"
