"""Figure 6: bounded time and retry-safe deliveries, on the wall clock.

- ``POST /api/runs`` of a workflow with one long step and the acknowledgement latency of 50
  concurrent deliveries into one run (each consumed once), measured twice: on the local stack
  over real HTTP (``relayflow dev``: waitress, moto's server, the drive and worker functions,
  as a production user runs it) and in process (the api as deployed over an in-memory driver,
  the drive function played by a thread pool);
- the cost of the 1,001st delivery id against the first (DynamoDB requests and bytes, moto);
- the sweeper's time to recover a run whose alarm was lost among 1,000 runs in flight.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.dev_stack import DevStack
from bench.table import Row, verdict
from bench.time_workflows import collect, long_step
from relayflow.adapters.memory import InMemoryAlarmClock, InMemoryRunStore
from relayflow.adapters.memory.manifests import InMemoryManifestStore
from relayflow.adapters.memory.pending import InMemoryPendingDeliveries
from relayflow.api.app import create_app
from relayflow.api.auth import AllowAllAuth
from relayflow.api.metrics import RecordingMetrics
from relayflow.clock import SystemClock
from relayflow.core.record import Lease, RunRecord
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.drivers import WorkflowDriver
from relayflow.engine import Engine
from relayflow.ports import DispatcherResolver

NAME = "time"
FIGURE = "6 time"
LONG_STEP_S = 15.0
INLINE_BUDGET_MS = 10_000
DELIVERIES = 50
IN_FLIGHT = 1_000
#: The local stack's inline budget (its default).
LOCAL_BUDGET_MS = 10_000
_RESOLVE = threading.Lock()

Post = Callable[[str, Any], tuple[int, Any]]
GetRun = Callable[[str], Any]


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
            pending=InMemoryPendingDeliveries(),
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
class Acks:
    """Acknowledgement latencies (sorted, seconds) and what the run consumed."""

    latencies: list[float]
    consumed: int
    distinct: int


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
    #: On the local stack (None when not measured): trigger (s, status) at its budget, acks.
    local_trigger: tuple[float, str] | None = None
    local_acks: Acks | None = None


def _trigger_latency(post: Post, step_s: float) -> tuple[float, str]:
    start = time.perf_counter()
    _, run = post("/api/runs", {"workflowId": long_step.id, "input": {"seconds": step_s}})
    return time.perf_counter() - start, str(run["status"])


def _ack_latencies(
    post: Post, get_run: GetRun, n: int, *, warm: Callable[[], None] = lambda: None
) -> Acks:
    """Send ``n`` distinct events at once into one waiting run; wait for it to consume them."""
    _, run = post("/api/runs", {"workflowId": collect.id, "input": {"n": n}})
    barrier = threading.Barrier(n)
    latencies: list[float] = []
    statuses: list[int] = []
    lock = threading.Lock()

    def deliver(index: int) -> None:
        warm()
        barrier.wait()
        start = time.perf_counter()
        status, _ = post(
            f"/api/runs/{run['id']}/events",
            {"eventType": "item", "payload": index, "eventId": f"e{index}"},
        )
        with lock:
            latencies.append(time.perf_counter() - start)
            statuses.append(status)

    threads = [threading.Thread(target=deliver, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if any(status != 200 for status in statuses):
        raise RuntimeError(f"deliveries answered {sorted(set(statuses))}")
    deadline = time.monotonic() + 120
    output: Any = None
    while time.monotonic() < deadline:
        found = get_run(run["id"])
        if found.get("status") == "completed":
            output = found.get("output")
            break
        # The run is driven elsewhere; poll it as a client would.
        time.sleep(0.1)
    values = list(output or [])
    return Acks(sorted(latencies), len(values), len(set(values)))


def measure_trigger(step_s: float, budget_ms: int) -> tuple[float, str]:
    """In process: ``POST /api/runs`` of one ``step_s`` step with ``budget_ms``."""
    stack = _Stack(budget_ms)
    try:
        return _trigger_latency(stack.post, step_s)
    finally:
        stack.close()


def measure_acks(n: int, budget_ms: int) -> tuple[list[float], int, int]:
    """In process: ``n`` concurrent deliveries into one run."""
    stack = _Stack(budget_ms)

    def get_run(run_id: str) -> Any:
        found = stack.driver.admin.get_run(run_id)
        return {} if found is None else {"status": found.status, "output": found.output}

    try:
        # A warm container per request, built before the clock starts.
        acks = _ack_latencies(stack.post, get_run, n, warm=stack.warm_api)
        return acks.latencies, acks.consumed, acks.distinct
    finally:
        stack.close()


def measure_local(step_s: float, n: int) -> tuple[tuple[float, str], Acks]:
    """On ``relayflow dev`` over HTTP: the trigger of one ``step_s`` step, then ``n``
    concurrent deliveries into one waiting run."""
    with DevStack() as dev:

        def get_run(run_id: str) -> Any:
            return dev.request("GET", f"/api/runs/{run_id}")[1]

        trigger = _trigger_latency(dev.request_post, step_s)
        return trigger, _ack_latencies(dev.request_post, get_run, n)


def measure_delivery_cost() -> tuple[tuple[int, int], tuple[int, int]]:
    """(DynamoDB requests, write units) of claiming and answering delivery id 1 and id 1,001
    of one run (moto)."""
    from bench.moto_stack import MotoStack

    with MotoStack() as stack:
        deliveries = stack.driver.deliveries
        costs: list[tuple[int, int]] = []
        for n in range(1_001):
            stack.take()
            deliveries.begin("run:bench", f"EVENT:e{n}", "fp", share_unanswered=True, lifelong=True)
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
    # The local stack runs at its default budget: the step outlasts it even when quick.
    local_trigger, local_acks = measure_local(LONG_STEP_S, DELIVERIES)
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
        local_trigger=local_trigger,
        local_acks=local_acks,
    )


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def trigger_row(where: str, step_s: float, budget_ms: int, trigger: tuple[float, str]) -> Row:
    budget_s = budget_ms / 1000
    seconds, status = trigger
    return Row(
        FIGURE,
        f"{where}: POST /api/runs, one {step_s:.0f} s step (budget {budget_s:.0f} s)",
        f"{seconds:.2f} s, run {status}",
        f"<= {budget_s + 1:.0f} s, running",
        verdict(seconds <= budget_s + 1 and status == "running"),
    )


def acks_row(where: str, acks: Acks) -> Row:
    latencies = acks.latencies
    p50, p90 = _quantile(latencies, 0.5), _quantile(latencies, 0.9)
    worst = max(latencies) if latencies else float("nan")
    return Row(
        FIGURE,
        f"{where}: {DELIVERIES} concurrent deliveries into one run: ack p50 / p90 / max",
        f"{p50:.3f} / {p90:.3f} / {worst:.3f} s; consumed {acks.distinct} "
        f"of {DELIVERIES} once each",
        f"p90 <= 1 s, max <= {INLINE_BUDGET_MS // 1000} s, each once",
        verdict(
            p90 <= 1.0
            and worst <= INLINE_BUDGET_MS / 1000
            and acks.consumed == acks.distinct == DELIVERIES
        ),
    )


def rows(result: TimeResult) -> list[Row]:
    local: list[Row] = []
    if result.local_trigger is not None:
        local.append(trigger_row("local stack", LONG_STEP_S, LOCAL_BUDGET_MS, result.local_trigger))
    if result.local_acks is not None:
        local.append(acks_row("local stack", result.local_acks))
    in_process = Acks(result.acks, result.consumed, result.distinct)
    return [
        *local,
        trigger_row(
            "in process",
            result.step_s,
            result.budget_ms,
            (result.trigger_s, result.trigger_status),
        ),
        acks_row("in process", in_process),
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
