"""Per-step durability in memory: a crash re-runs only the interrupted attempt, a checkpoint
neither ends the invocation nor replays the body, batching stays an explicit choice."""

from __future__ import annotations

from collections import Counter
from typing import Any

from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv, crash


class Steps:
    """Counts step calls; crashes the host inside one chosen call."""

    def __init__(self, crash_at: int | None) -> None:
        self.calls: Counter[int] = Counter()
        self.crash_at = crash_at

    def run(self, n: int) -> int:
        self.calls[n] += 1
        if n == self.crash_at and self.calls[n] == 1:
            crash()
        return n * n


def _thirty(data: Any, ctx: Any) -> int:
    steps: Steps = ctx.services.resolve("steps")
    return sum(ctx.step(f"s{n}", steps.run, n) for n in range(1, 31))


per_step = workflow(id="dur.thirty")(_thirty)
batched = workflow(id="dur.thirty.batched", checkpoint="batched")(_thirty)


def test_a_crash_inside_step_26_reruns_only_step_26() -> None:
    steps = Steps(crash_at=26)
    env = WorkflowTestEnv(workflows=[per_step], services={"steps": steps})
    run = env.trigger("dur.thirty")
    assert run.status == "running"  # the host died; the run is still leased
    recovered = env.recover(run.id)
    assert recovered.status == "completed"
    assert recovered.output == sum(n * n for n in range(1, 31))
    assert all(steps.calls[n] == 1 for n in range(1, 26))
    assert steps.calls[26] == 2
    assert all(steps.calls[n] == 1 for n in range(27, 31))


def test_per_step_checkpoints_run_the_body_once() -> None:
    steps = Steps(crash_at=None)
    env = WorkflowTestEnv(workflows=[per_step], services={"steps": steps})
    run = env.trigger("dur.thirty")
    record = env.runs.get(run.id)
    assert record is not None
    assert (record.status, record.invocation_count) == ("completed", 1)
    # One entry per step but the last, which ends the body: the answer's save holds it.
    assert record.checkpoint_seq == 29


def test_batched_mode_reruns_every_step_since_the_last_answer() -> None:
    steps = Steps(crash_at=26)
    env = WorkflowTestEnv(workflows=[batched], services={"steps": steps})
    run = env.trigger("dur.thirty.batched")
    recovered = env.recover(run.id)
    assert recovered.status == "completed"
    assert all(steps.calls[n] == 2 for n in range(1, 27))
    assert env.checkpoints.read(run.id, 0)[0].kind == "fence"
