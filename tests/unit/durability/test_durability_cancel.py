"""A cancel reaches a running host at its next checkpoint, through the run's log."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv


class Canceller:
    """Step bodies; step 3 has the run cancelled (by another process) while it runs."""

    def __init__(self, *, compensate: bool = True) -> None:
        self.compensate = compensate
        self.calls: Counter[str] = Counter()
        self.env: WorkflowTestEnv | None = None
        self.compensated: list[int] = []

    def run(self, n: int) -> int:
        self.calls[f"s{n}"] += 1
        if n == 3 and self.env is not None:
            env = self.env
            compensate = self.compensate
            other = threading.Thread(
                target=lambda: env.cancel("run-c", "stop", compensate=compensate)
            )
            other.start()
            other.join()
        return n

    def undo(self, n: int) -> None:
        self.compensated.append(n)


@workflow(id="dur.cancel")
def cancellable(data: Any, ctx: Any) -> int:
    steps: Canceller = ctx.services.resolve("steps")
    total = 0
    for n in range(1, 7):
        total += ctx.step(f"s{n}", steps.run, n, compensate=steps.undo)
    return total


def test_a_cancel_stops_the_body_at_its_next_checkpoint_and_compensates() -> None:
    steps = Canceller()
    env = WorkflowTestEnv(workflows=[cancellable], services={"steps": steps})
    steps.env = env
    env.trigger("dur.cancel", run_id="run-c")
    detail = env.get_run("run-c")
    assert detail.status == "cancelled"
    # Step 3 finished, its checkpoint met the cancel: nothing after it ran.
    assert sorted(steps.calls) == ["s1", "s2", "s3"]
    assert all(count == 1 for count in steps.calls.values())
    assert steps.compensated == [3, 2, 1]
    kinds = [entry.kind for entry in env.checkpoints.read("run-c", 0)]
    assert kinds == ["step", "step", "cancel"]


def test_a_plain_cancel_stops_the_body_at_its_next_checkpoint() -> None:
    steps = Canceller(compensate=False)
    env = WorkflowTestEnv(workflows=[cancellable], services={"steps": steps})
    steps.env = env
    env.trigger("dur.cancel", run_id="run-c")
    detail = env.get_run("run-c")
    assert detail.status == "cancelled"
    # The run ended at the cancel; the host learnt of it at step 3's checkpoint and ran
    # nothing more (no step whose result nobody keeps), compensating nothing.
    assert sorted(steps.calls) == ["s1", "s2", "s3"]
    assert steps.compensated == []
    kinds = [entry.kind for entry in env.checkpoints.read("run-c", 0)]
    assert kinds == ["step", "step", "cancel"]
