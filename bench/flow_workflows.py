"""The workflows of the flow-control figure's run-level measurements, in a module of their
own so ``relayflow dev --app`` can host them as a user's app.

Each run does one short step. A run started with ``hold`` first waits for the event
``go``: it keeps its slot until the bench sends it, so that every other run queues behind it.
"""

from __future__ import annotations

from typing import Any

from relayflow.flow import Concurrency
from relayflow.sdk.registry import workflow

#: The event a holding run waits for.
GO = "go"


def _short_step(n: Any) -> Any:
    return n


async def _hold_then_step(data: Any, ctx: Any) -> Any:
    if data.get("hold"):
        await ctx.wait_for_event(GO)
    return await ctx.step("work", _short_step, data["n"])


singleton = workflow(id="bench.flow.limit1", concurrency=Concurrency(limit=1, key="key"))(
    _hold_then_step
)
five_wide = workflow(id="bench.flow.limit5", concurrency=Concurrency(limit=5, key="key"))(
    _hold_then_step
)
