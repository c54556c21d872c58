"""A cancel reaches a running host at its next checkpoint, through the run's log."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

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


@pytest.mark.parametrize(("compensate", "compensated"), [(True, [3, 2, 1]), (False, [])])
def test_a_cancel_stops_the_body_at_its_next_checkpoint(
    compensate: bool, compensated: list[int]
) -> None:
    steps = Canceller(compensate=compensate)
    env = WorkflowTestEnv(workflows=[cancellable], services={"steps": steps})
    steps.env = env
    env.trigger("dur.cancel", run_id="run-c")
    assert env.get_run("run-c").status == "cancelled"
    # Step 3 finished, its checkpoint met the cancel: nothing after it ran (a plain cancel
    # ended the run at once: no step ran whose result nobody keeps).
    assert sorted(steps.calls) == ["s1", "s2", "s3"]
    assert all(count == 1 for count in steps.calls.values())
    assert steps.compensated == compensated
    kinds = [entry.kind for entry in env.checkpoints.read("run-c", 0)]
    assert kinds == ["step", "step", "cancel"]
