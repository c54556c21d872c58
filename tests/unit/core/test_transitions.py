"""Applying a step host's answer to a run: statuses, waits, wake times, journal ownership."""

from __future__ import annotations

import pytest
from core_builders import T0, fresh_run, respond, waiting, wp

from relayflow.core.effects import ArmAlarm, DisarmAlarm, Dispatch, ResumeParent, StartChild
from relayflow.core.interventions import cancel
from relayflow.core.record import ParentLink
from relayflow.core.settings import CoreSettings
from relayflow.core.transitions import apply_response, begin_invocation, build_request
from relayflow.core.trigger import resolve_run_id
from relayflow.protocol import parse_step_response


@pytest.mark.parametrize(
    ("explicit", "key", "expected"),
    [("mine", "k", "mine"), (None, "k", "idem-wf-k"), (None, None, "gen")],
)
def test_run_ids_are_explicit_then_idempotent_then_generated(
    explicit: str | None, key: str | None, expected: str
) -> None:
    assert resolve_run_id("wf", run_id=explicit, idempotency_key=key, generated="gen") == expected


def test_a_new_run_is_running_and_due_at_once() -> None:
    run = fresh_run(timeout_ms=5000)
    assert (run.status, run.wake_at, run.timeout_deadline) == ("running", T0, T0 + 5000)


def test_the_request_carries_the_journal_and_the_invocation_number() -> None:
    start, sent = begin_invocation(fresh_run(), T0, CoreSettings())
    request = build_request(start.record, T0, CoreSettings()).to_wire()
    assert sent is not None and sent.invocation == 1
    assert request["invocationCount"] == 1
    assert request["input"] == {"a": 1}
    assert request["deadline"] == T0 + CoreSettings().invocation_timeout_ms
    assert "cancel" not in request


@pytest.mark.parametrize(
    ("body", "status", "field", "value"),
    [
        ({"status": "completed", "output": 7}, "completed", "output", 7),
        (
            {"status": "failed", "error": {"code": "BOOM", "message": "x"}},
            "failed",
            "error.code",
            "BOOM",
        ),
        (
            {"status": "compensated", "error": {"code": "E"}, "compensations": []},
            "compensated",
            "error.code",
            "E",
        ),
        ({"status": "compensation_failed", "compensations": []}, "compensation_failed", "", None),
    ],
)
def test_terminal_answers_end_the_run(body: dict, status: str, field: str, value: object) -> None:
    run, _, effects = respond(fresh_run(), body)
    assert run.status == status
    assert run.completed_at == T0 and run.wake_at is None
    assert not any(isinstance(e, DisarmAlarm) for e in effects)  # never armed: nothing to disarm
    if field == "output":
        assert run.output == value
    elif field:
        assert run.error is not None and run.error.code == value


def test_a_run_that_had_an_alarm_disarms_it_when_it_ends() -> None:
    armed = fresh_run().model_copy(update={"alarm_armed": True})
    run, _, effects = respond(armed, {"status": "completed", "output": 1})
    assert DisarmAlarm("r1") in effects
    assert run.alarm_armed is False


def test_a_sleep_parks_the_run_and_arms_the_alarm_at_its_wake_time() -> None:
    run, _, effects = respond(fresh_run(), waiting(wp("sleep:0", "DATETIME", durationMs=600_000)))
    assert run.status == "waiting"
    assert run.journal.waitpoints_registered["sleep:0"].wake_at == T0 + 600_000
    assert effects == (ArmAlarm("r1", T0 + 600_000),)
    assert run.alarm_armed is True


def test_a_re_registered_wait_keeps_its_first_wake_time() -> None:
    run, _, _ = respond(fresh_run(), waiting(wp("sleep:0", "DATETIME", durationMs=1000)))
    run = run.model_copy(update={"status": "running"})
    again, _, effects = respond(
        run, waiting(wp("sleep:0", "DATETIME", durationMs=1000)), now=T0 + 500
    )
    assert again.journal.waitpoints_registered["sleep:0"].wake_at == T0 + 1000
    assert effects == (ArmAlarm("r1", T0 + 1000),)


def test_the_alarm_is_the_earliest_of_wake_retry_deadline_and_timeout() -> None:
    body = waiting(
        wp("sleep:0", "DATETIME", durationMs=9000),
        wp("retry:charge:1", "DATETIME", wakeAt=T0 + 7000, stepId="charge", attempt=1),
        wp("event:x:1", "EVENT", timeout_ms=5000, eventType="x"),
    )
    run, _, effects = respond(fresh_run(timeout_ms=60_000), body)
    assert run.wake_at == T0 + 5000
    shorter, _, _ = respond(fresh_run(timeout_ms=3000), body)
    assert shorter.wake_at == T0 + 3000
    assert effects[-1] == ArmAlarm("r1", T0 + 5000)


def test_a_checkpoint_yield_is_due_at_once_and_re_drives() -> None:
    run, _, effects = respond(
        fresh_run(), waiting(wp("checkpoint:1", "DATETIME", wakeAt=T0, reason="deadline"))
    )
    assert run.status == "running"
    assert run.journal.waitpoints_resolved["checkpoint:1"].source == "replay"
    assert Dispatch("r1") in effects


def test_a_waiting_answer_without_waits_fails_the_run() -> None:
    run, _, _ = respond(fresh_run(), waiting())
    assert run.status == "failed" and run.error is not None
    assert run.error.code == "empty_waitpoint_list"


@pytest.mark.parametrize(
    "body", [{"status": "exploded"}, {"status": "failed"}, ["not", "an", "object"]]
)
def test_an_invalid_host_answer_fails_with_invalid_step_response(body: object) -> None:
    start, sent = begin_invocation(fresh_run(), T0, CoreSettings())
    assert sent is not None
    run = apply_response(start.record, 200, body, sent, T0, CoreSettings()).record
    assert run.status == "failed" and run.error is not None
    assert run.error.code == "invalid_step_response"


@pytest.mark.parametrize(("status", "transient"), [(500, True), (429, True), (404, False)])
def test_non_200_answers_are_retried_only_when_transient(status: int, transient: bool) -> None:
    body = {"error": "workflow_not_found", "message": "nope"}
    run, _, effects = respond(fresh_run(), body, status=status)
    if transient:
        assert run.status == "running"
        assert run.dispatch_retry.failures == 1
        assert run.dispatch_retry.next_attempt_at == T0 + 1000
        assert effects == (ArmAlarm("r1", T0 + 1000),)
    else:
        assert run.status == "failed" and run.error is not None
        assert run.error.code == "handler_error"
        assert "workflow_not_found" in run.error.message


def test_transient_failures_fail_the_run_after_the_last_attempt() -> None:
    settings = CoreSettings(dispatch_max_attempts=3)
    run = fresh_run()
    for attempt in range(3):
        start, sent = begin_invocation(run, T0, settings)
        assert sent is not None
        run = apply_response(start.record, 503, {}, sent, T0, settings).record
        assert run.status == ("failed" if attempt == 2 else "running")
    assert run.error is not None and run.error.code == "handler_error"
    assert "after 3 attempts" in run.error.message


def test_a_host_refusing_a_copy_of_a_request_it_ran_is_retried_not_failed() -> None:
    """A dispatcher's own retry of a request the host already accepted is answered 409
    request_replayed: nothing of the copy ran, so the invocation is sent anew later."""
    start, sent = begin_invocation(fresh_run(), T0, CoreSettings())
    assert sent is not None
    answer = {"error": "request_replayed", "message": "already accepted"}
    run = apply_response(start.record, 409, answer, sent, T0, CoreSettings()).record
    assert (run.status, run.dispatch_retry.failures) == ("running", 1)
    other = {"error": "conflict", "message": "something else"}
    failed = apply_response(start.record, 409, other, sent, T0, CoreSettings()).record
    assert failed.status == "failed"


def test_a_stale_answer_changes_nothing() -> None:
    start, sent = begin_invocation(fresh_run(), T0, CoreSettings())
    assert sent is not None
    newer, _ = begin_invocation(start.record, T0, CoreSettings())
    result = apply_response(newer.record, 200, {"status": "completed"}, sent, T0, CoreSettings())
    assert not result.changed and result.record.status == "running"


def test_the_operations_limit_fails_the_run_clearly() -> None:
    settings = CoreSettings(operations_limit=2)
    run = fresh_run()
    for _ in range(2):
        start, sent = begin_invocation(run, T0, settings)
        assert sent is not None
        run = start.record
    start, sent = begin_invocation(run, T0, settings)
    assert sent is None
    assert start.record.status == "failed" and start.record.error is not None
    assert start.record.error.code == "operations_limit_exceeded"
    assert "limit is 2" in start.record.error.message


def test_orchestrator_owned_journal_parts_survive_the_host_journal() -> None:
    run, _, _ = respond(fresh_run(), waiting(wp("sleep:0", "DATETIME", durationMs=0)))
    # sleep:0 was due at once: resolved by the orchestrator, not the host.
    assert "sleep:0" in run.journal.waitpoints_resolved
    body = {"status": "completed", "journal": {"stepResults": {"a": {"status": "ok"}}}}
    done, _, _ = respond(run, body)
    assert "sleep:0" in done.journal.waitpoints_resolved
    assert "sleep:0" in done.journal.waitpoints_registered
    assert "a" in done.journal.step_results


def test_metadata_updates_apply_once_per_id() -> None:
    updates = [
        {"op": "increment", "key": "n", "id": "m:0"},
        {"op": "append", "key": "log", "value": "a", "id": "m:1"},
    ]
    body = waiting(wp("sleep:0", "DATETIME", durationMs=10)) | {"metadataUpdates": updates}
    run, _, _ = respond(fresh_run(), body)
    run = run.model_copy(update={"status": "running"})
    replay = {
        "status": "completed",
        "metadataUpdates": [*updates, {"op": "set", "key": "k", "value": 1, "id": "m:2"}],
    }
    done, _, _ = respond(run, replay)
    assert done.metadata == {"n": 1, "log": ["a"], "k": 1}


def test_stream_chunks_and_compensation_reports_are_kept() -> None:
    body = {
        "status": "compensated",
        "error": {"code": "E"},
        "compensations": [{"stepId": "charge", "status": "ok", "durationMs": 3}],
        "streamChunks": [{"streamId": "s", "seq": 1, "chunk": "x"}],
    }
    run, _, _ = respond(fresh_run(), body)
    assert [c.step_id for c in run.compensations] == ["charge"]
    assert [c.chunk for c in run.streams["s"]] == ["x"]


@pytest.mark.parametrize("encoding", ["base64", "bytes"])
def test_bytes_chunks_are_read_as_base64_whichever_name_the_host_wrote(encoding: str) -> None:
    chunk = {"streamId": "b", "seq": 1, "encoding": encoding, "chunk": "AAE="}
    run, _, _ = respond(fresh_run(), {"status": "completed", "streamChunks": [chunk]})
    assert run.status == "completed"
    assert [(c.encoding, c.chunk) for c in run.streams["b"]] == [("base64", "AAE=")]
    assert run.streams["b"][0].to_wire()["encoding"] == "base64"


def test_invoke_starts_a_child_with_a_deterministic_id() -> None:
    body = waiting(wp("invoke:child:0", "RUN", childWorkflowId="child", childInput={"n": 1}))
    run, _, effects = respond(fresh_run(), body)
    starts = [e for e in effects if isinstance(e, StartChild)]
    assert len(starts) == 1
    spec = starts[0].spec
    assert spec.run_id == "r1/invoke:child:0"
    assert spec.parent == ParentLink(run_id="r1", waitpoint_id="invoke:child:0")
    assert spec.input == {"n": 1}
    assert run.status == "waiting"
    # A replay that re-registers the same wait starts no second child.
    again, _, effects2 = respond(run.model_copy(update={"status": "running"}), body)
    assert not [e for e in effects2 if isinstance(e, StartChild)]
    assert [c.run_id for c in again.children] == ["r1/invoke:child:0"]


def test_a_detached_invoke_resolves_at_once_with_none() -> None:
    body = waiting(wp("invoke:child:0", "RUN", childWorkflowId="child", detach=True))
    run, _, effects = respond(fresh_run(), body)
    start = next(e for e in effects if isinstance(e, StartChild))
    assert start.detached and start.spec.parent is None
    assert run.status == "running"
    assert run.journal.waitpoints_resolved["invoke:child:0"].payload is None


def test_a_child_that_ends_resumes_its_parent() -> None:
    child = fresh_run("p/invoke:c:0", parent=ParentLink(run_id="p", waitpoint_id="invoke:c:0"))
    done, _, effects = respond(child, {"status": "completed", "output": 5})
    resume = next(e for e in effects if isinstance(e, ResumeParent))
    assert (resume.parent_run_id, resume.waitpoint_id) == ("p", "invoke:c:0")
    assert resume.outcome.output == 5 and done.status == "completed"


@pytest.mark.parametrize(
    ("answer", "skipped"),
    [
        ({"status": "cancelled", "compensations": [{"stepId": "a", "status": "ok"}]}, None),
        (
            {"status": "compensated", "compensations": [{"stepId": "a", "status": "ok"}]},
            None,
        ),
        (waiting(wp("event:x:0", "EVENT", eventType="x")), ("host_cannot_compensate", "waiting")),
        ({"status": "completed", "output": 1}, ("host_cannot_compensate", "completed")),
        (
            {"status": "completed", "output": 1, "capabilities": ["cancel"]},
            ("host_did_not_compensate", "completed"),
        ),
    ],
)
def test_a_compensating_cancel_says_why_no_compensation_ran(
    answer: dict[str, object], skipped: tuple[str, str] | None
) -> None:
    parked, _, _ = respond(fresh_run(), waiting(wp("event:x:0", "EVENT", eventType="x")))
    asked = cancel(parked, "stop", True, T0).record

    done, sent, _ = respond(asked, answer)

    assert sent.cancel is True
    assert done.status == "cancelled"
    found = done.compensation_skipped
    assert (None if found is None else (found.code, found.host_status)) == skipped


def test_an_answer_applied_again_after_a_lost_save_is_applied_as_the_first_time() -> None:
    # An in-process host hands its StepResponse over as it is; a save that loses its race
    # applies that same object again to the run read anew.
    start, sent = begin_invocation(fresh_run(), T0, CoreSettings())
    assert sent is not None
    answer = parse_step_response(
        waiting(wp("checkpoint:1", "DATETIME", wakeAt=T0, reason="deadline"))
    )
    before = answer.to_wire()
    first = apply_response(start.record, 200, answer, sent, T0, CoreSettings()).record
    assert answer.to_wire() == before
    again = apply_response(start.record, 200, answer, sent, T0, CoreSettings()).record
    assert again == first
    assert first.journal.waitpoints_resolved["checkpoint:1"].source == "replay"
