"""The workflows the benchmarks run: sequential steps, steps separated by sleeps, one big output.

Each takes ``{"steps": n}`` (and ``{"bytes": n}`` for the big one); step outputs are small JSON
objects unless said otherwise. The same shapes are written for the peer SDK in ``peer.py``.
"""

from __future__ import annotations

from typing import Any

from relayflow.sdk.registry import workflow

SEQUENTIAL = "bench.sequential"
SLEEPY = "bench.sleepy"
BIG_OUTPUT = "bench.big_output"
#: How long each sleep of the sleepy workflow lasts.
SLEEP = "1m"


def small_output(i: int) -> dict[str, Any]:
    """A step's small output: about 20 bytes of JSON."""
    return {"i": i, "ok": True}


@workflow(id=SEQUENTIAL)
def sequential(data: Any, ctx: Any) -> Any:
    """``steps`` steps one after the other; returns the last output."""
    last: Any = None
    for i in range(data["steps"]):
        last = ctx.step(f"s{i}", small_output, i)
    return last


@workflow(id=SLEEPY)
def sleepy(data: Any, ctx: Any) -> Any:
    """``steps`` steps with a one-minute sleep between each two (``steps - 1`` sleeps)."""
    last: Any = None
    for i in range(data["steps"]):
        if i:
            ctx.sleep(SLEEP)
        last = ctx.step(f"s{i}", small_output, i)
    return last


def _blob(size: int) -> dict[str, Any]:
    return {"blob": "x" * size}


@workflow(id=BIG_OUTPUT)
def big_output(data: Any, ctx: Any) -> Any:
    """One step whose output is a JSON object of about ``bytes`` bytes; returns that output."""
    return ctx.step("big", _blob, data["bytes"])


WORKFLOWS = (sequential, sleepy, big_output)
