"""Figure 2: orchestration cost per million steps at AWS list prices, next to Step Functions
Standard and Lambda durable functions running the same workloads.

relayflow's cost is computed from what figure 1 counted; the two others from their pricing
units (a step is one state transition or one durable operation; a sleep is one Wait state
transition or one wait operation). Only orchestration is priced: the compute of the step
code itself is the same everywhere and left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.fig_requests import BATCHED, PER_STEP, RequestsResult, RunCost
from bench.table import Row, verdict
from relayflow.costs import PriceTable
from relayflow.costs import cost_of as cost_of_usage

NAME = "cost"
FIGURE = "2 cost"

# AWS list prices (us-east-1), in dollars: the package's price table, one source of prices.
_LIST = PriceTable()
DYNAMODB_WRITE_UNIT = _LIST.dynamodb_write_unit
DYNAMODB_READ_UNIT = _LIST.dynamodb_read_unit
LAMBDA_REQUEST = _LIST.lambda_request
LAMBDA_GB_SECOND_ARM64 = _LIST.lambda_gb_second
SCHEDULER_INVOCATION = _LIST.scheduler_invocation
S3_PUT = _LIST.s3_put
S3_GET = _LIST.s3_get
STEP_FUNCTIONS_TRANSITION = _LIST.step_functions_transition
DURABLE_OPERATION = _LIST.durable_operation
API_GATEWAY_REQUEST = _LIST.api_gateway_request

#: Memory of the api/drive functions (the CDK construct's default), in GB.
LAMBDA_MEMORY_GB = _LIST.lambda_memory_gb
#: Billed Lambda time assumed per AWS request the orchestrator makes (round-trip latency).
SECONDS_PER_AWS_REQUEST = 0.010
#: Billed Lambda time assumed per orchestration invocation on top (start-up, engine work).
SECONDS_PER_INVOCATION = 0.005

#: Per-step mode, 1,000-step run (fixed costs amortized): at least this many times cheaper.
TARGET_VS_STEP_FUNCTIONS = 25.0
TARGET_VS_DURABLE = 8.0
#: Per-step mode, 100 steps separated by 99 sleeps: at least this many times cheaper.
TARGET_SLEEPY_VS_DURABLE = 4.0
#: The sequential run the targets are for.
PRICED_STEPS = 1_000
HOSTS = ("inline", "Lambda worker")

PRICES = (
    f"DynamoDB on-demand ${DYNAMODB_WRITE_UNIT * 1e6:g}/M WU, ${DYNAMODB_READ_UNIT * 1e6:g}/M RU; "
    f"Lambda arm64 ${LAMBDA_REQUEST * 1e6:.2f}/M requests + "
    f"${f'{LAMBDA_GB_SECOND_ARM64:.10f}'.rstrip('0')}/GB-s at "
    f"{LAMBDA_MEMORY_GB * 1024:.0f} MB, billed "
    f"{SECONDS_PER_AWS_REQUEST * 1000:.0f} ms per AWS request + "
    f"{SECONDS_PER_INVOCATION * 1000:.0f} ms per invocation; Scheduler "
    f"${SCHEDULER_INVOCATION * 1e6:g}/M invocations (API calls free); S3 "
    f"${S3_PUT * 1000:g}/1000 PUT, ${S3_GET * 1000:g}/1000 GET; Step Functions Standard "
    f"${STEP_FUNCTIONS_TRANSITION * 1e6:g}/M transitions; Lambda durable functions "
    f"${DURABLE_OPERATION * 1e6:g}/M operations; API Gateway HTTP API "
    f"${API_GATEWAY_REQUEST * 1e6:g}/M requests"
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


def _api_invocation() -> float:
    """One invocation of the api function, with its own work (not its AWS requests)."""
    return LAMBDA_REQUEST + LAMBDA_MEMORY_GB * SECONDS_PER_INVOCATION * LAMBDA_GB_SECOND_ARM64


def checkpoint_call() -> dict[str, float]:
    """Dollars per checkpoint an HTTP host writes through the orchestrator's route (opt-in):
    the API request and the api function's invocation, with its PutItem (one write unit of
    an entry under 1 KB) billed as every AWS request is."""
    return {
        "API Gateway": API_GATEWAY_REQUEST,
        "Lambda": _api_invocation()
        + LAMBDA_MEMORY_GB * SECONDS_PER_AWS_REQUEST * LAMBDA_GB_SECOND_ARM64,
        "DynamoDB writes": DYNAMODB_WRITE_UNIT,
    }


def http_cost_of(run: RunCost, *, checkpoint_route: bool) -> Cost:
    """Per million steps with an HTTP step host (the host's own servers are not priced).

    The orchestrator's side is the inline host's run less nothing: its checkpoint PutItems
    are made by the api function instead of the drive function, billed the same, and with
    ``checkpoint_route`` each of the run's checkpoints (one per step here: no retries, no
    metadata) adds an API request and an api function invocation. Without the opt-in the
    host is durable per invocation: the run is priced as the batched one it behaves as.
    """
    base = cost_of(run, "inline")
    parts = dict(base.breakdown)
    label = f"{run.label}, HTTP host without the checkpoint route (durable per invocation)"
    if checkpoint_route:
        label = f"{run.label}, HTTP host with the checkpoint route (opt-in)"
        extra = checkpoint_call()
        # The PutItem itself is in the run's counts already: only the call around it is new.
        parts["API Gateway"] = extra["API Gateway"] * 1e6
        parts["Lambda"] += _api_invocation() * 1e6
    relayflow = sum(parts.values())
    return Cost(label, relayflow, base.step_functions, base.durable, parts)


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


def _price_row(cost: Cost) -> Row:
    parts = ", ".join(f"{k} {v:.2f}" for k, v in cost.breakdown.items() if v >= 0.005)
    return Row(
        FIGURE,
        f"$ per 1M steps, {cost.label}",
        f"relayflow {cost.relayflow:.2f} ({parts}); Step Functions "
        f"{cost.step_functions:.2f} ({cost.vs_step_functions:.1f}x); durable "
        f"functions {cost.durable:.2f} ({cost.vs_durable:.1f}x)",
    )


def http_rows(result: RequestsResult) -> list[Row]:
    """HTTP step hosts with and without the checkpoint route, on the priced sequential run."""
    call = checkpoint_call()
    out = [
        Row(
            FIGURE,
            "$ per 1M checkpoints through the route (HTTP host opt-in)",
            f"{sum(call.values()) * 1e6:.2f} ("
            + ", ".join(f"{k} {v * 1e6:.2f}" for k, v in call.items())
            + ")",
        )
    ]
    for mode, route in ((PER_STEP, True), (BATCHED, False)):
        runs = result.sequential.get(mode, [])
        done = [r for r in runs if r.status == "completed" and r.steps <= PRICED_STEPS]
        if done:
            run = max(done, key=lambda r: r.steps)
            out.append(_price_row(http_cost_of(run, checkpoint_route=route)))
    return out


def recorded_row(run: RunCost) -> Row | None:
    """What the run's own record says it cost next to what the meter counted for it.

    The meter also saw what follows the run's final save (the expiry stamped on its pages,
    the statistics write of its end) and the reading of its result after it ended; the
    record's orchestrator time is wall time on moto, so only its AWS units are compared here.
    """
    usage = run.recorded
    if usage is None:
        return None
    t = run.tally
    requests = t.dynamodb_writes + t.dynamodb_reads
    units_only = usage.model_copy(update={"orchestrator_ms": 0})
    scale = 1e6 / run.steps
    return Row(
        FIGURE,
        f"recorded by the run vs metered, {run.label}",
        f"record {usage.dynamodb_write_units:g} WU, {usage.dynamodb_read_units:g} RU, "
        f"{usage.dynamodb_requests} DynamoDB requests, {usage.drive_invocations} drive "
        f"invocations, {usage.scheduler_invocations} alarms "
        f"(${cost_of_usage(units_only).total * scale:.2f} per 1M steps before Lambda time); "
        f"meter {t.write_units} WU, {t.read_units:g} RU, {requests} requests, "
        f"{run.lambdas.total(separate_step_host=False)} invocations, "
        f"{run.lambdas.alarm_drives} alarms; not recorded: what follows the final save (the "
        f"expiry stamped on its pages, the statistics write) and the read of the result "
        f"({t.write_units - usage.dynamodb_write_units:g} WU, "
        f"{requests - usage.dynamodb_requests} requests)",
    )


def rows(result: RequestsResult) -> list[Row]:
    """The figure's table rows."""
    out = [Row(FIGURE, "prices and assumptions", PRICES)]
    for run in workloads_of(result):
        recorded = recorded_row(run)
        if recorded is not None:
            out.append(recorded)
        for host in HOSTS:
            cost = cost_of(run, host)
            out.append(_price_row(cost))
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
    return out + http_rows(result)
