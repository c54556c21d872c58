"""relayflow twins of the reference workflows the wire fixtures were written for.

Each body does what the reference workflow of the same id does (reference §1), so relayflow's
step host, given a fixture's request, must produce the fixture's answer.
"""

from __future__ import annotations

from typing import Any

from relayflow.errors import ChildRunError, FatalError
from relayflow.sdk import RetryPolicy, workflow


def _one() -> int:
    return 1


def _two() -> int:
    return 2


def _declined() -> None:
    raise FatalError("card declined", code="DECLINED")


_flaky_calls: list[int] = []


def _always_down() -> None:
    _flaky_calls.append(1)
    raise RuntimeError("service down")


def _refund(output: Any) -> None:
    return None


@workflow(id="conf.steps")
def steps(data: Any, ctx: Any) -> Any:
    return ctx.step("a", _one) + ctx.step("b", _two)


@workflow(id="conf.retries")
def retries(data: Any, ctx: Any) -> Any:
    return ctx.step("call", _always_down, retry=RetryPolicy(max=3, backoff="fixed", initial=0))


@workflow(id="conf.fails")
def fails(data: Any, ctx: Any) -> Any:
    ctx.step("charge", _declined)


@workflow(id="conf.sleep")
def sleeps(data: Any, ctx: Any) -> Any:
    ctx.sleep("1m")
    return "awake"


@workflow(id="conf.event")
def event(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_event("order.shipped", timeout="1h")


@workflow(id="conf.signal")
def signal(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_signal("go")


@workflow(id="conf.token")
def token(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_token(on_timeout="null").wait()


@workflow(id="conf.child")
def child(data: Any, ctx: Any) -> Any:
    return {"doubled": data["n"] * 2}


@workflow(id="conf.parent")
def parent(data: Any, ctx: Any) -> Any:
    return ctx.invoke("conf.child", {"n": 21})


@workflow(id="conf.gives_up")
def gives_up(data: Any, ctx: Any) -> Any:
    ctx.compensate()


@workflow(id="conf.parent_catches")
def parent_catches(data: Any, ctx: Any) -> Any:
    # The reference body: try { return await ctx.invoke(child) } catch (e) {
    #   return { code: e.code, message: e.message } }
    try:
        return ctx.invoke(data["child"], None)
    except ChildRunError as exc:
        return {"code": exc.child_code, "message": exc.child_message}


@workflow(id="conf.streams")
def streams(data: Any, ctx: Any) -> Any:
    ctx.stream.text("log", ["héllo"])
    ctx.stream.json("progress", [{"pct": 50}])
    ctx.stream.bytes("blob", [b"\x00\xff"])
    return "streamed"


@workflow(id="conf.metadata")
def metadata(data: Any, ctx: Any) -> Any:
    ctx.metadata.set("stage", "start")
    ctx.metadata.increment("count", 2)
    ctx.metadata.append("log", "a")
    ctx.metadata.remove("stage")
    return "ok"


@workflow(id="conf.saga")
def saga(data: Any, ctx: Any) -> Any:
    ctx.step("charge", _one, compensate=_refund)
    return ctx.wait_for_event("never")


@workflow(id="conf.saga_fails")
def saga_fails(data: Any, ctx: Any) -> Any:
    ctx.step("charge", _one, compensate=_refund)
    ctx.step("ship", _declined)
