"""Groups, sagas and cancellation: LIFO compensations, journalled, never run twice."""

from __future__ import annotations

from typing import Any

import pytest
from sdk_harness import Harness, clean_registry  # noqa: F401

from relayflow.errors import FatalError, StepFailedError
from relayflow.protocol import CancelDirective
from relayflow.sdk import workflow


def _decline() -> None:
    raise FatalError("declined", code="DECLINED")


class Undo:
    """Records compensations; ``fail`` names outputs whose undo raises."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.done: list[str] = []
        self.fail = fail

    def __call__(self, output: Any) -> None:
        self.done.append(output)
        if output in self.fail:
            raise RuntimeError(f"cannot undo {output}")


def _saga(undo: Undo, *, fail: bool = False, wait: bool = False, explicit: bool = False) -> None:
    @workflow(id="saga")
    def body(data: Any, ctx: Any) -> Any:
        for name in ("a", "b", "c"):
            ctx.step(name, lambda name=name: name, compensate=undo)
        if wait:
            ctx.wait_for_signal("go")
        if explicit:
            ctx.compensate()
        if fail:
            ctx.step("boom", _decline)
        return "done"


def test_an_uncaught_error_runs_compensations_newest_first() -> None:
    undo = Undo()
    _saga(undo, fail=True)
    harness = Harness("saga")
    result = harness.run()
    assert result["status"] == "compensated"
    assert result["error"]["code"] == "DECLINED"
    assert undo.done == ["c", "b", "a"]
    assert [r["stepId"] for r in result["compensations"]] == ["c", "b", "a"]
    assert all(r["status"] == "ok" for r in result["compensations"])
    assert set(harness.journal["compensationsRun"]) == {"a", "b", "c"}


def test_a_failing_compensation_does_not_stop_the_others() -> None:
    undo = Undo(fail=("b",))
    _saga(undo, fail=True)
    result = Harness("saga").run()
    assert result["status"] == "compensation_failed"
    assert undo.done == ["c", "b", "a"]
    assert [r["status"] for r in result["compensations"]] == ["ok", "err", "ok"]
    assert result["compensations"][1]["error"]["message"] == "cannot undo b"


def test_ctx_compensate_compensates_without_an_error() -> None:
    undo = Undo()
    _saga(undo, explicit=True)
    result = Harness("saga").run()
    assert result["status"] == "compensated"
    assert "error" not in result
    assert undo.done == ["c", "b", "a"]


def test_journalled_compensations_are_never_run_twice() -> None:
    undo = Undo()
    _saga(undo, fail=True)
    harness = Harness("saga")
    harness.run()
    harness.journal["compensationsRun"].pop("a")
    again = harness.call()
    assert undo.done == ["c", "b", "a", "a"]
    assert [r["stepId"] for r in again["compensations"]] == ["c", "b", "a"]


def test_a_user_error_while_waits_are_pending_is_not_masked_as_waiting() -> None:
    import asyncio

    @workflow(id="masked")
    async def body(data: Any, ctx: Any) -> Any:
        await asyncio.gather(ctx.wait_for_signal("never"), return_exceptions=True)
        raise ValueError("broken after registering a wait")

    result = Harness("masked").run()
    assert result["status"] == "failed"
    assert result["error"]["message"] == "broken after registering a wait"


@pytest.mark.parametrize(("compensate", "undone"), [(True, ["c", "b", "a"]), (False, [])])
def test_cancel_replays_to_the_first_unjournalled_operation(
    compensate: bool, undone: list[str]
) -> None:
    undo = Undo()
    _saga(undo, wait=True)
    harness = Harness("saga")
    assert harness.call()["status"] == "waiting"
    cancel = CancelDirective(reason="user", compensate=compensate).to_wire()
    result = harness.call(cancel=cancel)
    assert result["status"] == "cancelled"
    assert undo.done == undone
    assert [r["stepId"] for r in result["compensations"]] == undone


def test_cancel_never_starts_new_work() -> None:
    calls: list[str] = []

    @workflow(id="cancel_work")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("done", lambda: calls.append("done"))
        ctx.step("new", lambda: calls.append("new"))

    harness = Harness("cancel_work")
    harness.journal = {"stepResults": {"done": {"status": "ok", "output": None}}}
    result = harness.call(cancel={"reason": "stop"})
    assert result["status"] == "cancelled"
    assert calls == []


def test_a_group_result_is_checkpointed_and_its_steps_namespaced() -> None:
    runs: list[str] = []

    def checkout(gctx: Any) -> Any:
        runs.append("group")
        return gctx.step("charge", lambda: 42)

    @workflow(id="group")
    def body(data: Any, ctx: Any) -> Any:
        value = ctx.group("checkout", checkout)
        ctx.sleep("1s")
        return value

    harness = Harness("group")
    assert harness.run()["output"] == 42
    assert runs == ["group"], "replays return the checkpoint without re-running the group"
    assert "checkout/charge" in harness.journal["stepResults"]
    assert harness.journal["stepResults"]["group:checkout"]["output"] == 42


def test_a_failed_group_compensates_its_own_steps_once_even_across_replays() -> None:
    undo = Undo()

    def checkout(gctx: Any) -> Any:
        gctx.step("reserve", lambda: "reserve", compensate=undo)
        gctx.step("charge", lambda: "charge", compensate=undo)
        gctx.step("ship", _decline)

    @workflow(id="group_fail")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("outer", lambda: "outer", compensate=undo)
        try:
            ctx.group("checkout", checkout)
        except StepFailedError as exc:
            caught = exc.code
        for _ in range(3):
            ctx.sleep("1s")
        return caught

    harness = Harness("group_fail")
    result = harness.run()
    assert result["output"] == "DECLINED"
    assert len(harness.bodies) == 4
    assert undo.done == ["charge", "reserve"], "scoped, LIFO, and never again on replay"
    assert set(harness.journal["compensationsRun"]) == {"checkout/charge", "checkout/reserve"}


def test_compensations_of_a_finished_group_still_run_when_the_run_fails_later() -> None:
    undo = Undo()

    def booking(gctx: Any) -> Any:
        return gctx.step("hotel", lambda: "hotel", compensate=undo)

    @workflow(id="group_later")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("flight", lambda: "flight", compensate=undo)
        ctx.group("booking", booking)
        ctx.sleep("1s")
        ctx.step("pay", _decline)

    result = Harness("group_later").run()
    assert result["status"] == "compensated"
    assert undo.done == ["hotel", "flight"]


def test_compensations_of_finished_parallel_branches_run_in_branch_order() -> None:
    undo = Undo()

    @workflow(id="par_saga")
    def body(data: Any, ctx: Any) -> Any:
        ctx.parallel(
            [
                lambda c: c.step("x", lambda: "x", compensate=undo),
                lambda c: c.step("y", lambda: "y", compensate=undo),
            ]
        )
        ctx.sleep("1s")
        ctx.step("pay", _decline)

    result = Harness("par_saga").run()
    assert result["status"] == "compensated"
    assert undo.done == ["y", "x"]


def test_a_failed_branch_compensates_its_own_steps() -> None:
    undo = Undo()

    def branch(c: Any) -> Any:
        c.step("hold", lambda: "hold", compensate=undo)
        c.step("fail", _decline)

    @workflow(id="branch_saga")
    def body(data: Any, ctx: Any) -> Any:
        result = ctx.parallel([branch, lambda c: "fine"])
        ctx.sleep("1s")
        return result.failure_count

    assert Harness("branch_saga").run()["output"] == 1
    assert undo.done == ["hold"]


def test_compensate_inside_a_group_runs_everything_newest_first() -> None:
    undo = Undo()

    def scope(gctx: Any) -> Any:
        gctx.step("inner", lambda: "inner", compensate=undo)
        gctx.compensate()

    @workflow(id="group_comp")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("outer", lambda: "outer", compensate=undo)
        ctx.group("g", scope)

    result = Harness("group_comp").run()
    assert result["status"] == "compensated"
    assert undo.done == ["inner", "outer"]


def test_async_groups_and_async_compensations() -> None:
    undone: list[str] = []

    async def undo(output: str) -> None:
        undone.append(output)

    async def reserve(gctx: Any) -> Any:
        return await gctx.step("hold", lambda: "seat", compensate=undo)

    @workflow(id="async_saga")
    async def body(data: Any, ctx: Any) -> Any:
        seat = await ctx.group("reserve", reserve)
        await ctx.sleep("1s")
        await ctx.step("pay", _decline)
        return seat

    harness = Harness("async_saga")
    result = harness.run()
    assert result["status"] == "compensated"
    assert undone == ["seat"]
    assert harness.journal["stepResults"]["group:reserve"]["compensables"] == ["reserve/hold"]
