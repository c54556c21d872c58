"""Durability does not depend on how a dispatcher was built: an inline step host built without
a checkpoint log gets the engine's, so each step is durable before the body goes on, and a
crash (in either fault mode) re-runs only the attempt it interrupted. The run records the
durability it had; a setting turns per-invocation durability into a refusal."""

from __future__ import annotations

from typing import Any

import pytest
from fault_injection import FAULT_MODES, CrashPlan, FaultMode
from reliability_cluster import Cluster
from reliability_workflows import LEDGER

from relayflow import WorkflowContext, workflow
from relayflow.adapters.aws.checkpoints import log_sk
from relayflow.core.settings import CoreSettings

STEPS = 10
KEY = "ten-1"
RUN_ID = f"idem-reliability.ten-{KEY}"


def _record(n: int) -> int:
    LEDGER.record(f"s{n}")
    return n


@workflow(id="reliability.ten")
async def ten_steps(data: dict[str, Any], ctx: WorkflowContext) -> int:
    total = 0
    for n in range(1, STEPS + 1):
        total += await ctx.step(f"s{n}", _record, n)
    return total


@workflow(id="reliability.ten.batched", checkpoint="batched")
async def ten_batched(data: dict[str, Any], ctx: WorkflowContext) -> int:
    return await ten_steps.fn(data, ctx)  # type: ignore[no-any-return]


@pytest.fixture
def cluster(cluster_backend: None) -> Cluster:
    """A deployment whose inline step host was built without a checkpoint log."""
    built = Cluster(host_log=False)
    built.reset()
    LEDGER.reset()
    return built


def start(cluster: Cluster, workflow_id: str = "reliability.ten") -> None:
    cluster.client_call(lambda driver: driver.trigger(workflow_id, {}, idempotency_key=KEY))


def step_runs() -> list[int]:
    """Executions of s1..s10."""
    by_step = LEDGER.by_step()
    return [by_step.get(f"{RUN_ID}:s{n}", 0) for n in range(1, STEPS + 1)]


def test_ten_steps_on_a_host_built_without_a_log_cost_a_checkpoint_write_each(
    cluster: Cluster,
) -> None:
    plan = CrashPlan()
    cluster.use_plan(plan)
    start(cluster)
    detail = cluster.run(RUN_ID)
    assert (detail.status, detail.output) == ("completed", sum(range(1, STEPS + 1)))
    assert detail.durability == "per_step"
    log_writes = [sk for sk in plan.written if sk.startswith("log#")]
    assert log_writes == [log_sk(n) for n in range(1, STEPS + 1)]
    assert step_runs() == [1] * STEPS


@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_a_checkpoint_reruns_at_most_that_step(
    cluster: Cluster, mode: FaultMode
) -> None:
    baseline = CrashPlan()
    cluster.use_plan(baseline)
    start(cluster)
    kill_at = baseline.written.index(log_sk(5)) + 1  # step s5's checkpoint
    cluster.reset()
    LEDGER.reset()
    plan = CrashPlan(kill_at=kill_at, mode=mode)
    cluster.use_plan(plan)
    start(cluster)
    assert plan.fired
    detail = cluster.finish(RUN_ID)
    assert (detail.status, detail.output) == ("completed", sum(range(1, STEPS + 1)))
    # Refused: s5's checkpoint never landed, so s5 (and only s5) runs again. Applied: it
    # landed before the process died, so nothing runs again.
    again = [1] * STEPS
    if mode == "refused":
        again[4] = 2
    assert step_runs() == again


def test_a_batched_workflow_is_recorded_as_durable_per_invocation(cluster: Cluster) -> None:
    start(cluster, "reliability.ten.batched")
    detail = cluster.run(f"idem-reliability.ten.batched-{KEY}")
    assert (detail.status, detail.durability) == ("completed", "per_invocation")


def test_requiring_per_step_durability_refuses_a_batched_workflow_before_it_runs(
    cluster_backend: None,
) -> None:
    cluster = Cluster(core_settings=CoreSettings(require_per_step=True))
    cluster.reset()
    LEDGER.reset()
    start(cluster, "reliability.ten.batched")
    detail = cluster.run(f"idem-reliability.ten.batched-{KEY}")
    assert detail.status == "failed"
    assert detail.error is not None and detail.error.code == "durability_unavailable"
    assert "checkpoint='batched'" in detail.error.message
    assert LEDGER.by_step() == {}
