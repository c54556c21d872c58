"""Figure 10: fan-out, ``ctx.map`` with one step per item, on the AWS driver (moto).

An async body maps over ``ITEMS`` items, ``CONCURRENCY`` at a time, each item one step with
a realistic output (100-200 random bytes). Every DynamoDB write request is delayed by
``WRITE_LATENCY_MS`` (moto answers at once: without a delay no checkpoint write would ever
be in flight while another branch's entry is ready, and nothing could be grouped). The run
is measured with grouped checkpoints (the default) and with ``group_checkpoints=False`` (one
write per entry, as before grouping), by the same independent meter as figure 1, and priced
as figure 2 prices runs. The delay grouping adds to a branch is the wait for its entry to be
durable, grouped against one write per entry (p99 over every wait of the run).

How many entries share a write depends on timing (which branches are ready while a write is
in flight), so one grouped run's write units per item vary by a few percent from run to
run: the grouped map is run ``GROUPED_REPEATS`` times and the figure reports the run with
the median write units per item, with the lowest and highest.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from bench import fig_cost, workloads
from bench.fig_requests import PER_STEP, RunCost
from bench.moto_stack import MotoStack
from bench.table import Row, verdict
from relayflow.sdk import runner
from relayflow.sdk.checkpoints import Checkpointer, Owed

NAME = "fanout"
FIGURE = "10 fan-out"
ITEMS = 1_000
QUICK_ITEMS = 100
CONCURRENCY = 50
WRITE_LATENCY_MS = 5.0
#: Grouped, per item: write units and DynamoDB requests (every request of the run).
MAX_WU_PER_ITEM = 0.4
MAX_REQUESTS_PER_ITEM = 0.3
#: Grouped runs measured; the figure reports their median.
GROUPED_REPEATS = 5
#: What the peers bill per item of a map with one step each: Step Functions' Distributed
#: Map at least the item's own state (one transition); durable functions the item's child
#: context and its step (two operations).
STEP_FUNCTIONS_TRANSITIONS_PER_ITEM = 1
DURABLE_OPERATIONS_PER_ITEM = 2


@dataclass(frozen=True)
class FanoutRun:
    """One fan-out run: its metered cost and the waits of its branches for durability."""

    grouped: bool
    cost: RunCost
    waits_ms: list[float]

    @property
    def items(self) -> int:
        """Items mapped."""
        return self.cost.steps

    @property
    def write_units_per_item(self) -> float:
        """Table plus index write units per item."""
        return self.cost.tally.write_units / self.items

    @property
    def requests_per_item(self) -> float:
        """DynamoDB requests (reads and writes) per item."""
        return self.cost.dynamodb_requests / self.items

    def wait_ms(self, quantile: float) -> float:
        """The ``quantile`` of the waits for durability (0 when nothing waited)."""
        if not self.waits_ms:
            return 0.0
        ordered = sorted(self.waits_ms)
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]


@contextlib.contextmanager
def timed_waits(*, grouped: bool) -> Iterator[list[float]]:
    """Record how long branches are held for their entries to be durable (ms).

    Grouped, a branch is held from the moment the runner finds it owes an entry until the
    wait returns (the hand-off to a worker thread included); with one write per entry, for
    the write itself (in the body's own thread).
    """
    waits: list[float] = []
    lock = threading.Lock()

    def timed(wait: Callable[[int], None], started: float) -> Callable[[int], None]:
        def run(ticket: int) -> None:
            try:
                wait(ticket)
            finally:
                with lock:
                    waits.append((time.perf_counter() - started) * 1000)

        return run

    if grouped:
        original_take = runner.take_owed

        def take_owed() -> Owed | None:
            owed = original_take()
            if owed is None:
                return None
            return replace(owed, settle=timed(owed.settle, time.perf_counter()))

        runner.take_owed = take_owed  # type: ignore[assignment]
        try:
            yield waits
        finally:
            runner.take_owed = original_take  # type: ignore[assignment]
        return
    original_wait = Checkpointer.wait

    def wait(self: Checkpointer, ticket: int) -> None:
        timed(lambda t: original_wait(self, t), time.perf_counter())(ticket)

    Checkpointer.wait = wait  # type: ignore[method-assign]
    try:
        yield waits
    finally:
        Checkpointer.wait = original_wait  # type: ignore[method-assign]


def measure_run(items: int, *, grouped: bool) -> FanoutRun:
    """Map over ``items`` items on a fresh metered driver with the write latency."""
    label = f"ctx.map over {items:,} items, max_concurrency {CONCURRENCY}, " + (
        "grouped" if grouped else "one write per entry"
    )
    with (
        MotoStack(write_latency_ms=WRITE_LATENCY_MS, group_checkpoints=grouped) as st,
        timed_waits(grouped=grouped) as waits,
    ):
        start, cpu = time.perf_counter(), time.process_time()
        detail = st.run(workloads.FANOUT, {"items": items, "concurrency": CONCURRENCY})
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        tally, lambdas = st.take()
        if st.delayed_writes < tally.dynamodb_writes:
            raise RuntimeError(f"{label}: the write latency missed some DynamoDB writes")
    if detail.status != "completed" or detail.output != items:
        raise RuntimeError(f"{label}: ended {detail.status} with {detail.output!r}")
    cost = RunCost(label, PER_STEP, items, 0, detail.status, tally, lambdas, seconds, cpu_seconds)
    return FanoutRun(grouped, cost, list(waits))


@dataclass(frozen=True)
class Fanout:
    """The grouped run with the median write units per item, every grouped run's write
    units per item (lowest first), and the run with one write per entry."""

    grouped: FanoutRun
    grouped_write_units: list[float]
    single: FanoutRun


def measure(items: int = ITEMS, repeats: int = GROUPED_REPEATS) -> Fanout:
    """``repeats`` grouped runs and one with one write per entry."""
    grouped = sorted(
        (measure_run(items, grouped=True) for _ in range(repeats)),
        key=lambda run: run.write_units_per_item,
    )
    return Fanout(
        grouped=grouped[len(grouped) // 2],
        grouped_write_units=[run.write_units_per_item for run in grouped],
        single=measure_run(items, grouped=False),
    )


def fanout_cost(run: FanoutRun) -> fig_cost.Cost:
    """Dollars per million items, the peers billed per item of their own map."""
    cost = fig_cost.cost_of(run.cost)
    scale = 1e6 / run.items
    return replace(
        cost,
        step_functions=run.items
        * STEP_FUNCTIONS_TRANSITIONS_PER_ITEM
        * fig_cost.STEP_FUNCTIONS_TRANSITION
        * scale,
        durable=run.items * DURABLE_OPERATIONS_PER_ITEM * fig_cost.DURABLE_OPERATION * scale,
    )


def rows(fanout: Fanout) -> list[Row]:
    """The figure's rows: per item cost of the median grouped run and of the run with one
    write per entry, the targets, waits and prices."""
    grouped, single = fanout.grouped, fanout.single
    runs = (grouped, single)
    lowest, highest = fanout.grouped_write_units[0], fanout.grouped_write_units[-1]
    spread = (
        f" (median of {len(fanout.grouped_write_units)} runs: {lowest:.3f} to {highest:.3f})"
        if len(fanout.grouped_write_units) > 1
        else ""
    )
    out: list[Row] = []
    for run in runs:
        t = run.cost.tally
        out.append(
            Row(
                FIGURE,
                run.cost.label + (spread and ", the median run" if run is grouped else ""),
                f"{run.write_units_per_item:.3f} WU/item (table "
                f"{t.table_write_units / run.items:.3f} + index "
                f"{t.index_write_units / run.items:.3f}), "
                f"{run.requests_per_item:.3f} DynamoDB requests/item "
                f"(writes {t.dynamodb_writes}, reads {t.dynamodb_reads}), "
                f"{run.cost.seconds:.1f} s",
            )
        )
    out.append(
        Row(
            FIGURE,
            f"grouped, write units per item ({WRITE_LATENCY_MS:g} ms per DynamoDB write)",
            f"{grouped.write_units_per_item:.3f}{spread}",
            f"<= {MAX_WU_PER_ITEM}",
            verdict(grouped.write_units_per_item <= MAX_WU_PER_ITEM),
        )
    )
    out.append(
        Row(
            FIGURE,
            f"grouped, DynamoDB requests per item ({WRITE_LATENCY_MS:g} ms per DynamoDB write)",
            f"{grouped.requests_per_item:.3f}",
            f"<= {MAX_REQUESTS_PER_ITEM}",
            verdict(grouped.requests_per_item <= MAX_REQUESTS_PER_ITEM),
        )
    )
    out.append(
        Row(
            FIGURE,
            "a branch's wait for its entry to be durable, p50 / p99",
            f"grouped {grouped.wait_ms(0.5):.1f} / {grouped.wait_ms(0.99):.1f} ms "
            f"({len(grouped.waits_ms)} waits); one write per entry "
            f"{single.wait_ms(0.5):.1f} / {single.wait_ms(0.99):.1f} ms "
            f"({len(single.waits_ms)} waits); p99 delay grouping adds "
            f"{grouped.wait_ms(0.99) - single.wait_ms(0.99):+.1f} ms",
        )
    )
    for run in runs:
        cost = fanout_cost(run)
        parts = ", ".join(f"{k} {v:.2f}" for k, v in cost.breakdown.items() if v >= 0.005)
        out.append(
            Row(
                fig_cost.FIGURE,
                f"$ per 1M map items, {run.cost.label}",
                f"relayflow {cost.relayflow:.2f} ({parts}); Step Functions Distributed Map "
                f"{cost.step_functions:.2f} ({cost.vs_step_functions:.1f}x); durable "
                f"functions {cost.durable:.2f} ({cost.vs_durable:.1f}x)",
            )
        )
    return out
