"""The workflows of figure 6, in a module of their own so ``relayflow dev --app`` can host
them as a user's app."""

from __future__ import annotations

import time
from typing import Any

from relayflow.sdk.registry import workflow


def _sleep_step(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


@workflow(id="bench.time.long_step")
async def long_step(data: Any, ctx: Any) -> Any:
    return await ctx.step("long", _sleep_step, data["seconds"])


@workflow(id="bench.time.collect")
async def collect(data: Any, ctx: Any) -> Any:
    got = []
    for _ in range(data["n"]):
        got.append(await ctx.wait_for_event("item"))
    return got
