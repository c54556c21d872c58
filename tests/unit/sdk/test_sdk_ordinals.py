"""Journal ordinals: every operation is checked against the entry journalled at its position
in its scope when the body reaches it, so changed code fails before any of it runs."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

from relayflow.errors import NonDeterminismError
from relayflow.protocol import StepJournalEntry
from relayflow.sdk import workflow
from relayflow.testing import WorkflowTestEnv
from tests.unit.sdk.ordinal_scenarios import (
    CHANGED,
    Calls,
    deploy_map,
    deploy_parallel,
    deploy_steps,
    divergence,
    park_then_change,
)
from tests.unit.sdk.sdk_harness import Harness, clean_registry  # noqa: F401


def _ordinals(env: WorkflowTestEnv, run_id: str) -> dict[str, int | None]:
    record = env.runs.get(run_id)
    assert record is not None
    return {key: entry.ordinal for key, entry in record.journal.step_results.items()}


def _failure(env: WorkflowTestEnv, run_id: str) -> tuple[str, str, Any]:
    detail = env.get_run(run_id)
    assert detail.status == "failed", detail
    assert detail.error is not None
    return detail.error.code, detail.error.message, detail.error.data


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
def test_a_renamed_step_fails_at_its_ordinal_before_anything_of_the_new_code_runs(
    is_async: bool,
) -> None:
    calls = Calls()
    env = WorkflowTestEnv([deploy_steps("first", is_async=is_async)], services={"calls": calls})
    run_id = park_then_change(env, calls, lambda: deploy_steps("renamed", is_async=is_async))
    code, message, data = _failure(env, run_id)
    assert code == "NON_DETERMINISM"
    assert "#0" in message and "'first'" in message and "'renamed'" in message
    assert data == divergence(0, "", ("first", "step"), ("renamed", "step"))
    assert calls.names == []  # neither `renamed`, nor `second`, nor `after`


def test_unchanged_code_journals_each_entry_with_its_ordinal_in_its_scope() -> None:
    calls = Calls()
    env = WorkflowTestEnv([deploy_map("a")], services={"calls": calls})
    run = env.trigger(CHANGED)
    env.advance("1h")
    assert env.get_run(run.id).status == "completed"
    assert calls.names == ["x", "a0", "a1", "b0", "b1"]
    assert _ordinals(env, run.id) == {
        "x": 0,
        "batch:m0": 1,
        "branch:m0.0": 1,
        "branch:m0.1": 1,
        "m0.0/a": 0,
        "m0.0/b": 1,
        "m0.1/a": 0,
        "m0.1/b": 1,
    }


def test_groups_tokens_conditions_and_callbacks_are_numbered_with_the_steps() -> None:
    calls = Calls()

    @workflow(id="ord.kinds")
    def body(data: Any, ctx: Any) -> Any:
        ctx.group("g", lambda g: [g.step("a", calls.run, "a"), g.step("b", calls.run, "b")])
        ctx.wait_for_token(token_id="approval")
        ctx.wait_for_condition(lambda state: (True, state), 0, name="ready")
        return ctx.step("last", calls.run, "last")

    result = Harness("ord.kinds").call()
    assert result["status"] == "completed"
    ordinals = {key: e.get("ordinal") for key, e in result["journal"]["stepResults"].items()}
    assert ordinals == {
        "g/a": 0,
        "g/b": 1,
        "group:g": 0,
        "token:approval": 1,
        "condition:ready": 2,
        "last": 3,
    }


def test_a_step_renamed_inside_map_items_fails_in_the_item_before_it_runs() -> None:
    calls = Calls()
    env = WorkflowTestEnv([deploy_map("a")], services={"calls": calls})
    run_id = park_then_change(env, calls, lambda: deploy_map("a2"))
    code, message, data = _failure(env, run_id)
    assert code == "NON_DETERMINISM"
    assert "'m0.0'" in message
    assert data == divergence(0, "m0.0", ("m0.0/a", "step"), ("m0.0/a2", "step"))
    assert calls.names == []


def test_a_step_inserted_where_an_unfinished_parallel_stands_fails_before_it_runs() -> None:
    calls = Calls()
    env = WorkflowTestEnv([deploy_parallel(inserted=False)], services={"calls": calls})
    run_id = park_then_change(env, calls, lambda: deploy_parallel(inserted=True))
    code, _, data = _failure(env, run_id)
    assert code == "NON_DETERMINISM"
    assert data == divergence(1, "", ("batch:p0", "batch"), ("inserted", "step"))
    assert calls.names == []


def test_concurrent_operations_in_one_scope_replay_in_any_order() -> None:
    """Steps gathered in one scope are reached in another order on replay (a journalled step
    returns without yielding): their positions are not checked, and the run completes."""
    z_done = threading.Event()
    calls = Calls()

    def x() -> str:
        assert z_done.wait(5)
        return calls.run("x")

    def z() -> str:
        z_done.set()
        return calls.run("z")

    @workflow(id="ord.gather")
    async def body(data: Any, ctx: Any) -> Any:
        async def x_then_y() -> Any:
            await ctx.step("x", x)
            return await ctx.step("y", calls.run, "y")

        first = await asyncio.gather(x_then_y(), ctx.step("z", z))
        await ctx.sleep("1h")
        return [first, await ctx.step("after", calls.run, "after")]

    env = WorkflowTestEnv([body])
    run = env.trigger("ord.gather")
    env.advance("1h")
    detail = env.get_run(run.id)
    assert detail.status == "completed", detail.error
    assert detail.output == [["y", "z"], "after"]
    assert sorted(calls.names) == ["after", "x", "y", "z"]


# ---- hand-built journals ----------------------------------------------------------------


def _ok(output: Any, ordinal: int | None, kind: str = "step") -> dict[str, Any]:
    return StepJournalEntry(status="ok", kind=kind, output=output, ordinal=ordinal).to_wire()


def _steps_harness(calls: Calls, *ids: str) -> Harness:
    """A harness for a body that runs the steps ``ids`` in order and returns the last."""

    @workflow(id="ord.steps")
    def body(data: Any, ctx: Any) -> Any:
        return [ctx.step(step_id, calls.run, step_id) for step_id in ids][-1]

    return Harness("ord.steps")


def test_a_journalled_step_reached_at_another_ordinal_fails_before_the_body_goes_on() -> None:
    calls = Calls()
    harness = _steps_harness(calls, "second", "first", "third")
    harness.journal = {"stepResults": {"first": _ok(1, 0), "second": _ok(2, 1)}}
    result = harness.call()
    assert (result["status"], result["error"]["code"]) == ("failed", "NON_DETERMINISM")
    assert result["error"]["data"]["expected"] == {"id": "first", "kind": "step"}
    assert result["error"]["data"]["found"] == {"id": "second", "kind": "step"}
    assert calls.names == []


def test_another_kind_at_a_journalled_ordinal_fails_before_its_body_runs() -> None:
    calls = Calls()

    @workflow(id="ord.kind")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.group("first", lambda g: g.step("inner", calls.run, "inner"))

    harness = Harness("ord.kind")
    harness.journal = {"stepResults": {"first": _ok(1, 0)}}
    result = harness.call()
    assert result["error"]["data"] == divergence(0, "", ("first", "step"), ("group:first", "group"))
    assert calls.names == []


def test_a_body_that_swallows_the_error_runs_nothing_more() -> None:
    calls = Calls()

    @workflow(id="ord.swallow")
    def body(data: Any, ctx: Any) -> Any:
        with contextlib.suppress(NonDeterminismError):
            ctx.step("renamed", calls.run, "renamed")
        return ctx.step("fresh", calls.run, "fresh")

    harness = Harness("ord.swallow")
    harness.journal = {"stepResults": {"first": _ok(1, 0)}}
    result = harness.call()
    assert (result["status"], result["error"]["code"]) == ("failed", "NON_DETERMINISM")
    assert calls.names == []


def test_a_journal_written_before_ordinals_replays_and_new_entries_get_theirs() -> None:
    calls = Calls()
    harness = _steps_harness(calls, "first", "second", "third")
    harness.journal = {"stepResults": {"first": _ok("first", None), "second": _ok("second", None)}}
    result = harness.call()
    assert (result["status"], result["output"]) == ("completed", "third")
    assert calls.names == ["third"]
    steps = result["journal"]["stepResults"]
    assert "ordinal" not in steps["first"] and steps["third"]["ordinal"] == 2


def test_a_journal_written_before_ordinals_keeps_the_check_at_the_end() -> None:
    calls = Calls()
    harness = _steps_harness(calls, "renamed")
    harness.journal = {"stepResults": {"first": _ok("first", None)}}
    result = harness.call()
    assert (result["status"], result["error"]["code"]) == ("failed", "NON_DETERMINISM")
    assert "'first'" in result["error"]["message"]
    assert calls.names == ["renamed"]  # without ordinals, found only once the body finished
