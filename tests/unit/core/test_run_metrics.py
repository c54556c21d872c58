"""The engine reports every save; RunMetrics counts run ends and retried step attempts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from relayflow import FatalError, RetryPolicy, workflow
from relayflow.observability import RUNS_COMPLETED, RUNS_FAILED, STEPS_RETRIED, RunMetrics
from relayflow.testing import WorkflowTestEnv


class Counts:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value


attempts: list[int] = []


def flaky() -> str:
    attempts.append(1)
    if len(attempts) < 3:
        raise RuntimeError("not yet")
    return "ok"


def broken() -> None:
    raise FatalError("no")


@workflow(id="metrics.flaky", retry=RetryPolicy(max=5, backoff="fixed", initial="30s"))
def flaky_flow(data: Any, ctx: Any) -> str:
    return str(ctx.step("flaky", flaky))


@workflow(id="metrics.broken")
def broken_flow(data: Any, ctx: Any) -> None:
    ctx.step("broken", broken)


def test_run_ends_and_step_retries_are_counted_once_each() -> None:
    attempts.clear()
    env = WorkflowTestEnv(workflows=[flaky_flow, broken_flow])
    counts = Counts()
    env.engine.add_observer(RunMetrics(counts))

    run = env.trigger("metrics.flaky", {})
    env.run_until_idle()
    env.trigger("metrics.broken", {})

    assert env.get_run(run.id).output == "ok"
    assert counts.counts == Counter({RUNS_COMPLETED: 1, RUNS_FAILED: 1, STEPS_RETRIED: 2})


def test_a_failing_observer_never_breaks_a_run() -> None:
    class Broken:
        def on_saved(self, before: Any, after: Any) -> None:
            raise RuntimeError("observer down")

    env = WorkflowTestEnv(workflows=[broken_flow])
    env.engine.add_observer(Broken())
    assert env.trigger("metrics.broken", {}).status == "failed"
