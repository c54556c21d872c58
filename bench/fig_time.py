"""Figure 6: bounded time and retry-safe deliveries, on the wall clock.

- ``POST /api/runs`` of a workflow with one long step, through the api as deployed (it hands
  the drive to the drive function, here a thread pool, and waits up to the inline budget);
- acknowledgement latency of 50 concurrent deliveries into one run, each consumed once;
- the cost of the 1,001st delivery id against the first (DynamoDB requests and bytes, moto);
- the sweeper's time to recover a run whose alarm was lost among 1,000 runs in flight.
"""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.table import Row, verdict
from relayflow.adapters.memory import InMemoryAlarmClock, InMemoryRunStore, SystemClock
from relayflow.adapters.memory.manifests import InMemoryManifestStore
from relayflow.api.app import create_app
from relayflow.api.auth import AllowAllAuth
from relayflow.api.metrics import RecordingMetrics
from relayflow.core.record import Lease, RunRecord
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.drivers import WorkflowDriver
from relayflow.engine import Engine
from relayflow.ports import DispatcherResolver
from relayflow.sdk.registry import workflow

NAME = "time"
FIGURE = "6 time"
LONG_STEP_S = 15.0
INLINE_BUDGET_MS = 10_000
DELIVERIES = 50
IN_FLIGHT = 1_000
_RESOLVE = threading.Lock()


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


class _Context:
    """A Lambda context with the api function's 29 s."""

    function_name = "relayflow-api"
    aws_request_id = "bench"

    def __init__(self) -> None:
        self._end = time.monotonic() + 29.0

    def get_remaining_time_in_millis(self) -> int:
        return int((self._end - time.monotonic()) * 1000)


class _Stack:
    """The api as deployed over an in-memory driver; hand-offs run on a thread pool."""

    def __init__(self, budget_ms: int) -> None:
        clock = SystemClock()
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.engine = Engine(
            runs=InMemoryRunStore(),
            alarms=InMemoryAlarmClock(),
            dispatchers=DispatcherResolver(default=InlineDispatcher(clock=clock)),
            clock=clock,
            handoff=lambda run_id, at: self.pool.submit(self._drive, run_id, at),
        )
        self.driver = WorkflowDriver(engine=self.engine, manifests=InMemoryManifestStore())
        self._budget_ms = budget_ms
        # One api per thread, as each Lambda container serves one request at a time.
        self._apps = threading.local()

    def warm_api(self) -> None:
        """Build this thread's api now."""
        self._app()

    def _app(self) -> Any:
        app = getattr(self._apps, "app", None)
        if app is None:
            app = create_app(
                self.driver,
                self.driver.admin,
                auth=AllowAllAuth(),
                metrics=RecordingMetrics(),
                hand_off=True,
                inline_budget_ms=self._budget_ms,
            )
            self._apps.app = app
        return app

    def _drive(self, run_id: str, at: int) -> None:
        self.engine.drive_from_event({"runId": run_id, "wakeAt": at})

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        import json

        event = {
            "version": "2.0",
            "rawPath": path,
            "headers": {"content-type": "application/json"},
            "requestContext": {"http": {"method": "POST", "path": path}, "requestId": "b"},
            "body": json.dumps(body),
            "isBase64Encoded": False,
        }
        # Powertools' resolvers share state between concurrent resolves, so requests are
        # answered one at a time here (a Lambda container serves one request at a time).
        with _RESOLVE:
            answer = self._app().resolve(event, _Context())
        return int(answer["statusCode"]), json.loads(answer["body"])

    def close(self) -> None:
        self.pool.shutdown(wait=True)


@dataclass(frozen=True)
class TimeResult:
    step_s: float
    budget_ms: int
    trigger_s: float
    trigger_status: str
    acks: list[float]
    consumed: int
    distinct: int
    first_delivery: tuple[int, int]
    later_delivery: tuple[int, int]
    sweep_s: float
    swept_lost: bool


def measure_trigger(step_s: float, budget_ms: int) -> tuple[float, str]:
    stack = _Stack(budget_ms)
    try:
        start = time.perf_counter()
        _, run = stack.post("/api/runs", {"workflowId": long_step.id, "input": {"seconds": step_s}})
        return time.perf_counter() - start, str(run["status"])
    finally:
        stack.close()


def measure_acks(n: int, budget_ms: int) -> tuple[list[float], int, int]:
    stack = _Stack(budget_ms)
    try:
        _, run = stack.post("/api/runs", {"workflowId": collect.id, "input": {"n": n}})
        barrier = threading.Barrier(n)
        latencies: list[float] = []
        lock = threading.Lock()

        def deliver(index: int) -> None:
            stack.warm_api()  # a warm container per request, built before the clock starts
            barrier.wait()
            start = time.perf_counter()
            status, _ = stack.post(
                f"/api/runs/{run['id']}/events",
                {"eventType": "item", "payload": index, "eventId": f"e{index}"},
            )
            assert status == 200, status
            with lock:
                latencies.append(time.perf_counter() - start)

        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(n)]

        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        deadline = time.monotonic() + 60
        output: Any = None
        while time.monotonic() < deadline:
            found = stack.driver.admin.get_run(run["id"])
            if found is not None and found.status == "completed":
                output = found.output
                break
            # The run is driven on the pool; poll it as a client would.
            time.sleep(0.05)
        values = list(output or [])
        return sorted(latencies), len(values), len(set(values))
    finally:
        stack.close()


def measure_delivery_cost() -> tuple[tuple[int, int], tuple[int, int]]:
    """(DynamoDB requests, write units) of claiming and answering delivery id 1 and id 1,001
    of one run (moto)."""
    from bench.moto_stack import MotoStack

    with MotoStack() as stack:
        deliveries = stack.driver.deliveries
        costs: list[tuple[int, int]] = []
        for n in range(1_001):
            stack.take()
            deliveries.begin("run:bench", f"EVENT:e{n}", "fp", share_unanswered=True)
            deliveries.finish("run:bench", f"EVENT:e{n}", "fp", {"status": "buffered"})
            tally, _ = stack.take()
            if n in (0, 1_000):
                costs.append((tally.dynamodb_writes + tally.dynamodb_reads, tally.write_units))
    return costs[0], costs[1]


def measure_sweep(in_flight: int) -> tuple[float, bool]:
    clock = SystemClock()
    runs = InMemoryRunStore()
    engine = Engine(
        runs=runs,
        alarms=InMemoryAlarmClock(),
        dispatchers=DispatcherResolver(default=InlineDispatcher(clock=clock)),
        clock=clock,
    )
    now = clock.now_ms()
    for n in range(in_flight):
        lease_end = now + 60_000
        runs.try_insert(
            RunRecord(
                id=f"busy-{n:04d}",
                workflow_id=collect.id,
                status="running",
                started_at=now - 1,
                wake_at=lease_end,
                lease=Lease(owner="elsewhere", expires_at=lease_end),
            )
        )
    runs.try_insert(
        RunRecord(
            id="lost",
            workflow_id=collect.id,
            status="running",
            input={"n": 1},
            started_at=now - 120_000,
            wake_at=now - 60_000,
        )
    )
    start = time.perf_counter()
    swept = engine.sweep()
    return time.perf_counter() - start, "lost" in swept


def measure(*, quick: bool) -> TimeResult:
    step_s, budget_ms = (3.0, 1_000) if quick else (LONG_STEP_S, INLINE_BUDGET_MS)
    trigger_s, trigger_status = measure_trigger(step_s, budget_ms)
    acks, consumed, distinct = measure_acks(DELIVERIES, INLINE_BUDGET_MS)
    first, later = measure_delivery_cost()
    sweep_s, swept_lost = measure_sweep(IN_FLIGHT)
    return TimeResult(
        step_s=step_s,
        budget_ms=budget_ms,
        trigger_s=trigger_s,
        trigger_status=trigger_status,
        acks=acks,
        consumed=consumed,
        distinct=distinct,
        first_delivery=first,
        later_delivery=later,
        sweep_s=sweep_s,
        swept_lost=swept_lost,
    )


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def rows(result: TimeResult) -> list[Row]:
    budget_s = result.budget_ms / 1000
    acks = result.acks
    p50, p90 = _quantile(acks, 0.5), _quantile(acks, 0.9)
    worst = max(acks) if acks else float("nan")
    return [
        Row(
            FIGURE,
            f"POST /api/runs, one {result.step_s:.0f} s step (budget {budget_s:.0f} s)",
            f"{result.trigger_s:.2f} s, run {result.trigger_status}",
            f"<= {budget_s + 1:.0f} s",
            verdict(result.trigger_s <= budget_s + 1),
        ),
        Row(
            FIGURE,
            f"{DELIVERIES} concurrent deliveries into one run: ack p50 / p90 / max",
            f"{p50:.3f} / {p90:.3f} / {worst:.3f} s; consumed {result.distinct} "
            f"of {DELIVERIES} once each",
            f"p90 <= 1 s, max <= {INLINE_BUDGET_MS // 1000} s, each once",
            verdict(
                p90 <= 1.0
                and worst <= INLINE_BUDGET_MS / 1000
                and result.consumed == result.distinct == DELIVERIES
            ),
        ),
        Row(
            FIGURE,
            "delivery id 1,001 vs 1 of one run (DynamoDB requests, write units)",
            f"{result.later_delivery[0]} req, {result.later_delivery[1]} WU vs "
            f"{result.first_delivery[0]} req, {result.first_delivery[1]} WU",
            "the same",
            verdict(result.later_delivery == result.first_delivery),
        ),
        Row(
            FIGURE,
            f"sweeper finds a lost alarm among {IN_FLIGHT:,} runs in flight",
            f"{'found' if result.swept_lost else 'MISSED'} in {result.sweep_s * 1000:.0f} ms",
            "found in one sweep, < 1 s",
            verdict(result.swept_lost and result.sweep_s < 1.0),
        ),
    ]
