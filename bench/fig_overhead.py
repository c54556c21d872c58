"""Figure 3: engine overhead per step (wall and CPU), per-step and batched, in memory, on the
AWS driver (moto) and on the AWS durable execution SDK's local test runner, one after the
other in the same process.

Workloads: 10, 100 and 1,000 sequential steps and 10 steps separated by 9 sleeps, with
realistic outputs and steps that move the virtual clock. The in-memory engine is timed before
moto is started (a live moto mock patches botocore for the whole process). Each figure is the
median of several runs after one warm-up run.

CPU per step is checked flat in memory, like for like: the same 10,000 steps as one run and
as 100 runs of 100 steps, in alternation in one fresh process of their own, each the total CPU
of the work divided by its steps (so both pay the garbage collector's amortized share, which a
median of short runs would leave out), with only the runs timed (their status is checked
after the clock stops). It holds only when a checkpoint does not replay the body. The pair
runs in a process of its own because a full collection walks every live object of the
process: in the bench's process it would also walk what the figures before it left alive,
and whether such a collection fell in a long round would depend on what ran before.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import peer, workloads
from bench.moto_stack import MotoStack
from bench.table import Row, Timing, timed, verdict
from relayflow.testing import WorkflowTestEnv

NAME = "overhead"
FIGURE = "3 overhead"
RUNS = 5
PEER = "durable SDK runner"
#: (label, steps, sleeps between steps)
WORKLOADS = (
    ("10 steps", 10, False),
    ("100 steps", 100, False),
    ("1,000 steps", 1_000, False),
    ("10 steps + 9 sleeps", 10, True),
)
#: CPU per step of the long run may be at most this many times the 100-step figure.
FLAT_STEPS = 10_000
MAX_FLAT_RATIO = 1.5
#: The short runs the long one is compared with, and how many times each is timed.
FLAT_SHORT_STEPS = 100
FLAT_ROUNDS = 7
FLAT_BACKEND = "in-memory, per step, flatness"
#: The project folder, where ``python -m bench.fig_overhead`` runs the pair.
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Overhead:
    """Median per-step times of one backend on one workload."""

    backend: str
    workload: str
    steps: int
    timing: Timing
    #: Full garbage collections during the timed runs, and their CPU seconds (when counted).
    full_collections: tuple[int, float] | None = None

    @property
    def wall_ms(self) -> float:
        """Wall milliseconds per step."""
        return self.timing.wall_s / self.steps * 1000

    @property
    def cpu_ms(self) -> float:
        """CPU milliseconds per step (whole process, every thread)."""
        return self.timing.cpu_s / self.steps * 1000


class FullCollections:
    """Counts Python's full (oldest-generation) collections and their CPU time while active."""

    def __init__(self) -> None:
        self.count = 0
        self.cpu_s = 0.0
        self._started = 0.0

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.process_time()
        else:
            self.count += 1
            self.cpu_s += time.process_time() - self._started

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._observe)


def _measure(work: Callable[[], object], runs: int) -> Timing:
    work()  # warm-up: imports, caches, first-use clients
    return timed(work, runs)


def _runs_for(steps: int, runs: int) -> int:
    return runs if steps <= 100 else max(1, runs // 2)


def _workflow(mode: str, sleeps: bool) -> str:
    sequential, sleepy = workloads.MODES[mode]
    return sleepy if sleeps else sequential


def _memory_env() -> WorkflowTestEnv:
    env = WorkflowTestEnv(workflows=workloads.WORKFLOWS, environment="production")
    env.dispatcher.services[workloads.CLOCK_SERVICE] = env.clock
    return env


def measure(
    runs: int = RUNS,
    workload_set: tuple[tuple[str, int, bool], ...] = WORKLOADS,
    flat_steps: int = FLAT_STEPS,
    flat_short_steps: int = FLAT_SHORT_STEPS,
) -> list[Overhead]:
    """Time every backend on every workload: memory first, then moto, the peer last."""
    results: list[Overhead] = []
    env = _memory_env()
    for mode in workloads.MODES:
        for label, steps, sleeps in workload_set:
            data = {"steps": steps}
            workflow_id = _workflow(mode, sleeps)

            def in_memory(workflow_id: str = workflow_id, data: dict[str, int] = data) -> None:
                run = env.trigger(workflow_id, data)
                env.run_until_idle()
                assert env.get_run(run.id).status == "completed"

            timing = _measure(in_memory, _runs_for(steps, runs))
            results.append(Overhead(f"in-memory, {mode}", label, steps, timing))
    results += _flat_pair_in_own_process(flat_steps, flat_short_steps)
    with MotoStack() as stack:
        for mode in workloads.MODES:
            for label, steps, sleeps in workload_set:
                data = {"steps": steps}
                workflow_id = _workflow(mode, sleeps)

                def on_moto(workflow_id: str = workflow_id, data: dict[str, int] = data) -> None:
                    assert stack.run(workflow_id, data).status == "completed"

                timing = _measure(on_moto, _runs_for(steps, runs))
                results.append(Overhead(f"AWS on moto, {mode}", label, steps, timing))
    if peer.available():
        runner = peer.PeerRunner()
        try:
            for label, steps, sleeps in workload_set:

                def on_peer(steps: int = steps, sleeps: bool = sleeps) -> None:
                    runner.run(steps, sleeps=sleeps)

                results.append(
                    Overhead(PEER, label, steps, _measure(on_peer, _runs_for(steps, runs)))
                )
        finally:
            runner.close()
    return results


def _flat_pair(env: WorkflowTestEnv, steps: int, short_steps: int) -> list[Overhead]:
    """The same ``steps`` steps as one run and as runs of ``short_steps``, timed in
    alternation, ``FLAT_ROUNDS`` times each after a warm-up of each."""
    workflow_id = _workflow("per step", False)
    runs = max(1, steps // short_steps)
    shapes = (
        (f"1 run of {steps:,} steps", [steps]),
        (f"{runs:,} runs of {short_steps:,} steps", [short_steps] * runs),
    )
    started: list[str] = []

    def work(sizes: list[int]) -> None:
        for size in sizes:
            started.append(env.trigger(workflow_id, {"steps": size}).id)
            env.run_until_idle()

    timings: dict[str, list[Timing]] = {label: [] for label, _ in shapes}
    collections = {label: FullCollections() for label, _ in shapes}
    for _, sizes in shapes:
        work(sizes)
    for _ in range(FLAT_ROUNDS):
        for label, sizes in shapes:
            with collections[label]:
                timings[label].append(timed(lambda sizes=sizes: work(sizes), 1))
    unfinished = [run_id for run_id in started if env.get_run(run_id).status != "completed"]
    if unfinished:
        raise RuntimeError(f"{len(unfinished)} runs did not complete, e.g. {unfinished[0]}")
    return [
        Overhead(
            FLAT_BACKEND,
            label,
            sum(sizes),
            Timing(
                statistics.median(t.wall_s for t in timings[label]),
                statistics.median(t.cpu_s for t in timings[label]),
                FLAT_ROUNDS,
            ),
            (collections[label].count, collections[label].cpu_s),
        )
        for label, sizes in shapes
    ]


def _flat_pair_in_own_process(steps: int, short_steps: int) -> list[Overhead]:
    """:func:`_flat_pair` in a fresh Python process (``python -m bench.fig_overhead``)."""
    command = [sys.executable, "-m", "bench.fig_overhead", str(steps), str(short_steps)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the flatness pair failed:\n{done.stderr}")
    return [
        Overhead(
            item["backend"],
            item["workload"],
            item["steps"],
            Timing(**item["timing"]),
            (int(item["full_collections"][0]), float(item["full_collections"][1])),
        )
        for item in json.loads(done.stdout)
    ]


def flatness(results: list[Overhead]) -> Row | None:
    """CPU per step of the long run against the same steps in short runs."""
    pair = [o for o in results if o.backend == FLAT_BACKEND]
    if len(pair) != 2:
        return None
    long, short = pair
    ratio = long.cpu_ms / short.cpu_ms
    return Row(
        FIGURE,
        f"in-memory, per step, CPU/step of {long.workload} vs {short.workload} "
        "(same steps, alternating in one fresh process, total CPU incl. garbage collection)",
        f"{long.cpu_ms:.3f} vs {short.cpu_ms:.3f} ms ({ratio:.2f}x)",
        f"<= {MAX_FLAT_RATIO}x",
        verdict(ratio <= MAX_FLAT_RATIO),
    )


def _collections_note(overhead: Overhead) -> str:
    if overhead.full_collections is None:
        return ""
    count, cpu_s = overhead.full_collections
    return f"; {count} full collections in its {overhead.timing.runs} rounds, {cpu_s:.2f} s CPU"


def rows(results: list[Overhead]) -> list[Row]:
    """The figure's table rows: times, CPU against the peer, CPU flatness in memory."""
    out = [
        Row(
            FIGURE,
            f"{o.backend}, {o.workload}",
            f"wall {o.wall_ms:.3f} ms/step, CPU {o.cpu_ms:.3f} ms/step (median of {o.timing.runs})"
            + _collections_note(o),
        )
        for o in results
    ]
    by_key = {(o.backend, o.workload): o for o in results}
    for label in dict.fromkeys(o.workload for o in results if o.backend == PEER):
        theirs = by_key[(PEER, label)]
        mine = by_key.get(("in-memory, per step", label))
        if mine is None:
            continue
        ratio = theirs.cpu_ms / mine.cpu_ms
        out.append(
            Row(
                FIGURE,
                f"in-memory per-step CPU/step vs durable SDK runner, {label}",
                f"{mine.cpu_ms:.3f} vs {theirs.cpu_ms:.3f} ms ({ratio:.1f}x less)",
                "below the peer's",
                verdict(mine.cpu_ms < theirs.cpu_ms),
            )
        )
    if not any(o.backend == PEER for o in results):
        out.append(
            Row(
                FIGURE,
                "in-memory CPU/step vs durable SDK runner",
                f"peer not installed (pip install {peer.PACKAGE})",
                "below the peer's",
                "SKIP",
            )
        )
    flat = flatness(results)
    if flat is not None:
        out.append(flat)
    if any(o.backend == PEER for o in results):
        out.append(Row(FIGURE, "peer versions", peer.version()))
    return out


if __name__ == "__main__":
    # The flatness pair, for _flat_pair_in_own_process: STEPS SHORT_STEPS -> JSON on stdout.
    flat_steps, short = (int(arg) for arg in sys.argv[1:3])
    print(json.dumps([asdict(o) for o in _flat_pair(_memory_env(), flat_steps, short)]))
