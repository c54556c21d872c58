"""The engine reports every save; RunMetrics counts run ends and retried step attempts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from relayflow import FatalError, RetryPolicy, workflow
from relayflow.api.metrics import RecordingMetrics
from relayflow.observability import (
    QUEUE_DEPTH,
    RUNS_COMPLETED,
    RUNS_FAILED,
    RUNS_STARTED,
    STEPS_ATTEMPTS,
    STEPS_RETRIED,
    RunMetrics,
)
from relayflow.testing import WorkflowTestEnv


class Counts(RecordingMetrics):
    """Counts and gauges in memory."""


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
    assert counts.counts == Counter(
        {
            RUNS_STARTED: 2,
            RUNS_COMPLETED: 1,
            RUNS_FAILED: 1,
            STEPS_ATTEMPTS: 4,
            STEPS_RETRIED: 2,
        }
    )
    assert counts.by_workflow == Counter(
        {
            (RUNS_STARTED, "metrics.flaky"): 1,
            (RUNS_COMPLETED, "metrics.flaky"): 1,
            (STEPS_ATTEMPTS, "metrics.flaky"): 3,
            (STEPS_RETRIED, "metrics.flaky"): 2,
            (RUNS_STARTED, "metrics.broken"): 1,
            (RUNS_FAILED, "metrics.broken"): 1,
            (STEPS_ATTEMPTS, "metrics.broken"): 1,
        }
    )


def test_a_failing_observer_never_breaks_a_run() -> None:
    class Broken:
        def on_saved(self, before: Any, after: Any) -> None:
            raise RuntimeError("observer down")

    env = WorkflowTestEnv(workflows=[broken_flow])
    env.engine.add_observer(Broken())
    assert env.trigger("metrics.broken", {}).status == "failed"


def test_flow_control_is_counted_queued_started_from_the_queue_and_rate_limited() -> None:
    from relayflow.flow import Concurrency, RateLimit
    from relayflow.observability import FLOW_DEQUEUED, FLOW_QUEUED, FLOW_RATE_LIMITED

    @workflow(id="metrics.limited", concurrency=Concurrency(limit=1, key="k"))
    async def limited(data: Any, ctx: Any) -> Any:
        return await ctx.step(
            "call", str, data["k"], rate_limit=RateLimit(key="p", limit=1, window="1m")
        )

    env = WorkflowTestEnv(workflows=[limited])
    counts = Counts()
    env.engine.add_observer(RunMetrics(counts))
    env.trigger("metrics.limited", {"k": "a"})
    env.trigger("metrics.limited", {"k": "b"})
    env.trigger("metrics.limited", {"k": "b"})
    env.run_until_idle()

    assert counts.counts[RUNS_COMPLETED] == 3
    assert (counts.counts[FLOW_QUEUED], counts.counts[FLOW_DEQUEUED]) == (1, 1)
    assert counts.counts[FLOW_RATE_LIMITED] == 2, "the second and third call waited"
    assert counts.counts[RUNS_STARTED] == 3, "the queued run counts once, when it starts"
    assert counts.measured[(QUEUE_DEPTH, "metrics.limited")] == [1]


def test_delayed_and_expired_runs_are_counted_from_their_saves() -> None:
    from relayflow.core.record import RunRecord
    from relayflow.observability import FLOW_DELAYED, FLOW_EXPIRED
    from relayflow.protocol import SerializedError

    counts = Counts()
    metrics = RunMetrics(counts)
    delayed = RunRecord.model_validate(
        {"id": "r1", "workflowId": "w", "status": "delayed", "startedAt": 0, "wakeAt": 60_000}
    )
    metrics.on_saved(None, delayed)
    metrics.on_saved(delayed, delayed)
    expired = delayed.model_copy(
        update={
            "status": "cancelled",
            "completed_at": 60_000,
            "error": SerializedError(message="ttl passed", code="TTL_EXPIRED"),
        }
    )
    metrics.on_saved(delayed, expired)
    metrics.on_saved(expired, expired)

    assert (counts.counts[FLOW_DELAYED], counts.counts[FLOW_EXPIRED]) == (1, 1)
    assert counts.counts[RUNS_STARTED] == 0, "a run that expired before it started never did"


def test_debounced_triggers_and_the_delayed_burst_run_are_counted() -> None:
    from relayflow.flow import Debounce, TriggerOptions
    from relayflow.observability import FLOW_DEBOUNCED, FLOW_DELAYED

    @workflow(id="metrics.digest")
    async def digest(data: Any, ctx: Any) -> Any:
        return data

    env = WorkflowTestEnv(workflows=[digest])
    counts = Counts()
    env.engine.add_observer(RunMetrics(counts))
    options = TriggerOptions(debounce=Debounce(key="user", delay="30s"))
    runs = [
        env.trigger("metrics.digest", {"user": "u1", "n": n}, options=options) for n in range(3)
    ]
    env.run_until_idle()

    assert {run.id for run in runs} == {runs[0].id}
    assert (counts.counts[FLOW_DEBOUNCED], counts.counts[FLOW_DELAYED]) == (2, 1)
    assert counts.counts[RUNS_COMPLETED] == 1
    assert counts.counts[RUNS_STARTED] == 1


def test_a_run_held_by_its_paused_workflow_starts_when_resumed() -> None:
    from relayflow.core.record import PauseState, RunRecord

    counts = Counts()
    metrics = RunMetrics(counts)
    held = RunRecord.model_validate(
        {"id": "r1", "workflowId": "w", "status": "paused", "startedAt": 0}
    ).model_copy(update={"pause": PauseState(at=0, by="ops", resume_to="start")})
    metrics.on_saved(None, held)
    assert counts.counts[RUNS_STARTED] == 0

    resumed = held.model_copy(update={"status": "running", "pause": None})
    metrics.on_saved(held, resumed)
    paused_mid_run = resumed.model_copy(
        update={"status": "paused", "pause": PauseState(at=1, by="ops", resume_to="running")}
    )
    metrics.on_saved(resumed, paused_mid_run)
    metrics.on_saved(paused_mid_run, resumed)

    assert counts.by_workflow[(RUNS_STARTED, "w")] == 1
