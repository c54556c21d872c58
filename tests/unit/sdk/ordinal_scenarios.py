"""Runs whose code changes while they wait, shared by the SDK and the engine tests of the
journal's ordinals: each ``deploy_*`` registers (or replaces) the workflow ``CHANGED``."""

from __future__ import annotations

from typing import Any

from relayflow.sdk.registry import Workflow, workflow
from relayflow.testing import WorkflowTestEnv

CHANGED = "ord.changed"


class Calls:
    """Records every step function that ran, by name (``ctx.services`` key ``calls``)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def run(self, name: str) -> str:
        self.names.append(name)
        return name


def _calls(ctx: Any) -> Calls:
    calls: Calls = ctx.services.resolve("calls")
    return calls


def deploy_steps(first: str, *, is_async: bool = False) -> Workflow[Any]:
    """Steps ``first`` and ``second``, an hour's sleep, then step ``after``."""

    def body(data: Any, ctx: Any) -> Any:
        calls = _calls(ctx)
        ctx.step(first, calls.run, first)
        ctx.step("second", calls.run, "second")
        ctx.sleep("1h")
        return ctx.step("after", calls.run, "after")

    async def async_body(data: Any, ctx: Any) -> Any:
        calls = _calls(ctx)
        await ctx.step(first, calls.run, first)
        await ctx.step("second", calls.run, "second")
        await ctx.sleep("1h")
        return await ctx.step("after", calls.run, "after")

    return workflow(id=CHANGED)(async_body if is_async else body)


def deploy_map(item_step: str) -> Workflow[Any]:
    """Step ``x``, then a map of two items, each: step ``item_step``, a sleep, step ``b``."""

    def item(ictx: Any, value: int, index: int) -> Any:
        calls = _calls(ictx)
        ictx.step(item_step, calls.run, f"{item_step}{index}")
        ictx.sleep("1h")
        return ictx.step("b", calls.run, f"b{index}")

    def body(data: Any, ctx: Any) -> Any:
        ctx.step("x", _calls(ctx).run, "x")
        return ctx.map([10, 20], item).results

    return workflow(id=CHANGED)(body)


def deploy_parallel(*, inserted: bool) -> Workflow[Any]:
    """Step ``x``, (step ``inserted``,) then a parallel whose first branch finishes at once
    and whose second sleeps an hour before its step."""

    def quick(bctx: Any) -> Any:
        return bctx.step("q", _calls(bctx).run, "q")

    def slow(bctx: Any) -> Any:
        bctx.sleep("1h")
        return bctx.step("s", _calls(bctx).run, "s")

    def body(data: Any, ctx: Any) -> Any:
        calls = _calls(ctx)
        ctx.step("x", calls.run, "x")
        if inserted:
            ctx.step("inserted", calls.run, "inserted")
        return ctx.parallel([quick, slow]).results

    return workflow(id=CHANGED)(body)


def divergence(
    ordinal: int, scope: str, expected: tuple[str, str], found: tuple[str, str]
) -> dict[str, Any]:
    """The data of the ``NON_DETERMINISM`` error for ``found`` (id, kind) reached as operation
    ``ordinal`` of ``scope`` where the journal has ``expected``."""
    return {
        "ordinal": ordinal,
        "scope": scope,
        "expected": {"id": expected[0], "kind": expected[1]},
        "found": {"id": found[0], "kind": found[1]},
    }


def park_then_change(env: WorkflowTestEnv, calls: Calls, change: Any) -> str:
    """Trigger ``CHANGED``, see it park on its sleeps, deploy ``change()`` and wake the run:
    returns the run id; ``calls`` then holds only what ran after the change."""
    run = env.trigger(CHANGED)
    assert env.get_run(run.id).status == "waiting"
    change()
    calls.names.clear()
    env.advance("1h")
    return run.id
