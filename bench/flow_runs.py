"""The extra DynamoDB writes concurrency adds to a whole run, on the metered AWS driver
(moto): each limited run against the same run of an unlimited twin workflow, on a key whose
state item exists already. Counts every write the run causes, its own saves included (a run
that queued is started by its drive's first save, as one that got its slot at once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.moto_stack import MotoStack
from relayflow.flow import Concurrency
from relayflow.sdk.registry import workflow


def _short_step(n: Any) -> Any:
    return n


async def _maybe_hold(data: Any, ctx: Any) -> Any:
    if data.get("hold"):
        await ctx.sleep("1m")
    return await ctx.step("work", _short_step, 1)


workflow(id="bench.flow.free")(_maybe_hold)
workflow(id="bench.flow.limited", concurrency=Concurrency(limit=1, key="key"))(_maybe_hold)


@dataclass(frozen=True)
class RunCosts:
    """(write requests, write units) concurrency adds to a run that got its slot at once,
    and to one that queued behind a holder."""

    no_wait: tuple[int, int]
    queued: tuple[int, int]


def measure() -> RunCosts:
    """Meter each shape once for the limited workflow and once for its unlimited twin."""
    with MotoStack() as stack:

        def cost(workflow_id: str, *, queued: bool) -> tuple[int, int]:
            if queued:
                stack.trigger(workflow_id, {"key": "warm", "hold": True})
            stack.trigger(workflow_id, {"key": "warm"})
            stack.run_until_idle()
            tally, _ = stack.take()
            return tally.dynamodb_writes, tally.write_units

        cost("bench.flow.limited", queued=False)  # creates the key's state item
        stack.take()
        single = _extra(
            cost("bench.flow.limited", queued=False), cost("bench.flow.free", queued=False)
        )
        pair = _extra(cost("bench.flow.limited", queued=True), cost("bench.flow.free", queued=True))
    # The pair's extra is the holder's (a run that got its slot at once) plus the queued run's.
    return RunCosts(single, (pair[0] - single[0], pair[1] - single[1]))


def _extra(limited: tuple[int, int], free: tuple[int, int]) -> tuple[int, int]:
    return limited[0] - free[0], limited[1] - free[1]
