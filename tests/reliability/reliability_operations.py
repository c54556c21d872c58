"""The operations scenario of the reliability sweeps: a waiting run is paused, its sleep comes
due while paused, and it is resumed; a run that failed during a downstream outage is
redriven; a completed run is rerun from its second step. Every action is a client request
retried with the same action id, and runs recover by the normal means only (alarms, the
sweeper, lease expiry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reliability_cluster import Cluster, Outcome
from reliability_workflows import LEDGER

from relayflow import WorkflowContext, workflow
from relayflow.sdk.retry import RetryPolicy

STEADY = "reliability.ops_steady"
FLAKY = "reliability.ops_flaky"
PAUSED, REDRIVEN, RERUN_FROM = "ops-paused", "ops-redriven", "ops-rerun-from"
#: While True, the flaky run's downstream is unavailable.
OUTAGE = {"on": False}


def act(name: str) -> str:
    """A step counted in the ledger."""
    LEDGER.record(name)
    return name


def call_downstream(name: str) -> str:
    """A step that fails while the downstream is out."""
    LEDGER.record(name)
    if OUTAGE["on"]:
        raise ConnectionError("downstream unavailable")
    return name


@workflow(id=STEADY)
async def steady_workflow(data: dict[str, Any], ctx: WorkflowContext) -> list[str]:
    """Two steps around a short sleep."""
    first: str = await ctx.step("one", act, "one")
    await ctx.sleep("10s")
    second: str = await ctx.step("two", act, "two")
    return [first, second]


@workflow(id=FLAKY, retry=RetryPolicy(max=1))
async def flaky_workflow(data: dict[str, Any], ctx: WorkflowContext) -> list[str]:
    """A step, then a call to a downstream that may be out (no retries)."""
    first: str = await ctx.step("prepare", act, "prepare")
    second: str = await ctx.step("call", call_downstream, "call")
    return [first, second]


@dataclass(frozen=True)
class OperationsOutcome:
    """What the scenario ended as, compared between a faulty and a fault-free execution."""

    paused: Outcome
    #: Whether the paused run was still paused after its sleep came due.
    held_while_paused: bool
    paused_actions: tuple[str, ...]
    redriven: Outcome
    redrive_count: int
    rerun_from: Outcome
    #: The outcome of every rerun of the completed run (exactly one).
    reruns: tuple[Outcome, ...]


def _trigger(cluster: Cluster, workflow_id: str, run_id: str) -> None:
    cluster.client_call(lambda driver: driver.trigger(workflow_id, {}, run_id=run_id))


def run_operations(cluster: Cluster) -> OperationsOutcome:
    """Pause and resume, redrive and rerun, each request retried by its client."""
    OUTAGE["on"] = False
    _trigger(cluster, STEADY, PAUSED)
    cluster.client_call(lambda d: d.admin.pause_run(PAUSED, by="oncall", action_id="pause-1"))
    cluster.clock.advance(30_000)
    cluster.settle(60_000)
    held = cluster.run(PAUSED).status == "paused"
    cluster.client_call(lambda d: d.admin.resume_run(PAUSED, by="oncall", action_id="resume-1"))
    cluster.finish(PAUSED)

    OUTAGE["on"] = True
    _trigger(cluster, FLAKY, REDRIVEN)
    cluster.finish(REDRIVEN)
    OUTAGE["on"] = False
    cluster.client_call(lambda d: d.admin.redrive_run(REDRIVEN, by="oncall", action_id="redrive-1"))
    cluster.finish(REDRIVEN)

    _trigger(cluster, STEADY, RERUN_FROM)
    cluster.finish(RERUN_FROM)
    cluster.client_call(
        lambda d: d.admin.rerun_run(RERUN_FROM, from_step="two", by="oncall", action_id="rerun-1")
    )
    reruns = cluster.run(RERUN_FROM).reruns
    for rerun_id in reruns:
        cluster.finish(rerun_id)
    return OperationsOutcome(
        paused=cluster.outcome(PAUSED),
        held_while_paused=held,
        paused_actions=tuple(a.kind for a in cluster.run(PAUSED).actions),
        redriven=cluster.outcome(REDRIVEN),
        redrive_count=cluster.run(REDRIVEN).redrive_count,
        rerun_from=cluster.outcome(RERUN_FROM),
        reruns=tuple(cluster.outcome(rerun_id) for rerun_id in reruns),
    )
