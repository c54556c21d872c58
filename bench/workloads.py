"""The workflows the benchmarks run: sequential steps, steps separated by sleeps, one big
output, and a fan-out (``ctx.map`` with one step per item).

Each takes ``{"steps": n}`` (and ``{"bytes": n}`` for the big one). Step outputs are realistic:
100-200 bytes of random data (incompressible) and a distinct timestamp, and each step moves
the virtual clock by ``STEP_MS`` (the step's work), so time-based checkpoint limits matter.
Every shape exists per step (the default) and batched (``checkpoint="batched"``); the same
shapes are written for the peer SDK in ``peer.py``.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable
from typing import Any

from relayflow.sdk.registry import Workflow, workflow

SEQUENTIAL = "bench.sequential"
SEQUENTIAL_BATCHED = "bench.sequential.batched"
SLEEPY = "bench.sleepy"
SLEEPY_BATCHED = "bench.sleepy.batched"
BIG_OUTPUT = "bench.big_output"
FANOUT = "bench.fanout"
#: How long each sleep of the sleepy workflow lasts.
SLEEP = "1m"
#: Virtual milliseconds each step's work takes.
STEP_MS = 10
#: The service that moves the virtual clock (``ctx.services``); absent, steps take no time.
CLOCK_SERVICE = "bench.clock"


def realistic_output(i: int, tick: Callable[[], int] | None = None) -> dict[str, Any]:
    """A step's output: its index, a distinct timestamp and 100-200 random bytes (base64)."""
    at = tick() if tick is not None else i
    size = 100 + secrets.randbelow(101)
    return {"i": i, "at": at, "data": base64.b64encode(secrets.token_bytes(size)).decode()}


def _ticker(ctx: Any) -> Callable[[], int] | None:
    if not ctx.services.has(CLOCK_SERVICE):
        return None
    clock = ctx.services.resolve(CLOCK_SERVICE)

    def tick() -> int:
        clock.advance(STEP_MS)
        now: int = clock.now_ms()
        return now

    return tick


def _sequential(data: Any, ctx: Any) -> Any:
    tick = _ticker(ctx)
    last: Any = None
    for i in range(data["steps"]):
        last = ctx.step(f"s{i}", realistic_output, i, tick)
    return last


def _sleepy(data: Any, ctx: Any) -> Any:
    tick = _ticker(ctx)
    last: Any = None
    for i in range(data["steps"]):
        if i:
            ctx.sleep(SLEEP)
        last = ctx.step(f"s{i}", realistic_output, i, tick)
    return last


sequential = workflow(id=SEQUENTIAL)(_sequential)
sequential_batched = workflow(id=SEQUENTIAL_BATCHED, checkpoint="batched")(_sequential)
sleepy = workflow(id=SLEEPY)(_sleepy)
sleepy_batched = workflow(id=SLEEPY_BATCHED, checkpoint="batched")(_sleepy)


def _blob(size: int) -> dict[str, Any]:
    return {"blob": "x" * size}


@workflow(id=BIG_OUTPUT)
def big_output(data: Any, ctx: Any) -> Any:
    """One step whose output is a JSON object of about ``bytes`` bytes; returns that output."""
    return ctx.step("big", _blob, data["bytes"])


async def _fanout_item(ctx: Any, i: int, _index: int) -> Any:
    return await ctx.step("work", realistic_output, i)


@workflow(id=FANOUT)
async def fanout(data: Any, ctx: Any) -> Any:
    """``ctx.map`` over ``items`` items with one step each, ``concurrency`` at a time;
    returns how many succeeded."""
    done = await ctx.map(
        list(range(data["items"])), _fanout_item, max_concurrency=data["concurrency"]
    )
    return done.success_count


WORKFLOWS: tuple[Workflow[Any], ...] = (
    sequential,
    sequential_batched,
    sleepy,
    sleepy_batched,
    big_output,
    fanout,
)
#: The per-step and batched twin of each shape.
MODES = {"per step": (SEQUENTIAL, SLEEPY), "batched": (SEQUENTIAL_BATCHED, SLEEPY_BATCHED)}
