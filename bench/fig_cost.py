"""Figure 2: orchestration cost per million steps at AWS list prices, next to Step Functions
Standard and Lambda durable functions running the same workloads.

relayflow's cost is computed from what figure 1 counted; the two others from their pricing
units (a step is one state transition or one durable operation; a sleep is one Wait state
transition or one wait operation). Only orchestration is priced: the compute of the step
code itself is the same everywhere and left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.fig_requests import PER_STEP, RequestsResult, RunCost
from bench.table import Row, verdict

NAME = "cost"
FIGURE = "2 cost"

# AWS list prices (us-east-1), in dollars.
DYNAMODB_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_READ_UNIT = 0.125 / 1e6
LAMBDA_REQUEST = 0.20 / 1e6
LAMBDA_GB_SECOND_ARM64 = 0.0000133334
SCHEDULER_INVOCATION = 1.00 / 1e6
S3_PUT = 0.005 / 1000
S3_GET = 0.0004 / 1000
STEP_FUNCTIONS_TRANSITION = 25.0 / 1e6
DURABLE_OPERATION = 8.0 / 1e6

#: Memory of the api/drive functions (the CDK construct's default), in GB.
LAMBDA_MEMORY_GB = 1.0
#: Billed Lambda time assumed per AWS request the orchestrator makes (round-trip latency).
SECONDS_PER_AWS_REQUEST = 0.010
#: Billed Lambda time assumed per orchestration invocation on top (start-up, engine work).
SECONDS_PER_INVOCATION = 0.005

#: Per-step mode, 1,000-step run (fixed costs amortized): at least this many times cheaper.
TARGET_VS_STEP_FUNCTIONS = 25.0
TARGET_VS_DURABLE = 8.0
#: Per-step mode, 100 steps separated by 99 sleeps: at least this many times cheaper.
TARGET_SLEEPY_VS_DURABLE = 2.0
#: The sequential run the targets are for.
PRICED_STEPS = 1_000
HOSTS = ("inline", "Lambda worker")

PRICES = (
    "DynamoDB on-demand $0.625/M WU, $0.125/M RU; Lambda arm64 $0.20/M requests + "
    f"$0.0000133334/GB-s at {LAMBDA_MEMORY_GB * 1024:.0f} MB, billed "
    f"{SECONDS_PER_AWS_REQUEST * 1000:.0f} ms per AWS request + "
    f"{SECONDS_PER_INVOCATION * 1000:.0f} ms per invocation; Scheduler $1/M invocations "
    "(API calls free); S3 $0.005/1000 PUT, $0.0004/1000 GET; Step Functions Standard $25/M "
    "transitions; Lambda durable functions $8/M operations"
)


@dataclass(frozen=True)
class Cost:
    """Dollars per million steps of one workload on each platform."""

    label: str
    relayflow: float
    step_functions: float
    durable: float
    breakdown: dict[str, float]

    @property
    def vs_step_functions(self) -> float:
        """How many times cheaper relayflow is than Step Functions Standard."""
        return self.step_functions / self.relayflow

    @property
    def vs_durable(self) -> float:
        """How many times cheaper relayflow is than Lambda durable functions."""
        return self.durable / self.relayflow


def cost_of(run: RunCost, host: str = "inline") -> Cost:
    """Per million steps: relayflow from the run's counts, the others from their units.

    With a Lambda worker host each dispatch is an invocation of its own (its checkpoint
    requests are billed there instead of in the drive function: the same requests).
    """
    t = run.tally
    invocations = run.lambdas.total(separate_step_host=host != "inline")
    aws_requests = sum(t.calls.values())
    gb_seconds = LAMBDA_MEMORY_GB * (
        aws_requests * SECONDS_PER_AWS_REQUEST + invocations * SECONDS_PER_INVOCATION
    )
    parts = {
        "DynamoDB writes": t.write_units * DYNAMODB_WRITE_UNIT,
        "DynamoDB reads": t.read_units * DYNAMODB_READ_UNIT,
        "Lambda": invocations * LAMBDA_REQUEST + gb_seconds * LAMBDA_GB_SECOND_ARM64,
        "Scheduler": run.lambdas.alarm_drives * SCHEDULER_INVOCATION,
        "S3": t.count("s3.PutObject") * S3_PUT + t.count("s3.GetObject") * S3_GET,
    }
    scale = 1e6 / run.steps
    operations = run.steps + run.sleeps
    return Cost(
        label=f"{run.label}, {host} host",
        relayflow=sum(parts.values()) * scale,
        step_functions=operations * STEP_FUNCTIONS_TRANSITION * scale,
        durable=operations * DURABLE_OPERATION * scale,
        breakdown={name: value * scale for name, value in parts.items()},
    )


def workloads_of(result: RequestsResult) -> list[RunCost]:
    """The runs priced: the longest sequential run up to 1,000 steps and the sleepy one,
    in each mode."""
    priced: list[RunCost] = []
    for mode, runs in result.sequential.items():
        done = [r for r in runs if r.status == "completed" and r.steps <= PRICED_STEPS]
        if done:
            priced.append(max(done, key=lambda r: r.steps))
        if mode in result.sleepy:
            priced.append(result.sleepy[mode])
    return priced


def _target(label: str, ratio: float, target: float) -> Row:
    return Row(
        FIGURE, label, f"{ratio:.1f}x cheaper", f">= {target:.0f}x", verdict(ratio >= target)
    )


def rows(result: RequestsResult) -> list[Row]:
    """The figure's table rows."""
    out = [Row(FIGURE, "prices and assumptions", PRICES)]
    for run in workloads_of(result):
        for host in HOSTS:
            cost = cost_of(run, host)
            parts = ", ".join(f"{k} {v:.2f}" for k, v in cost.breakdown.items() if v >= 0.005)
            out.append(
                Row(
                    FIGURE,
                    f"$ per 1M steps, {cost.label}",
                    f"relayflow {cost.relayflow:.2f} ({parts}); Step Functions "
                    f"{cost.step_functions:.2f} ({cost.vs_step_functions:.1f}x); durable "
                    f"functions {cost.durable:.2f} ({cost.vs_durable:.1f}x)",
                )
            )
            if run.mode != PER_STEP:
                continue
            if run.sleeps == 0 and run.steps == PRICED_STEPS:
                out.append(
                    _target(
                        f"vs Step Functions, {cost.label}",
                        cost.vs_step_functions,
                        TARGET_VS_STEP_FUNCTIONS,
                    )
                )
                out.append(
                    _target(
                        f"vs durable functions, {cost.label}", cost.vs_durable, TARGET_VS_DURABLE
                    )
                )
            elif run.sleeps > 0:
                out.append(
                    _target(
                        f"vs durable functions, {cost.label}",
                        cost.vs_durable,
                        TARGET_SLEEPY_VS_DURABLE,
                    )
                )
    return out
