"""Workflows hosted by the driver contract suite (module level so the registry has them)."""

from __future__ import annotations

import threading
from typing import Any

from relayflow.errors import (
    ChildRunError,
    FatalError,
    HeartbeatTimeoutError,
    TokenFailedError,
    WaitTimeoutError,
)
from relayflow.sdk.registry import workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.testing import crash


class Recorder:
    """A thread-safe list of what happened, shared through ``ctx.services``."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()
        self.failures_left = 0
        self.crashes_left = 0

    def hit(self, item: Any = None) -> int:
        with self._lock:
            self.items.append(item)
            return len(self.items)

    def flaky(self, item: Any = None) -> str:
        with self._lock:
            self.items.append(item)
            if self.failures_left > 0:
                self.failures_left -= 1
                raise RuntimeError(f"flaky failure {len(self.items)}")
        return "ok"

    def maybe_crash(self) -> str:
        with self._lock:
            self.items.append("attempt")
            should = self.crashes_left > 0
            if should:
                self.crashes_left -= 1
        if should:
            crash()
        return "survived"


def rec(ctx: Any) -> Recorder:
    recorder: Recorder = ctx.services.resolve("rec")
    return recorder


@workflow(id="ct.echo")
def echo(data: Any, ctx: Any) -> Any:
    return data


@workflow(id="ct.count")
def count(data: Any, ctx: Any) -> Any:
    return ctx.step("hit", rec(ctx).hit, "body")


@workflow(id="ct.greet")
def greet(data: Any, ctx: Any) -> Any:
    greeter = ctx.services.resolve("greeter")
    return greeter(data["name"])


@workflow(id="ct.has")
def has(data: Any, ctx: Any) -> Any:
    return {"greeter": ctx.services.has("greeter"), "missing": ctx.services.has("missing")}


@workflow(id="ct.missing_service")
def missing_service(data: Any, ctx: Any) -> Any:
    return ctx.step("use", lambda: ctx.services.resolve("nobody"))


@workflow(id="ct.sleepy")
def sleepy(data: Any, ctx: Any) -> Any:
    ctx.step("before", rec(ctx).hit, "before")
    ctx.sleep("10m")
    ctx.step("after", rec(ctx).hit, "after")
    return "rested"


@workflow(id="ct.many_sleeps")
def many_sleeps(data: Any, ctx: Any) -> Any:
    for _ in range(data["n"]):
        ctx.sleep("1s")
    return data["n"]


@workflow(id="ct.many_steps")
def many_steps(data: Any, ctx: Any) -> Any:
    total = 0
    for i in range(data["n"]):
        total += ctx.step(f"s{i}", lambda i=i: i)
    return total


@workflow(id="ct.shipment")
def shipment(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_event("shipment.created", match={"orderId": data["id"]})


@workflow(id="ct.after_sleep_event")
def after_sleep_event(data: Any, ctx: Any) -> Any:
    ctx.sleep("10m")
    lookback = data.get("lookback")
    options: dict[str, Any] = {"lookback": lookback} if lookback else {}
    return ctx.wait_for_event("paid", timeout="1h", **options)


@workflow(id="ct.approval")
def approval(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_signal("approve")


@workflow(id="ct.event_timeout")
def event_timeout(data: Any, ctx: Any) -> Any:
    return {"got": ctx.wait_for_event("never", timeout="1h", on_timeout=data["on_timeout"])}


@workflow(id="ct.collect")
def collect(data: Any, ctx: Any) -> Any:
    return [ctx.wait_for_event("item") for _ in range(data["n"])]


@workflow(id="ct.token")
def token(data: Any, ctx: Any) -> Any:
    handle = ctx.wait_for_token(name="approval", heartbeat_timeout=data.get("heartbeat"))
    ctx.metadata.set("token", handle.token_id)
    try:
        return {"value": handle.wait()}
    except TokenFailedError as exc:
        return {"failed": exc.message}
    except HeartbeatTimeoutError:
        return {"heartbeat": "missed"}


@workflow(id="ct.flaky")
def flaky(data: Any, ctx: Any) -> Any:
    policy = RetryPolicy(max=3, backoff="fixed", initial="10s")
    return ctx.step("flaky", rec(ctx).flaky, "try", retry=policy)


@workflow(id="ct.saga")
def saga(data: Any, ctx: Any) -> Any:
    recorder = rec(ctx)
    for name in ("a", "b", "c"):
        ctx.step(name, lambda name=name: name, compensate=lambda out: recorder.hit(f"undo-{out}"))
    if data.get("wait"):
        ctx.wait_for_signal("go")
    if data.get("fail"):
        ctx.step("boom", _boom)
    return "done"


def _boom() -> None:
    raise FatalError("card declined")


@workflow(id="ct.child")
def child(data: Any, ctx: Any) -> Any:
    if data.get("wait"):
        ctx.wait_for_signal("go")
    ctx.sleep("1m")
    if data.get("fail"):
        ctx.step("boom", _boom)
    return {"child": data.get("n", 0)}


@workflow(id="ct.parent")
def parent(data: Any, ctx: Any) -> Any:
    try:
        return {"from_child": ctx.invoke(child, data)}
    except ChildRunError as exc:
        return {"child_error": exc.code}


@workflow(id="ct.metadata")
def metadata(data: Any, ctx: Any) -> Any:
    ctx.metadata.set("stage", "start")
    ctx.step("inside", lambda: ctx.metadata.increment("inside"))
    ctx.sleep("1s")
    ctx.metadata.append("log", "after-sleep")
    ctx.metadata.set("stage", "end")
    return "ok"


@workflow(id="ct.slow", timeout="1h")
def slow(data: Any, ctx: Any) -> Any:
    ctx.sleep("2h")
    return "too late"


@workflow(id="ct.crashy")
def crashy(data: Any, ctx: Any) -> Any:
    return ctx.step("risky", rec(ctx).maybe_crash)


@workflow(id="ct.raise_timeout")
def raise_timeout(data: Any, ctx: Any) -> Any:
    try:
        return ctx.wait_for_event("never", timeout="1h", on_timeout="raise")
    except WaitTimeoutError as exc:
        return {"caught": exc.code}


@workflow(id="ct.at_most_once")
def at_most_once(data: Any, ctx: Any) -> Any:
    return ctx.step("risky", rec(ctx).maybe_crash, semantics="at_most_once")


@workflow(id="ct.shipment_with_timeout")
def shipment_with_timeout(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_event("shipment.created", match={"orderId": data["id"]}, timeout="1h")


@workflow(id="ct.gated_collect")
def gated_collect(data: Any, ctx: Any) -> Any:
    """Runs one step that blocks until its gate opens, then collects ``n`` items."""
    gate = ctx.services.resolve("gate")
    ctx.step("gate", gate.wait_open)
    return [ctx.wait_for_event("item") for _ in range(data["n"])]


@workflow(id="ct.gated_sleep_then_item")
def gated_sleep_then_item(data: Any, ctx: Any) -> Any:
    """Runs one step that blocks until its gate opens, sleeps a minute, then waits for an
    ``item`` event (while it sleeps it waits on a timer only)."""
    gate = ctx.services.resolve("gate")
    ctx.step("gate", gate.wait_open)
    ctx.sleep("1m")
    return ctx.wait_for_event("item")


@workflow(id="ct.token_then_items")
def token_then_items(data: Any, ctx: Any) -> Any:
    """Waits for a token, then for ``n`` items, then for an ``end`` event."""
    handle = ctx.wait_for_token(name="approval")
    ctx.metadata.set("token", handle.token_id)
    value = handle.wait()
    items = [ctx.wait_for_event("item") for _ in range(data["n"])]
    ctx.metadata.set("items", items)
    ctx.wait_for_event("end")
    return {"token": value, "items": items}
