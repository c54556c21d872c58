"""Workflows of the reliability tests, whose steps record every execution in a side channel
(the ledger) so that re-executions after crashes and races can be counted."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from fault_injection import ProcessKilled

from relayflow import FatalError, RetryPolicy, WorkflowContext, current_step, workflow
from relayflow.clock import VirtualClock
from relayflow.core.settings import CoreSettings


class EffectLedger:
    """Counts executions per (run:step, attempt): the effects a real step would have."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, int]] = Counter()
        self._running: set[str] = set()
        self.overlaps: list[str] = []

    def reset(self) -> None:
        """Forget everything (start of a scenario)."""
        with self._lock:
            self._counts.clear()
            self._running.clear()
            self.overlaps.clear()

    def record(self, name: str) -> None:
        """Count one execution of the current step attempt (``name`` outside steps)."""
        step = current_step()
        key = (step.idempotency_key, step.attempt) if step is not None else (name, 0)
        with self._lock:
            self._counts[key] += 1

    def enter(self, key: str) -> None:
        """Mark ``key`` as executing; a second concurrent execution is recorded as overlap."""
        with self._lock:
            if key in self._running:
                self.overlaps.append(key)
            self._running.add(key)

    def leave(self, key: str) -> None:
        """Mark ``key`` as no longer executing."""
        with self._lock:
            self._running.discard(key)

    def counts(self) -> dict[tuple[str, int], int]:
        """Executions per (step idempotency key, attempt)."""
        with self._lock:
            return dict(self._counts)

    def by_step(self) -> dict[str, int]:
        """Executions per step (all attempts together)."""
        out: Counter[str] = Counter()
        for (key, _), count in self.counts().items():
            out[key] += count
        return dict(out)


LEDGER = EffectLedger()


def runs_beyond(counts: dict[tuple[str, int], int], allowed: Callable[[str], int]) -> list[str]:
    """Step attempts (of ``counts``) that ran more often than ``allowed(step)`` times."""
    problems = []
    for (step, attempt), count in sorted(counts.items()):
        limit = allowed(step)
        if count > limit:
            problems.append(f"{step} attempt {attempt} ran {count} times (allowed {limit})")
    return problems


class StepWork:
    """Moves the deployment's virtual clock while a step works, as a slow step would (set by
    the deployment that runs the step; without one, a step takes no time)."""

    def __init__(self) -> None:
        self.clock: VirtualClock | None = None

    def spend(self, ms: int, *, slice_ms: int = 5_000) -> None:
        """Work ``ms`` of virtual time, in slices (whatever watches the clock sees it move)."""
        if self.clock is None:
            return
        for _ in range(ms // slice_ms):
            self.clock.advance(slice_ms)


STEP_WORK = StepWork()
#: The reserve step works past a third of the lease, so its driver renews the run's lease
#: once: the crash sweep kills the process at that renewal too.
RESERVE_WORK_MS = CoreSettings().lease_ms // 3 + 5_000

#: The at-most-once charge may need a second attempt after an interrupted one.
CHARGE_RETRY = RetryPolicy(max=3, backoff="fixed", initial="2s")


def reserve(order: dict[str, Any]) -> dict[str, Any]:
    """Reserve the items (at least once), working long enough to renew the lease once."""
    LEDGER.record("reserve")
    STEP_WORK.spend(RESERVE_WORK_MS)
    return {"reservation": f"res-{order['id']}"}


def release(reservation: dict[str, Any]) -> dict[str, Any]:
    """Compensation of :func:`reserve`."""
    LEDGER.record("release")
    return {"released": reservation["reservation"]}


def charge(order: dict[str, Any]) -> dict[str, Any]:
    """Charge the card (at most once per attempt)."""
    LEDGER.record("charge")
    return {"charge": f"ch-{order['id']}", "amount": order["total"]}


def refund(charged: dict[str, Any]) -> dict[str, Any]:
    """Compensation of :func:`charge`."""
    LEDGER.record("refund")
    return {"refunded": charged["charge"]}


def render(request: dict[str, Any]) -> dict[str, Any]:
    """The child's only step."""
    LEDGER.record("render")
    return {"label": f"lbl-{request['orderId']}", "carrier": request["carrier"]}


def audit(order: dict[str, Any]) -> str:
    """The last step: refuses orders marked ``fail`` (the saga then compensates)."""
    LEDGER.record("audit")
    if order.get("fail"):
        raise FatalError(f"order {order['id']} failed its audit", code="AUDIT_FAILED")
    return "passed"


@workflow(id="reliability.label")
async def label_workflow(request: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Child run: one step."""
    result: dict[str, Any] = await ctx.step("render", render, request)
    return result


@workflow(id="reliability.saga")
async def saga_workflow(order: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Steps (one at-most-once), a sleep, an event wait, a child run and compensations."""
    reservation = await ctx.step("reserve", reserve, order, compensate=release)
    charged = await ctx.step(
        "charge",
        charge,
        order,
        semantics="at_most_once",
        retry=CHARGE_RETRY,
        compensate=refund,
    )
    await ctx.sleep("30s")
    shipment = await ctx.wait_for_event(
        "shipped", match={"orderId": order["id"]}, timeout="30d", on_timeout="raise"
    )
    label = await ctx.invoke(
        label_workflow, {"orderId": order["id"], "carrier": shipment["carrier"]}
    )
    verdict = await ctx.step("audit", audit, order)
    return {
        "reservation": reservation["reservation"],
        "charge": charged,
        "shipment": shipment,
        "label": label,
        "audit": verdict,
    }


def guarded(key: str, value: Any) -> Any:
    """A step that records overlapping executions of ``key`` (races)."""
    LEDGER.enter(key)
    try:
        LEDGER.record(key)
        return value
    finally:
        LEDGER.leave(key)


@workflow(id="reliability.collector")
async def collector_workflow(data: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Consumes ``data["count"]`` events one wait at a time, a step after each."""
    seen: list[Any] = []
    for index in range(int(data["count"])):
        event = await ctx.wait_for_event("item", timeout="30d", on_timeout="raise")
        seen.append(await ctx.step(f"take-{index}", guarded, f"take-{index}", event["n"]))
    return {"items": sorted(seen)}


@workflow(id="reliability.once")
async def once_workflow(data: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """One step; used to check that concurrent triggers start a single run."""
    value = await ctx.step("body", guarded, "body", data.get("value"))
    return {"value": value}


@workflow(id="reliability.finisher")
async def finisher_workflow(data: dict[str, Any], ctx: WorkflowContext) -> str:
    """Waits for a signal, then one final step (a cancel races it)."""
    await ctx.wait_for_signal("go", timeout="30d")
    result: str = await ctx.step("final", guarded, "final", "done")
    return result


@workflow(id="reliability.sleeper")
async def sleeper_workflow(data: dict[str, Any], ctx: WorkflowContext) -> str:
    """A step, a sleep, a step (alarms arrive duplicated, early and late)."""
    await ctx.step("before", guarded, "before", 1)
    await ctx.sleep("1m")
    result: str = await ctx.step("after", guarded, "after", "woke")
    return result


ALL_WORKFLOWS = [
    label_workflow,
    saga_workflow,
    collector_workflow,
    once_workflow,
    finisher_workflow,
    sleeper_workflow,
]


#: A step output over the checkpoint log's inline limit (32 KB): its entry goes to S3.
LARGE_OUTPUT_BYTES = 40_000


def large(label: str) -> str:
    """A step whose output is kept in the payload store."""
    LEDGER.record(label)
    return label * (LARGE_OUTPUT_BYTES // len(label))


def branch(ctx: WorkflowContext, item: int, index: int) -> Any:
    """One branch of the map: a step of its own."""
    return ctx.step(f"square-{item}", guarded, f"square-{item}", item * item)


@workflow(id="reliability.per_step")
async def per_step_workflow(data: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Per-step checkpoints through every backing service: sequential steps (one output in
    S3), a near sleep (an SQS alarm where the deployment has a queue), a map of three
    branches, a far sleep (a Scheduler alarm) and a last step."""
    first = await ctx.step("first", guarded, "first", 1)
    payload = await ctx.step("large", large, "xyz")
    await ctx.sleep("30s")
    squares = await ctx.map([2, 3, 4], branch)
    await ctx.sleep("1h")
    last = await ctx.step("last", guarded, "last", "done")
    return {"first": first, "large": len(payload), "squares": squares.results, "last": last}


ALL_WORKFLOWS.append(per_step_workflow)


class Halt:
    """A simulated crash kills one thread; the process's other threads (steps that had not
    started yet) must run nothing after it either. ``halt`` (at the crash) and ``record``
    (at a step's start) exclude each other, so a step either ran before the crash or not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._halted = False

    def halt(self, then: Callable[[], None]) -> None:
        """Stop the process's steps from starting, then call ``then`` (the crash's record)."""
        with self._lock:
            self._halted = True
            then()

    def resume(self) -> None:
        """A new process starts: its steps run."""
        with self._lock:
            self._halted = False

    def record(self, key: str) -> None:
        """Count one execution of the current step, unless its process died."""
        with self._lock:
            if self._halted:
                raise ProcessKilled(f"step {key} started in a process that died")
            LEDGER.record(key)


HALT = Halt()


def halting(key: str, value: Any) -> Any:
    """A step that runs nothing once its process crashed (see :class:`Halt`)."""
    HALT.record(key)
    return value


def fanout_item(ctx: WorkflowContext, item: int, index: int) -> Any:
    """One item of the fan-out: a step of its own."""
    return ctx.step(f"item-{item}", halting, f"item-{item}", item)


@workflow(id="reliability.fanout")
async def fanout_workflow(data: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """A map whose branches finish while each other's checkpoints are in flight (their
    entries share writes): ``data["items"]`` items, ``data["concurrency"]`` at a time."""
    done = await ctx.map(
        list(range(data["items"])), fanout_item, max_concurrency=data["concurrency"]
    )
    return {"items": done.results}


ALL_WORKFLOWS.append(fanout_workflow)
