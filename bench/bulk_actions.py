"""Bulk actions on the AWS driver on moto: the wall time and the AWS requests (by service) of
a bulk job that cancels N waiting runs and of one that redrives N failed runs.

The runs are created first (not metered); then the job is started as the API would and its
run driven to its end through the drive entry, as the drive function would. What the job
hands off (each redriven run's next drive) is counted, not driven: those drives belong to
the runs, not to the job. Wall time is on in-process moto, which applies one request at a
time (the atomic shim), so it says what the job's own code costs per run, not what
DynamoDB's parallelism would give.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.aws_meter import Tally
from bench.moto_stack import MotoStack
from bench.table import Row
from relayflow.errors import FatalError
from relayflow.operations.bulk import BulkJobs
from relayflow.operations.bulk_models import BulkJobInput

NAME = "bulk"
FIGURE = "9 bulk actions"
SIZES = (1_000, 10_000)
QUICK_SIZES = (100, 1_000)
WAITS = "bench.bulk.waits"
FAILS = "bench.bulk.fails"
#: The job's concurrency and page size (the API's defaults).
CONCURRENCY = 8
PAGE_SIZE = 100
SERVICES = ("dynamodb", "scheduler", "sqs", "s3", "lambda")


def _register() -> None:
    from relayflow import workflow

    def waits(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_signal("go")

    def fails(data: Any, ctx: Any) -> Any:
        def broken() -> None:
            raise FatalError("broken on purpose", code="BROKEN")

        return ctx.step("broken", broken)

    workflow(id=WAITS)(waits)
    workflow(id=FAILS)(fails)


@dataclass(frozen=True)
class BulkResult:
    """One bulk job: how many runs, how long, what it asked of AWS."""

    action: str
    runs: int
    wall_s: float
    tally: Tally
    done: int
    handed_off: int

    def requests(self, service: str) -> int:
        return self.tally.count(f"{service}.*")


def _drive_job(stack: MotoStack, job_id: str) -> int:
    """Deliver the job run's alarms until it ends; the other runs' hand-offs are counted
    (and left armed)."""
    engine = stack.driver.engine
    for _ in range(1_000_000):
        record = engine.runs.get_header(job_id)
        if record is None or record.is_terminal:
            break
        wake = stack.armed.armed(job_id)
        if wake is None:
            raise RuntimeError(f"bulk job {job_id} is {record.status} with no alarm")
        stack.clock.set(max(stack.clock.now_ms(), wake))
        stack.armed.take(job_id, wake)
        engine.drive_from_event({"runId": job_id, "wakeAt": wake})
    return sum(1 for run_id, _ in stack.armed.pending() if run_id != job_id)


def measure_one(action: str, size: int) -> BulkResult:
    """A fresh stack with ``size`` runs to act on; the bulk job metered."""
    _register()
    workflow_id = WAITS if action == "cancel" else FAILS
    status = "waiting" if action == "cancel" else "failed"
    with MotoStack() as stack:
        for i in range(size):
            stack.trigger(workflow_id, {"i": i})
        stack.take()
        jobs = BulkJobs(stack.driver.admin)
        job = BulkJobInput.model_validate(
            {
                "action": action,
                "filter": {"workflowId": workflow_id, "statuses": [status]},
                "concurrency": CONCURRENCY,
                "pageSize": PAGE_SIZE,
                "by": "bench",
            }
        )
        started = time.perf_counter()
        view, _ = jobs.start(job)
        handed_off = _drive_job(stack, view.job_id)
        wall = time.perf_counter() - started
        tally, _ = stack.take()
        ended = jobs.get(view.job_id)
        if ended.status != "completed" or ended.done != size:
            raise RuntimeError(f"bulk {action} of {size} runs ended {ended!r}")
        return BulkResult(action, size, wall, tally, ended.done, handed_off)


def measure(sizes: tuple[int, ...] = SIZES) -> list[BulkResult]:
    """A bulk cancel and a bulk redrive at each size."""
    return [measure_one(action, size) for action in ("cancel", "redrive") for size in sizes]


def rows(results: list[BulkResult]) -> list[Row]:
    """One row per job: wall time, runs per second, requests per run by service."""
    out: list[Row] = []
    for r in results:
        per_run = ", ".join(f"{s} {r.requests(s) / r.runs:.2f}" for s in SERVICES if r.requests(s))
        out.append(
            Row(
                FIGURE,
                f"bulk {r.action} of {r.runs:,} runs: wall time (moto, one request at a time)",
                f"{r.wall_s:.1f} s ({r.runs / r.wall_s:,.0f} runs/s)",
            )
        )
        out.append(
            Row(
                FIGURE,
                f"bulk {r.action} of {r.runs:,} runs: AWS requests per run",
                f"{per_run} (total {sum(r.requests(s) for s in SERVICES):,})",
            )
        )
        if r.handed_off:
            out.append(
                Row(
                    FIGURE,
                    f"bulk {r.action} of {r.runs:,} runs: runs handed to the drive function",
                    f"{r.handed_off:,}",
                )
            )
    return out
