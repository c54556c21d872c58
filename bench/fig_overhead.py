"""Figure 3: engine overhead per step (wall and CPU), in memory, on the AWS driver (moto) and
on the AWS durable execution SDK's local test runner, side by side in the same process.

Workloads: 100 sequential steps, and 10 steps separated by 9 sleeps. Each figure is the median
of several runs after one warm-up run; step bodies do nothing, so the time is the overhead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench import peer, workloads
from bench.moto_stack import MotoStack
from bench.table import Row, Timing, timed, verdict
from relayflow.testing import WorkflowTestEnv

NAME = "overhead"
FIGURE = "3 overhead"
RUNS = 5
PEER = "durable SDK runner"
#: (label, workflow id, steps, sleeps between steps)
WORKLOADS = (
    ("100 steps", workloads.SEQUENTIAL, 100, False),
    ("10 steps + 9 sleeps", workloads.SLEEPY, 10, True),
)


@dataclass(frozen=True)
class Overhead:
    """Median per-step times of one backend on one workload."""

    backend: str
    workload: str
    steps: int
    timing: Timing

    @property
    def wall_ms(self) -> float:
        """Wall milliseconds per step."""
        return self.timing.wall_s / self.steps * 1000

    @property
    def cpu_ms(self) -> float:
        """CPU milliseconds per step (whole process, every thread)."""
        return self.timing.cpu_s / self.steps * 1000


def _measure(work: Callable[[], object], runs: int) -> Timing:
    work()  # warm-up: imports, caches, first-use clients
    return timed(work, runs)


def measure(
    runs: int = RUNS, workload_set: tuple[tuple[str, str, int, bool], ...] = WORKLOADS
) -> list[Overhead]:
    """Time every backend on every workload (the peer last, so its threads idle elsewhere)."""
    results: list[Overhead] = []
    env = WorkflowTestEnv(workflows=workloads.WORKFLOWS, environment="production")
    with MotoStack() as stack:
        for label, workflow_id, steps, _ in workload_set:
            data = {"steps": steps}

            def in_memory(workflow_id: str = workflow_id, data: dict[str, int] = data) -> None:
                run = env.trigger(workflow_id, data)
                env.run_until_idle()
                assert env.get_run(run.id).status == "completed"

            def on_moto(workflow_id: str = workflow_id, data: dict[str, int] = data) -> None:
                assert stack.run(workflow_id, data).status == "completed"

            results.append(Overhead("in-memory", label, steps, _measure(in_memory, runs)))
            results.append(Overhead("AWS on moto", label, steps, _measure(on_moto, runs)))
    if peer.available():
        runner = peer.PeerRunner()
        try:
            for label, _, steps, sleeps in workload_set:

                def on_peer(steps: int = steps, sleeps: bool = sleeps) -> None:
                    runner.run(steps, sleeps=sleeps)

                results.append(Overhead(PEER, label, steps, _measure(on_peer, runs)))
        finally:
            runner.close()
    return results


def rows(results: list[Overhead]) -> list[Row]:
    """The figure's table rows, with the CPU target against the peer where it ran."""
    out = [
        Row(
            FIGURE,
            f"{o.backend}, {o.workload}",
            f"wall {o.wall_ms:.3f} ms/step, CPU {o.cpu_ms:.3f} ms/step (median of {o.timing.runs})",
        )
        for o in results
    ]
    by_key = {(o.backend, o.workload): o for o in results}
    for label in dict.fromkeys(o.workload for o in results):
        mine = by_key.get(("in-memory", label))
        theirs = by_key.get((PEER, label))
        if mine is None:
            continue
        if theirs is None:
            out.append(
                Row(
                    FIGURE,
                    f"in-memory CPU/step vs durable SDK runner, {label}",
                    f"peer not installed (pip install {peer.PACKAGE})",
                    "below the peer's",
                    "SKIP",
                )
            )
            continue
        out.append(
            Row(
                FIGURE,
                f"in-memory CPU/step vs durable SDK runner, {label}",
                f"{mine.cpu_ms:.3f} vs {theirs.cpu_ms:.3f} ms "
                f"({theirs.cpu_ms / mine.cpu_ms:.1f}x less)"
                if mine.cpu_ms < theirs.cpu_ms
                else f"{mine.cpu_ms:.3f} vs {theirs.cpu_ms:.3f} ms",
                "below the peer's",
                verdict(mine.cpu_ms < theirs.cpu_ms),
            )
        )
    if any(o.backend == PEER for o in results):
        out.append(Row(FIGURE, "peer versions", peer.version()))
    return out
