"""The replay check: histories recorded by running a workflow through the engine, replayed
against changed code with ``relayflow.testing.replay`` / ``assert_replays``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from relayflow import workflow
from relayflow.errors import WorkflowNotFoundError
from relayflow.run_history import HistoryFileError, RunHistory, write_history
from relayflow.testing import WorkflowTestEnv, assert_replays, replay

pytestmark = pytest.mark.usefixtures("clean_registry")

WORKFLOW = "replay.order"


class Ledger:
    """Step functions that write down each call: a replay must call none of them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, name: str) -> Any:
        def step() -> str:
            self.calls.append(name)
            return name

        return step


def _body(ledger: Ledger, steps: list[str], *, sleep_after: int | None = None) -> Any:
    """A sync body running ``steps`` in order, sleeping after the ``sleep_after``-th."""

    @workflow(id=WORKFLOW, versioning="upgrade")
    def body(data: Any, ctx: Any) -> Any:
        done = []
        for number, name in enumerate(steps):
            done.append(ctx.step(name, ledger(name)))
            if number == sleep_after:
                ctx.sleep("1m")
        return done

    return body


def _recorded(steps: list[str], *, sleep_after: int | None = None) -> RunHistory:
    """A run of ``steps`` driven through the in-memory engine, as a history."""
    env = WorkflowTestEnv(workflows=[_body(Ledger(), steps, sleep_after=sleep_after)])
    run = env.trigger(WORKFLOW, {"order": 1})
    env.advance("2m")
    env.run_until_idle()
    assert env.get_run(run.id).status == "completed"
    return env.admin.history(run.id)


def test_unchanged_code_replays_without_running_a_step() -> None:
    history = _recorded(["reserve", "charge", "ship"], sleep_after=1)
    ledger = Ledger()

    report = replay(history, _body(ledger, ["reserve", "charge", "ship"], sleep_after=1))

    assert report.ok and report.divergences == ()
    assert report.outcome == "completed"
    assert ledger.calls == [], "journalled results are returned, nothing runs"


def test_a_reordered_step_is_a_divergence() -> None:
    history = _recorded(["reserve", "charge", "ship"])

    report = replay(history, _body(Ledger(), ["reserve", "ship", "charge"]))

    assert not report.ok
    (divergence,) = report.divergences
    assert (divergence.scope, divergence.ordinal) == ("", 1)
    assert divergence.expected == {"id": "charge", "kind": "step"}
    assert divergence.found == {"id": "ship", "kind": "step"}
    assert "history has step 'charge', code reaches step 'ship'" in divergence.describe()


def test_a_removed_step_is_a_divergence_in_the_middle_and_at_the_end() -> None:
    history = _recorded(["reserve", "charge", "ship"])

    middle = replay(history, _body(Ledger(), ["reserve", "ship"]))
    end = replay(history, _body(Ledger(), ["reserve", "charge"]))

    assert [(d.ordinal, d.expected, d.found) for d in middle.divergences] == [
        (1, {"id": "charge", "kind": "step"}, {"id": "ship", "kind": "step"})
    ]
    assert [(d.ordinal, d.expected, d.found) for d in end.divergences] == [
        (2, {"id": "ship", "kind": "step"}, None)
    ]
    assert "code reaches the end of the body" in end.divergences[0].describe()


def test_a_changed_step_id_is_a_divergence() -> None:
    history = _recorded(["reserve", "charge", "ship"])

    report = replay(history, _body(Ledger(), ["reserve", "charge_card", "ship"]))

    assert [(d.ordinal, d.expected, d.found) for d in report.divergences] == [
        (1, {"id": "charge", "kind": "step"}, {"id": "charge_card", "kind": "step"})
    ]


def test_the_first_operation_past_the_history_ends_the_replay_unrun() -> None:
    history = _recorded(["reserve", "charge"])
    ledger = Ledger()

    report = replay(history, _body(ledger, ["reserve", "charge", "refund", "ship"]))

    assert report.ok and report.outcome == "end_of_history"
    assert ledger.calls == [], "the step past the history was not run"


def test_a_diverging_group_names_its_scope() -> None:
    ledger = Ledger()

    @workflow(id=WORKFLOW)
    def grouped(data: Any, ctx: Any) -> Any:
        def inner(g: Any) -> Any:
            held = g.step("hold", ledger("hold"))
            g.sleep("1m")
            return [held, g.step("charge", ledger("charge"))]

        return ctx.group("payment", inner)

    env = WorkflowTestEnv(workflows=[grouped])
    run = env.trigger(WORKFLOW, {})
    assert run.status == "waiting", "inside the group: its body replays on the next invocation"
    history = env.admin.history(run.id)

    @workflow(id=WORKFLOW)
    def regrouped(data: Any, ctx: Any) -> Any:
        def inner(g: Any) -> Any:
            charged = g.step("charge", ledger("charge"))
            g.sleep("1m")
            return [charged, g.step("hold", ledger("hold"))]

        return ctx.group("payment", inner)

    (divergence,) = replay(history, WORKFLOW).divergences
    assert (divergence.scope, divergence.ordinal) == ("payment", 0)
    assert divergence.expected == {"id": "payment/hold", "kind": "step"}
    assert ledger.calls == ["hold"], "only the recording ran a step"


def test_assert_replays_lists_every_divergence_of_every_file(tmp_path: Path) -> None:
    first = write_history(_recorded(["reserve", "charge", "ship"]), tmp_path)
    second = write_history(_recorded(["reserve", "charge"]), tmp_path)
    _body(Ledger(), ["reserve", "ship"])

    with pytest.raises(AssertionError) as raised:
        assert_replays([first, second])

    message = str(raised.value)
    assert "2 of 2 recorded run(s) do not replay" in message
    assert "history has step 'charge', code reaches step 'ship'" in message
    assert message.count("divergence(s)") == 2


def test_assert_replays_takes_a_folder_and_returns_the_reports(tmp_path: Path) -> None:
    write_history(_recorded(["reserve", "charge"]), tmp_path)
    write_history(_recorded(["reserve", "charge"]), tmp_path)
    _body(Ledger(), ["reserve", "charge", "ship"])

    reports = assert_replays(tmp_path)

    assert [r.outcome for r in reports] == ["end_of_history", "end_of_history"]


def test_a_file_that_is_no_history_is_refused_clearly(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something/2"}))

    with pytest.raises(HistoryFileError, match=r"broken\.json: not JSON"):
        replay(broken)
    with pytest.raises(HistoryFileError, match=r"not a relayflow\.history/1 document"):
        replay(other)
    with pytest.raises(HistoryFileError, match="cannot read the file"):
        replay(tmp_path / "missing.json")


def test_an_unknown_workflow_is_refused_clearly() -> None:
    history = _recorded(["reserve"])

    with pytest.raises(WorkflowNotFoundError, match="no workflow is registered under 'nope'"):
        replay(history, "nope")


def test_a_replay_reads_no_stream_polls_no_condition_and_runs_no_compensation() -> None:
    ledger = Ledger()

    @workflow(id=WORKFLOW)
    def recorded(data: Any, ctx: Any) -> Any:
        ctx.step("reserve", ledger("reserve"), compensate=lambda held: ledger("undo")())
        ctx.sleep("1m")
        return "done"

    env = WorkflowTestEnv(workflows=[recorded])
    run = env.trigger(WORKFLOW, {})
    env.advance("1m")
    history = env.admin.history(run.id)

    def source() -> Any:
        ledger.calls.append("stream read")
        yield "chunk"

    @workflow(id=WORKFLOW)
    def streams(data: Any, ctx: Any) -> Any:
        ctx.step("reserve", ledger("reserve"), compensate=lambda held: ledger("undo")())
        ctx.sleep("1m")
        return ctx.stream("progress", source)

    @workflow(id=WORKFLOW)
    def polls(data: Any, ctx: Any) -> Any:
        ctx.step("reserve", ledger("reserve"), compensate=lambda held: ledger("undo")())
        ctx.sleep("1m")
        return ctx.wait_for_condition(lambda state: (ledger("poll")(), state), None, delay="1s")

    @workflow(id=WORKFLOW)
    def compensates(data: Any, ctx: Any) -> Any:
        ctx.step("reserve", ledger("reserve"), compensate=lambda held: ledger("undo")())
        ctx.sleep("1m")
        ctx.compensate()

    outcomes = [replay(history, body).outcome for body in (streams, polls, compensates)]

    assert ledger.calls == ["reserve"], "only the recording ran anything"
    assert outcomes == ["end_of_history", "end_of_history", "compensated"]
