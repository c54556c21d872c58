"""Figure 1: AWS requests and DynamoDB write units per step on the AWS driver (moto).

Runs sequential workflows of growing length and a workflow whose steps are separated by
sleeps (alarms fired through the engine's drive entry on a virtual clock), each with per-step
checkpoints (the default) and batched (``checkpoint="batched"``), with realistic step outputs
(100-200 random bytes, distinct timestamps). It reports what each run costs per step, the
marginal cost of one more step (its slope between two run lengths), the fixed cost of a run
and the cost of one sleep cycle (park, alarm, wake).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from bench import workloads
from bench.aws_meter import Tally
from bench.moto_stack import LambdaCounts, MotoStack
from bench.table import Row, verdict
from relayflow.costs import RunUsage

NAME = "requests"
FIGURE = "1 AWS requests"
SIZES = (10, 100, 1_000, 10_000)
QUICK_SIZES = (10, 100, 1_000)
SLEEPY_STEPS = 100
PER_STEP, BATCHED = "per step", "batched"
#: Per-step mode: one more step costs at most this many write units and DynamoDB requests
#: (the floor is one write unit per checkpoint of up to 1 KB).
MAX_MARGINAL_WU = 1.2
MAX_MARGINAL_REQUESTS = 1.2
#: A sleep cycle (park, alarm, wake), indexes included.
MAX_SLEEP_CYCLE_WU = 5.0
#: Per-step mode, a step plus a one-minute sleep (the sleepy run per step: its step, the
#: sleep before it, the wake and the park), indexes included.
MAX_STEP_AND_SLEEP_REQUESTS = 4.0
MAX_STEP_AND_SLEEP_WU = 3.0
#: CPU per step of the longest run may be at most this many times the 100-step figure.
MAX_FLAT_RATIO = 1.5


@dataclass(frozen=True)
class RunCost:
    """What one run cost on the AWS driver."""

    label: str
    mode: str
    steps: int
    sleeps: int
    status: str
    tally: Tally
    lambdas: LambdaCounts
    seconds: float
    cpu_seconds: float
    error: str = ""
    #: The usage the run's record carries (what its run detail prices), None if it failed.
    recorded: RunUsage | None = None

    def per_step(self, value: float) -> float:
        """``value`` divided by the run's steps."""
        return value / self.steps

    @property
    def write_units_per_step(self) -> float:
        """Table plus index write units per step."""
        return self.per_step(self.tally.write_units)

    @property
    def dynamodb_requests(self) -> int:
        """DynamoDB requests of every kind."""
        return self.tally.dynamodb_writes + self.tally.dynamodb_reads

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
            f"({self.lambdas.total(separate_step_host=True)} with a separate step host), "
            f"CPU {self.per_step(self.cpu_seconds) * 1000:.2f} ms/step"
        )


def measure_run(label: str, workflow_id: str, steps: int, *, mode: str = PER_STEP) -> RunCost:
    """Run one workflow on a fresh metered AWS driver and return what it cost."""
    with MotoStack() as st:
        start, cpu = time.perf_counter(), time.process_time()
        error = ""
        recorded: RunUsage | None = None
        try:
            detail = st.run(workflow_id, {"steps": steps})
            status, recorded = detail.status, detail.usage
        except Exception as exc:
            # A limit the driver cannot handle is a figure too: report it, keep going.
            status, error = "error", _short(f"{type(exc).__name__}: {exc}")
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        tally, lambdas = st.take()
    sleepy = workflow_id in (workloads.SLEEPY, workloads.SLEEPY_BATCHED)
    sleeps = steps - 1 if sleepy else 0
    return RunCost(
        label, mode, steps, sleeps, status, tally, lambdas, seconds, cpu_seconds, error, recorded
    )


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RequestsResult:
    """Every run figure 1 measured, by checkpoint mode."""

    sequential: dict[str, list[RunCost]]
    sleepy: dict[str, RunCost]

    @property
    def runs(self) -> list[RunCost]:
        """All runs, sequential first."""
        return [*(r for runs in self.sequential.values() for r in runs), *self.sleepy.values()]

    def sequential_of(self, mode: str, steps: int) -> RunCost | None:
        """The sequential run of ``steps`` steps in ``mode``, if measured."""
        return next((r for r in self.sequential[mode] if r.steps == steps), None)


def measure(sizes: tuple[int, ...] = SIZES, sleepy_steps: int = SLEEPY_STEPS) -> RequestsResult:
    """Measure the sequential runs of each size and the sleepy run, in both modes."""
    sequential: dict[str, list[RunCost]] = {}
    sleepy: dict[str, RunCost] = {}
    for mode, (seq_id, sleepy_id) in workloads.MODES.items():
        sequential[mode] = [
            measure_run(f"{mode}, sequential, {n:,} steps", seq_id, n, mode=mode) for n in sizes
        ]
        sleepy[mode] = measure_run(
            f"{mode}, {sleepy_steps} steps, {sleepy_steps - 1} sleeps",
            sleepy_id,
            sleepy_steps,
            mode=mode,
        )
    return RequestsResult(sequential, sleepy)


def marginal(a: RunCost, b: RunCost) -> tuple[float, float]:
    """Write units and DynamoDB requests of one more step, between two sequential runs."""
    steps = b.steps - a.steps
    return (
        (b.tally.write_units - a.tally.write_units) / steps,
        (b.dynamodb_requests - a.dynamodb_requests) / steps,
    )


def sleep_cycle_units(result: RequestsResult, mode: str) -> float | None:
    """Write units of one sleep cycle: the sleepy run less the sequential run of its length."""
    sleepy = result.sleepy.get(mode)
    if sleepy is None or sleepy.sleeps == 0:
        return None
    plain = result.sequential_of(mode, sleepy.steps)
    if plain is None:
        return None
    return (sleepy.tally.write_units - plain.tally.write_units) / sleepy.sleeps


def step_and_sleep_row(sleepy: RunCost, *, targeted: bool) -> Row:
    """What one step plus the sleep before it costs: the sleepy run's figures per step."""
    requests = sleepy.per_step(sleepy.dynamodb_requests)
    units = sleepy.write_units_per_step
    ok = requests <= MAX_STEP_AND_SLEEP_REQUESTS and units <= MAX_STEP_AND_SLEEP_WU
    return Row(
        FIGURE,
        f"{sleepy.mode}, a step plus a one-minute sleep ({sleepy.steps} steps, "
        f"{sleepy.sleeps} sleeps, per step)",
        f"{requests:.2f} DynamoDB requests, {units:.2f} WU",
        f"<= {MAX_STEP_AND_SLEEP_REQUESTS:.0f} requests and <= {MAX_STEP_AND_SLEEP_WU:.0f} WU"
        if targeted
        else "info",
        verdict(ok) if targeted else "",
    )


def rows(result: RequestsResult) -> list[Row]:
    """The figure's table rows, with PASS/FAIL per target."""
    out = [
        Row(FIGURE, run.label, run.summary() if not run.error else f"{run.error}; {run.summary()}")
        for run in result.runs
    ]
    for mode, runs in result.sequential.items():
        done = [r for r in runs if r.status == "completed"]
        targeted = mode == PER_STEP
        for a, b in itertools.pairwise(done):
            units, requests = marginal(a, b)
            ok = units <= MAX_MARGINAL_WU and requests <= MAX_MARGINAL_REQUESTS
            out.append(
                Row(
                    FIGURE,
                    f"{mode}, marginal cost of a step, {a.steps:,}->{b.steps:,} steps",
                    f"{units:.2f} WU, {requests:.2f} DynamoDB requests",
                    f"<= {MAX_MARGINAL_WU} WU and <= {MAX_MARGINAL_REQUESTS} requests"
                    if targeted
                    else "info",
                    verdict(ok) if targeted else "",
                )
            )
        if len(done) >= 2:
            units, requests = marginal(done[0], done[1])
            first = done[0]
            out.append(
                Row(
                    FIGURE,
                    f"{mode}, fixed cost per run (insert, indexes, completion)",
                    f"{first.tally.write_units - units * first.steps:.1f} WU, "
                    f"{first.dynamodb_requests - requests * first.steps:.1f} DynamoDB requests",
                )
            )
        sleepy = result.sleepy.get(mode)
        if sleepy is not None and sleepy.sleeps > 0 and sleepy.status == "completed":
            out.append(step_and_sleep_row(sleepy, targeted=targeted))
        cycle = sleep_cycle_units(result, mode)
        if cycle is not None:
            out.append(
                Row(
                    FIGURE,
                    f"{mode}, WU per sleep cycle (park, alarm, wake; indexes included)",
                    f"{cycle:.2f} (sleepy run table WU/step by call: "
                    f"{result.sleepy[mode].units_breakdown()})",
                    f"<= {MAX_SLEEP_CYCLE_WU:.0f}" if targeted else "info",
                    verdict(cycle <= MAX_SLEEP_CYCLE_WU) if targeted else "",
                )
            )
    per_step = {r.steps: r for r in result.sequential.get(PER_STEP, []) if r.status == "completed"}
    if 100 in per_step and len(per_step) > 1 and max(per_step) > 100:
        short, long = per_step[100], per_step[max(per_step)]
        ratio = long.per_step(long.cpu_seconds) / short.per_step(short.cpu_seconds)
        out.append(
            Row(
                FIGURE,
                f"{PER_STEP}, CPU/step on moto, {long.steps:,} vs 100 steps",
                f"{long.per_step(long.cpu_seconds) * 1000:.2f} vs "
                f"{short.per_step(short.cpu_seconds) * 1000:.2f} ms ({ratio:.2f}x)",
                f"<= {MAX_FLAT_RATIO}x",
                verdict(ratio <= MAX_FLAT_RATIO),
            )
        )
    never_waits = [r for runs in result.sequential.values() for r in runs]
    calls = sum(r.scheduler_calls for r in never_waits)
    out.append(
        Row(
            FIGURE,
            "Scheduler calls, runs that never wait",
            str(calls),
            "0",
            verdict(calls == 0),
        )
    )
    return out
