"""Injections, alarms, cancel and a child's end, as pure transitions."""

from __future__ import annotations

import pytest
from core_builders import T0, fresh_run, respond, waiting, wp

import relayflow.core.interventions as interventions
from relayflow.core.effects import ArmAlarm, CancelChildren, ChildOutcome, Dispatch, ResumeParent
from relayflow.core.inbox import Injection
from relayflow.core.interventions import cancel, child_ended, inject, on_alarm
from relayflow.core.pending import take
from relayflow.core.record import ParentLink, RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.transitions import apply_response, begin_invocation
from relayflow.errors import InboxFullError, RunTerminalError
from relayflow.protocol import SerializedError

S = CoreSettings()


def parked(*waitpoints: dict, **spec: object) -> RunRecord:
    run, _, _ = respond(fresh_run(**spec), waiting(*waitpoints))
    assert run.status == "waiting"
    return run


def event(key: str, payload: object = None, id: str = "e1") -> Injection:
    return Injection(kind="EVENT", key=key, id=id, payload=payload)


def test_a_matching_event_resolves_the_wait_and_re_drives() -> None:
    run = parked(wp("event:paid:0", "EVENT", eventType="paid"))
    t, result = inject(run, event("paid", {"n": 1}), T0 + 5, S)
    resolution = t.record.journal.waitpoints_resolved["event:paid:0"]
    assert (result.status, result.waitpoint_id) == ("resolved", "event:paid:0")
    assert (resolution.payload, resolution.source, resolution.matched_event_id) == (
        {"n": 1},
        "live",
        "e1",
    )
    assert t.record.status == "running" and Dispatch("r1") in t.effects


@pytest.mark.parametrize(
    ("match", "payload", "resolves"),
    [
        ({"orderId": "o1"}, {"orderId": "o1", "x": 2}, True),
        ({"orderId": "o1"}, {"orderId": "o2"}, False),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, True),
        ({"flag": True}, {"flag": 1}, False),
    ],
)
def test_match_is_a_deep_subset_of_the_payload(match: dict, payload: dict, resolves: bool) -> None:
    run = parked(wp("event:x:0", "EVENT", eventType="x", match=match))
    _, result = inject(run, event("x", payload), T0, S)
    assert result.status == ("resolved" if resolves else "buffered")


def test_an_early_event_is_buffered_then_consumed_by_the_first_matching_wait() -> None:
    run = fresh_run()
    t, result = inject(run, event("paid", 1, id="e1"), T0, S)
    assert result.status == "buffered"
    t, _ = inject(t.record, event("paid", 2, id="e2"), T0 + 1, S)
    later, _, effects = respond(t.record, waiting(wp("event:paid:0", "EVENT", eventType="paid")))
    resolution = later.journal.waitpoints_resolved["event:paid:0"]
    assert (resolution.payload, resolution.source) == (1, "inbox")
    assert [i.id for i in later.inbox] == ["e2"]
    assert later.status == "running" and Dispatch("r1") in effects


def test_the_inbox_deduplicates_by_event_id() -> None:
    t, _ = inject(fresh_run(), event("paid", 1, id="same"), T0, S)
    t2, result = inject(t.record, event("paid", 2, id="same"), T0, S)
    assert result.status == "duplicate" and not t2.changed
    assert len(t2.record.inbox) == 1


def test_a_consumed_event_id_is_a_duplicate_later() -> None:
    run = parked(wp("event:paid:0", "EVENT", eventType="paid"))
    t, _ = inject(run, event("paid", id="e1"), T0, S)
    _, result = inject(t.record, event("paid", id="e1"), T0, S)
    assert result.status == "duplicate"


def test_the_inbox_is_bounded() -> None:
    settings = CoreSettings(inbox_limit=2)
    run = fresh_run()
    for n in range(2):
        run = inject(run, event("x", id=f"e{n}"), T0, settings)[0].record
    with pytest.raises(InboxFullError):
        inject(run, event("x", id="e2"), T0, settings)


@pytest.mark.parametrize(("lookback", "consumed"), [(None, True), (50, True), (10, False)])
def test_lookback_limits_the_age_of_buffered_events(lookback: int | None, consumed: bool) -> None:
    run = inject(fresh_run(), event("x"), T0, S)[0].record
    meta = {"eventType": "x"} if lookback is None else {"eventType": "x", "lookback": lookback}
    later, _, _ = respond(run, waiting(wp("event:x:0", "EVENT", **meta)), now=T0 + 30)
    assert ("event:x:0" in later.journal.waitpoints_resolved) is consumed


def test_signals_and_tokens_match_by_name_and_token_id() -> None:
    run = parked(
        wp("signal:approve:0", "SIGNAL", signalName="approve"),
        wp("token:t1", "MANUAL", tokenId="t1"),
    )
    _t, r = inject(run, Injection(kind="SIGNAL", key="approve", id="s1", payload="ok"), T0, S)
    assert r.waitpoint_id == "signal:approve:0"
    error = SerializedError(code="DECLINED", message="no")
    failed = Injection(kind="MANUAL", key="t1", id="token:t1", outcome="fail", error=error)
    t2, r2 = inject(run, failed, T0, S)
    assert r2.waitpoint_id == "token:t1"
    resolution = t2.record.journal.waitpoints_resolved["token:t1"]
    assert resolution.error is not None and resolution.error.code == "DECLINED"


def test_injections_into_terminal_runs_are_refused() -> None:
    done, _, _ = respond(fresh_run(), {"status": "completed"})
    with pytest.raises(RunTerminalError) as info:
        inject(done, event("x"), T0, S)
    assert info.value.code == "run_terminal"


def test_a_due_sleep_resolves_on_the_alarm() -> None:
    run = parked(wp("sleep:0", "DATETIME", durationMs=1000))
    t = on_alarm(run, T0 + 1000, S)
    assert t.record.status == "running"
    assert t.record.journal.waitpoints_resolved["sleep:0"].source == "replay"


def test_an_early_alarm_changes_nothing_and_re_arms() -> None:
    run = parked(wp("sleep:0", "DATETIME", durationMs=1000))
    t = on_alarm(run, T0 + 999, S)
    assert not t.changed and t.effects == (ArmAlarm("r1", T0 + 1000),)


def test_a_wait_deadline_times_out() -> None:
    run = parked(wp("event:x:0", "EVENT", timeout_ms=500, eventType="x", onTimeout="null"))
    t = on_alarm(run, T0 + 500, S)
    resolution = t.record.journal.waitpoints_resolved["event:x:0"]
    assert (resolution.timed_out, resolution.source, resolution.payload) == (True, "timeout", None)
    assert t.record.status == "running"


def test_heartbeats_push_the_heartbeat_deadline() -> None:
    run = parked(wp("token:t", "MANUAL", tokenId="t", heartbeatTimeoutMs=100))
    beat = Injection(kind="MANUAL", key="t", id="hb", outcome="heartbeat")
    t, result = inject(run, beat, T0 + 80, S)
    assert result.status == "heartbeat"
    assert t.effects == (ArmAlarm("r1", T0 + 180),)
    assert not on_alarm(t.record, T0 + 150, S).changed
    missed = on_alarm(t.record, T0 + 180, S).record.journal.waitpoints_resolved["token:t"]
    assert missed.error is not None and missed.error.code == "HEARTBEAT_TIMEOUT"


def test_the_workflow_timeout_fails_the_run() -> None:
    run = parked(wp("sleep:0", "DATETIME", durationMs=10_000), timeout_ms=2000)
    assert run.wake_at == T0 + 2000
    t = on_alarm(run, T0 + 2000, S)
    assert t.record.status == "failed" and t.record.error is not None
    assert t.record.error.code == "WORKFLOW_TIMEOUT"


def test_cancel_without_compensation_ends_the_run_and_its_children() -> None:
    body = waiting(wp("invoke:c:0", "RUN", childWorkflowId="c"))
    run, _, _ = respond(fresh_run(), body)
    t = cancel(run, "user", False, T0)
    assert t.record.status == "cancelled" and t.record.error is not None
    assert (t.record.error.code, t.record.error.message) == ("CANCELLED", "user")
    assert CancelChildren(("r1/invoke:c:0",), reason="user") in t.effects


def test_cancel_with_compensation_asks_the_host_and_keeps_the_reports() -> None:
    run = parked(wp("sleep:0", "DATETIME", durationMs=1000))
    t = cancel(run, "user", True, T0)
    assert t.record.status == "running" and t.record.cancel_request is not None
    start, sent = begin_invocation(t.record, T0, S)
    assert sent is not None and sent.cancel
    body = {"status": "cancelled", "compensations": [{"stepId": "a", "status": "ok"}]}
    done = apply_response(start.record, 200, body, sent, T0, S).record
    assert done.status == "cancelled" and [c.step_id for c in done.compensations] == ["a"]


def test_a_cancel_during_an_invocation_is_not_lost() -> None:
    start, sent = begin_invocation(fresh_run(), T0, S)
    assert sent is not None
    requested = cancel(start.record, "stop", True, T0).record
    after = apply_response(requested, 200, {"status": "completed", "output": 1}, sent, T0, S)
    assert after.record.status == "running" and Dispatch("r1") in after.effects


def test_cancel_of_a_terminal_run_is_refused() -> None:
    done, _, _ = respond(fresh_run(), {"status": "completed"})
    with pytest.raises(RunTerminalError) as info:
        cancel(done, None, False, T0)
    assert info.value.code == "already_terminal"


def test_a_completed_child_resolves_the_parent_wait_with_its_output() -> None:
    run = parked(wp("invoke:c:0", "RUN", childWorkflowId="c"))
    t = child_ended(run, "invoke:c:0", ChildOutcome("r1/invoke:c:0", "completed", output=3), T0)
    assert t.record.journal.waitpoints_resolved["invoke:c:0"].payload == 3
    assert t.record.status == "running"


def test_a_failed_child_resolves_the_parent_wait_with_its_own_error() -> None:
    run = parked(wp("invoke:c:0", "RUN", childWorkflowId="c"))
    error = SerializedError(category="RUNTIME_ERROR", code="BOOM", message="bad", name="E")
    outcome = ChildOutcome("r1/invoke:c:0", "failed", error=error)
    resolution = child_ended(run, "invoke:c:0", outcome, T0).record.journal.waitpoints_resolved
    wire = resolution["invoke:c:0"].error
    assert wire is not None
    assert (wire.category, wire.code, wire.message) == ("RUNTIME_ERROR", "BOOM", "bad")
    assert wire.data == {"childRunId": "r1/invoke:c:0", "childStatus": "failed"}
    assert wire.cause is None


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (None, "failed"),
        (SerializedError(code="", message=""), "compensated"),
    ],
)
def test_a_child_ended_without_an_error_resolves_the_parent_wait_with_child_run_ended(
    error: SerializedError | None, status: str
) -> None:
    run = parked(wp("invoke:c:0", "RUN", childWorkflowId="c"))
    outcome = ChildOutcome("r1/invoke:c:0", status, error=error)
    resolution = child_ended(run, "invoke:c:0", outcome, T0).record.journal.waitpoints_resolved
    wire = resolution["invoke:c:0"].error
    assert wire is not None
    assert (wire.category, wire.code, wire.message) == (
        "USER_ERROR",
        "CHILD_RUN_ENDED",
        f"child run ended with status {status}",
    )


def test_a_child_cancelled_with_its_parent_resumes_nothing_on_a_terminal_parent() -> None:
    child = fresh_run("p/invoke:c:0", parent=ParentLink(run_id="p", waitpoint_id="invoke:c:0"))
    t = cancel(child, "x", False, T0)
    resume = next(e for e in t.effects if isinstance(e, ResumeParent))
    parent = respond(fresh_run("p"), {"status": "cancelled"})[0]
    assert not child_ended(parent, resume.waitpoint_id, resume.outcome, T0).changed


def test_taking_stored_deliveries_copies_the_record_once_and_leaves_it_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copies: list[str] = []
    real_copy = interventions.working_copy

    def counted(record: RunRecord) -> RunRecord:
        copies.append(record.id)
        return real_copy(record)

    monkeypatch.setattr(interventions, "working_copy", counted)
    run = parked(wp("event:paid:0", "EVENT", eventType="paid"))
    before = run.model_dump()
    items = [event("paid", n, id=f"e{n}").to_item(T0 + n) for n in range(5)]

    taken = take(run, [*items, items[1]], T0 + 10, S)

    assert copies == ["r1"]
    assert run.model_dump() == before
    after = taken.transition.record
    assert taken.transition.changed and after.status == "running"
    assert after.journal.waitpoints_resolved["event:paid:0"].matched_event_id == "e0"
    assert [i.id for i in after.inbox] == ["e1", "e2", "e3", "e4"]
    assert [taken.results[f"e{n}"].status for n in range(5)] == ["resolved", *["buffered"] * 4]


def test_a_full_inbox_refuses_only_the_deliveries_past_its_limit() -> None:
    settings = CoreSettings(inbox_limit=2)
    items = [event("x", id=f"e{n}").to_item(T0 + n) for n in range(4)]
    taken = take(fresh_run(), items, T0 + 10, settings)
    assert taken.refused == ["e2", "e3"]
    assert [i.id for i in taken.transition.record.inbox] == ["e0", "e1"]
