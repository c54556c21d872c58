"""Two drivers racing one run through the checkpoint channel, in a fixed interleaving: a
second driver takes the run over from inside a step of the first one's invocation."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from relayflow.engine import Engine
from relayflow.ports import DispatcherResolver
from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv

TAKEOVER_AT = 5
STEPS = 8


class Takeover:
    """Step bodies; the first call of step ``TAKEOVER_AT`` lets a second driver take the run."""

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()
        self.rival: Engine | None = None
        self.run_id: str | None = None

    def run(self, n: int) -> int:
        self.calls[n] += 1
        if n == TAKEOVER_AT and self.calls[n] == 1:
            assert self.rival is not None and self.run_id is not None
            # The first driver is "stuck" in this step: the second one recovers the run, in a
            # thread of its own (another process), and finishes it before this step returns.
            rival, run_id = self.rival, self.run_id
            other = threading.Thread(target=lambda: rival.recover(run_id))
            other.start()
            other.join()
        return n


@workflow(id="dur.race")
def race(data: Any, ctx: Any) -> list[int]:
    steps: Takeover = ctx.services.resolve("steps")
    return [ctx.step(f"s{n}", steps.run, n) for n in range(1, STEPS + 1)]


def run_race(env: WorkflowTestEnv, steps: Takeover) -> str:
    """Trigger the race and return its run id; the second driver finishes the run."""
    steps.rival = Engine(
        runs=env.runs,
        alarms=env.alarms,
        dispatchers=DispatcherResolver(default=env.dispatcher),
        clock=env.clock,
        checkpoints=env.checkpoints,
    )
    steps.run_id = "run-race"
    env.trigger("dur.race", run_id="run-race")
    return "run-race"


def check_race(env: WorkflowTestEnv, steps: Takeover, run_id: str) -> None:
    """The log holds the first driver's entries, the fence, then the second one's only."""
    detail = env.get_run(run_id)
    assert (detail.status, detail.output) == ("completed", list(range(1, STEPS + 1)))
    log = env.checkpoints.read(run_id, 0)
    kinds = [(e.kind, e.key) for e in log]
    first = [("step", f"s{n}") for n in range(1, TAKEOVER_AT)]
    # The last step ends the body: the save of the answer is its checkpoint.
    second = [("step", f"s{n}") for n in range(TAKEOVER_AT, STEPS)]
    assert kinds == [*first, ("fence", None), *second]
    # The first driver's step 5 finished after the fence: its checkpoint was refused and it
    # ran nothing more; each other step ran once.
    assert steps.calls[TAKEOVER_AT] == 2
    assert all(steps.calls[n] == 1 for n in range(1, STEPS + 1) if n != TAKEOVER_AT)
