"""Figure 5: scale limits on the AWS driver (moto): a 10,000-step run, a 5 MB step output
(offloaded to S3 and read back), a run with 1,000 sleeps, and the largest DynamoDB item any
of them wrote (which must stay under 350 KB)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench import workloads
from bench.fig_requests import RunCost, measure_run
from bench.moto_stack import MotoStack
from bench.table import Row, verdict

NAME = "limits"
FIGURE = "5 limits"
LONG_RUN_STEPS = 10_000
BIG_OUTPUT_BYTES = 5 * 1024 * 1024
SLEEPS = 1_000
#: Sleeps of the default run: 1,000 take a quarter of an hour on moto (``--long``).
DEFAULT_SLEEPS = 300
#: Largest item relayflow may write (DynamoDB's hard limit is 400 KB).
ITEM_LIMIT = 350_000


@dataclass(frozen=True)
class BigOutput:
    """The large-output round trip."""

    bytes: int
    round_trip: bool
    s3_puts: int
    s3_gets: int
    largest_item: int
    seconds: float


def measure_big_output(size: int = BIG_OUTPUT_BYTES) -> BigOutput:
    """Run one step returning ``size`` bytes; read the run back and compare."""
    with MotoStack() as stack:
        start = time.perf_counter()
        run = stack.run(workloads.BIG_OUTPUT, {"bytes": size})
        seconds = time.perf_counter() - start
        tally, _ = stack.take()
        fresh = stack.fresh_driver().admin.get_run(run.id)
        round_trip = (
            run.status == "completed"
            and fresh is not None
            and isinstance(fresh.output, dict)
            and fresh.output.get("blob") == "x" * size
        )
        tally_after, _ = stack.take()
    return BigOutput(
        bytes=size,
        round_trip=round_trip,
        s3_puts=tally.count("s3.PutObject"),
        s3_gets=tally.count("s3.GetObject") + tally_after.count("s3.GetObject"),
        largest_item=max(tally.largest_item, tally_after.largest_item),
        seconds=seconds,
    )


@dataclass(frozen=True)
class LimitsResult:
    """Every scale-limit measurement."""

    long_run: RunCost
    big: BigOutput
    sleepy: RunCost
    largest_item_elsewhere: int


def measure(
    long_steps: int = LONG_RUN_STEPS,
    big_bytes: int = BIG_OUTPUT_BYTES,
    sleeps: int = SLEEPS,
    long_run: RunCost | None = None,
    largest_item_elsewhere: int = 0,
) -> LimitsResult:
    """Run the three limit workloads (reusing figure 1's long run when given)."""
    if long_run is None or long_run.steps != long_steps:
        long_run = measure_run(
            f"sequential, {long_steps:,} steps", workloads.SEQUENTIAL, long_steps
        )
    big = measure_big_output(big_bytes)
    sleepy = measure_run(f"{sleeps + 1:,} steps, {sleeps:,} sleeps", workloads.SLEEPY, sleeps + 1)
    return LimitsResult(long_run, big, sleepy, largest_item_elsewhere)


def rows(result: LimitsResult) -> list[Row]:
    """The figure's table rows, each with PASS/FAIL."""
    long_run, big, sleepy = result.long_run, result.big, result.sleepy
    largest = max(
        long_run.tally.largest_item,
        big.largest_item,
        sleepy.tally.largest_item,
        result.largest_item_elsewhere,
    )
    return [
        Row(
            FIGURE,
            f"{long_run.steps:,}-step run",
            f"{long_run.error or long_run.status} after {long_run.seconds:.1f} s, "
            f"{long_run.write_units_per_step:.2f} WU/step, largest item "
            f"{long_run.tally.largest_item:,} B",
            "completes",
            verdict(long_run.status == "completed"),
        ),
        Row(
            FIGURE,
            f"{big.bytes / 1024 / 1024:.0f} MB step output",
            f"round trip {'ok' if big.round_trip else 'FAILED'} in {big.seconds:.1f} s, "
            f"{big.s3_puts} S3 PUT, {big.s3_gets} S3 GET, largest item {big.largest_item:,} B",
            "round-trips via S3",
            verdict(big.round_trip and big.s3_puts > 0),
        ),
        Row(
            FIGURE,
            f"run with {sleepy.sleeps:,} sleeps",
            f"{sleepy.error or sleepy.status} after {sleepy.seconds:.1f} s, "
            f"{sleepy.write_units_per_step:.2f} WU/step, "
            f"{sleepy.per_step(sleepy.tally.read_units):.2f} RU/step",
            "completes" if sleepy.sleeps >= SLEEPS else f"completes ({SLEEPS:,} with --long)",
            verdict(sleepy.status == "completed"),
        ),
        Row(
            FIGURE,
            "largest DynamoDB item written",
            f"{largest:,} B",
            f"< {ITEM_LIMIT:,} B",
            verdict(largest < ITEM_LIMIT),
        ),
    ]
