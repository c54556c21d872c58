"""Figure 1: AWS requests and DynamoDB write units per step on the AWS driver (moto).

Runs sequential workflows of growing length and a workflow whose steps are separated by
sleeps (alarms fired through the engine's drive entry on a virtual clock), and reports what
each costs per step: DynamoDB write and read requests, write units (table and index), read
units, Scheduler calls and Lambda invocations.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from bench import workloads
from bench.aws_meter import Tally
from bench.moto_stack import LambdaCounts, MotoStack
from bench.table import Row, verdict

NAME = "requests"
FIGURE = "1 AWS requests"
SIZES = (10, 100, 1_000, 10_000)
QUICK_SIZES = (10, 100, 1_000)
SLEEPY_STEPS = 100
#: Write units per step allowed for small outputs.
MAX_WRITE_UNITS_PER_STEP = 2.0
#: How much the marginal write units per step may move between two run lengths: 10%, or
#: 0.1 WU when the margins are that small (a ratio of near-zero numbers means nothing).
CONSTANT_TOLERANCE = 0.10
CONSTANT_FLOOR_WU = 0.10


@dataclass(frozen=True)
class RunCost:
    """What one run cost on the AWS driver."""

    label: str
    steps: int
    sleeps: int
    status: str
    tally: Tally
    lambdas: LambdaCounts
    seconds: float
    error: str = ""

    def per_step(self, value: float) -> float:
        """``value`` divided by the run's steps."""
        return value / self.steps

    @property
    def write_units_per_step(self) -> float:
        """Table plus index write units per step."""
        return self.per_step(self.tally.write_units)

    @property
    def scheduler_calls(self) -> int:
        """Requests to EventBridge Scheduler (create, update, delete, get)."""
        return self.tally.count("scheduler.*")

    def units_breakdown(self) -> str:
        """Table write units per step by DynamoDB operation."""
        return ", ".join(
            f"{op} {self.per_step(units):.2f}"
            for op, units in self.tally.units_by_operation.most_common()
        )

    def summary(self) -> str:
        """The per-step figures in one cell."""
        t = self.tally
        return (
            f"writes {self.per_step(t.dynamodb_writes):.2f}/step, "
            f"reads {self.per_step(t.dynamodb_reads):.2f}/step, "
            f"WU {self.write_units_per_step:.2f}/step "
            f"(table {self.per_step(t.table_write_units):.2f} + "
            f"index {self.per_step(t.index_write_units):.2f}), "
            f"RU {self.per_step(t.read_units):.2f}/step, "
            f"Scheduler {self.scheduler_calls} calls, "
            f"Lambda {self.lambdas.total(separate_step_host=False)} invocations/run "
            f"({self.lambdas.total(separate_step_host=True)} with a separate step host)"
        )


def measure_run(
    label: str,
    workflow_id: str,
    steps: int,
    *,
    checkpoint_interval_ms: int | None = None,
    cold_drives: bool = False,
) -> RunCost:
    """Run one workflow on a fresh metered AWS driver and return what it cost."""
    with MotoStack(checkpoint_interval_ms=checkpoint_interval_ms, cold_drives=cold_drives) as st:
        start = time.perf_counter()
        error = ""
        try:
            status = st.run(workflow_id, {"steps": steps}).status
        except Exception as exc:
            # A limit the driver cannot handle is a figure too: report it, keep going.
            status, error = "error", _short(f"{type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - start
        tally, lambdas = st.take()
    sleeps = steps - 1 if workflow_id == workloads.SLEEPY else 0
    return RunCost(label, steps, sleeps, status, tally, lambdas, seconds, error)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RequestsResult:
    """Every run figure 1 measured."""

    sequential: list[RunCost]
    per_step_checkpoint: RunCost
    sleepy: RunCost
    sleepy_cold: RunCost

    @property
    def runs(self) -> list[RunCost]:
        """All runs, sequential first."""
        return [*self.sequential, self.per_step_checkpoint, self.sleepy, self.sleepy_cold]


def measure(sizes: tuple[int, ...] = SIZES, sleepy_steps: int = SLEEPY_STEPS) -> RequestsResult:
    """Measure the sequential runs of each size, then the per-step and sleepy variants."""
    sequential = [measure_run(f"sequential, {n:,} steps", workloads.SEQUENTIAL, n) for n in sizes]
    hundred = min(100, max(sizes))
    per_step = measure_run(
        f"sequential, {hundred} steps, checkpoint after every step",
        workloads.SEQUENTIAL,
        hundred,
        checkpoint_interval_ms=0,
    )
    sleepy = measure_run(
        f"{sleepy_steps} steps, {sleepy_steps - 1} sleeps", workloads.SLEEPY, sleepy_steps
    )
    cold = measure_run(
        f"{sleepy_steps} steps, {sleepy_steps - 1} sleeps, new container per alarm",
        workloads.SLEEPY,
        sleepy_steps,
        cold_drives=True,
    )
    return RequestsResult(sequential, per_step, sleepy, cold)


def marginal_units(a: RunCost, b: RunCost) -> float:
    """Write units of one more step, between two sequential runs of different lengths."""
    return (b.tally.write_units - a.tally.write_units) / (b.steps - a.steps)


def rows(result: RequestsResult) -> list[Row]:
    """The figure's table rows, with PASS/FAIL per target."""
    out = [
        Row(FIGURE, run.label, run.summary() if not run.error else f"{run.error}; {run.summary()}")
        for run in result.runs
    ]
    limit = f"<= {MAX_WRITE_UNITS_PER_STEP:.1f} WU/step"
    for run in result.sequential:
        ok = run.status == "completed" and run.write_units_per_step <= MAX_WRITE_UNITS_PER_STEP
        out.append(
            Row(
                FIGURE,
                f"WU/step, {run.steps:,} steps",
                f"{run.write_units_per_step:.2f} ({run.tally.write_units:,} WU, {run.status}; "
                f"table WU/step by call: {run.units_breakdown()})",
                limit,
                verdict(ok),
            )
        )
    seq = [r for r in result.sequential if r.status == "completed"]
    if len(seq) >= 3:
        margins = [marginal_units(a, b) for a, b in itertools.pairwise(seq)]
        spread_wu = max(margins) - min(margins)
        spread = max(margins) / min(margins) - 1 if min(margins) > 0 else float("inf")
        constant = spread <= CONSTANT_TOLERANCE or spread_wu <= CONSTANT_FLOOR_WU
        labels = ", ".join(
            f"{a.steps:,}->{b.steps:,}: {m:.2f}"
            for (a, b), m in zip(itertools.pairwise(seq), margins, strict=True)
        )
        out.append(
            Row(
                FIGURE,
                "marginal WU per added step",
                labels,
                f"constant (within {CONSTANT_TOLERANCE:.0%} or {CONSTANT_FLOOR_WU} WU)",
                verdict(constant),
            )
        )
    never_waits = [*result.sequential]
    calls = sum(r.scheduler_calls for r in never_waits)
    operations = sorted(
        {
            name
            for r in never_waits
            for name, n in r.tally.calls.items()
            if name.startswith("scheduler.") and n
        }
    )
    out.append(
        Row(
            FIGURE,
            "Scheduler calls, runs that never wait",
            f"{calls} ({', '.join(operations) or 'none'})",
            "0",
            verdict(calls == 0),
        )
    )
    for run in (result.per_step_checkpoint, result.sleepy):
        out.append(
            Row(
                FIGURE,
                f"WU/step, {run.label}",
                f"{run.write_units_per_step:.2f} (table WU/step by call: {run.units_breakdown()})",
                f"info (target {limit} is for batched runs)",
                "",
            )
        )
    return out
