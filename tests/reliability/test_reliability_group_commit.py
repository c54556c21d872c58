"""A map whose branches share checkpoint writes (group commit): a crash at a random point of
it re-runs no item whose result was durable, and each item in flight at most once more.

The deployment runs on the atomic moto shim with every DynamoDB write delayed a little (moto
answers at once; a real write takes milliseconds, which is when the entries of other branches
become ready and join the next write). A fault-free run shows that entries were grouped; then
the process is killed at randomly chosen calls of the run (before the call reaches the
service, or after it was applied and its answer lost), recovered by the normal means, and
the ledger of step executions is compared with what the log held at the moment of the crash.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fault_injection import FAULT_MODES, CrashPlan, FaultMode
from reliability_cluster import Cluster, Outcome
from reliability_tally import add, crash_point, run_lost
from reliability_workflows import HALT, LEDGER, runs_beyond

from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.core.checkpoints import expand
from relayflow.protocol import CheckpointEntry

KEY = "g"
RUN_ID = f"idem-reliability.fanout-{KEY}"
ITEMS = 24
CONCURRENCY = 8
#: Added to each DynamoDB write (a real write takes milliseconds; moto's none).
WRITE_LATENCY_S = 0.004
#: The threads a step host's invocation runs in.
THREADS = ("relayflow-loop", "relayflow-step", "relayflow-checkpoint")
#: Crash points per mode, drawn from the fault-free run's calls with a fixed seed.
POINTS = 8


@pytest.fixture(scope="module")
def module_cluster(cluster_backend: None) -> Iterator[Cluster]:
    cluster = Cluster()
    client = cluster.clients.dynamodb()

    def delay(**_: Any) -> None:
        time.sleep(WRITE_LATENCY_S)

    client.meta.events.register("before-call.dynamodb.PutItem", delay)
    start_process = cluster.process

    def process() -> Any:
        # Processes run one after the other here: the last one's threads (its event loop,
        # steps, checkpoint waits) end before the next one starts, running nothing more.
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and thread.name.startswith(THREADS):
                thread.join(timeout=5)
        HALT.resume()
        return start_process()

    cluster.process = process  # type: ignore[method-assign]
    yield cluster
    client.meta.events.unregister("before-call.dynamodb.PutItem", delay)


def run_fanout(cluster: Cluster) -> Outcome:
    """Trigger the fan-out run (retried by its client) and recover it by the normal means."""
    cluster.client_call(
        lambda driver: driver.trigger(
            "reliability.fanout",
            {"items": ITEMS, "concurrency": CONCURRENCY},
            idempotency_key=KEY,
        )
    )
    cluster.finish(RUN_ID)
    return cluster.outcome(RUN_ID)


class Log:
    """The run's checkpoint log, read with clients no fault is injected into."""

    def __init__(self, cluster: Cluster) -> None:
        self._log = DynamoDBCheckpointLog(
            cluster.settings.require("table_name"),
            client_factory=AwsClients(region=cluster.settings.region).dynamodb,
            clock=cluster.clock,
        )

    def entries(self) -> list[CheckpointEntry]:
        return self._log.read(RUN_ID, 0)

    def durable_steps(self) -> set[str]:
        return {f"{RUN_ID}:{e.key}" for e in expand(self.entries()) if e.kind == "step" and e.key}


class InFlight:
    """At the moment of the crash: the item steps that had run and were not durable yet."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self.steps: frozenset[str] | None = None

    def __call__(self) -> None:
        HALT.halt(self._record)

    def _record(self) -> None:
        ran = {step for (step, _), count in LEDGER.counts().items() if count}
        self.steps = frozenset(ran - self._log.durable_steps())


@pytest.fixture(scope="module")
def baseline(module_cluster: Cluster) -> tuple[int, Outcome]:
    """The fault-free run's number of calls and its outcome."""
    plan, outcome = module_cluster.fault_free(run_fanout)
    return len(plan.calls), outcome


def test_concurrent_items_share_checkpoint_writes_and_the_run_completes(cluster: Cluster) -> None:
    LEDGER.reset()
    outcome = run_fanout(cluster)

    entries = Log(cluster).entries()
    grouped = [e for e in entries if e.kind == "group"]
    assert grouped, "no two entries shared a write"
    items = [e for e in expand(entries) if e.kind == "step" and e.key and "/item-" in e.key]
    assert len(items) == ITEMS  # each item's step is in the log once
    assert len(entries) < 2 * ITEMS  # fewer writes than a step and a completion per item
    assert outcome == cluster.outcome(RUN_ID)
    detail = cluster.run(RUN_ID)
    assert detail.status == "completed"
    assert detail.output == {"items": list(range(ITEMS))}
    assert all(n == 1 for n in LEDGER.by_step().values())
    assert len(LEDGER.by_step()) == ITEMS


@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_a_random_point_of_the_map_re_runs_no_completed_item(
    cluster: Cluster, baseline: tuple[int, Outcome], mode: FaultMode
) -> None:
    calls, expected = baseline
    # Grouping makes the number of calls vary from run to run: points near the end may not
    # be reached, so they are drawn from the first three quarters.
    points = sorted(random.Random(f"group-commit-{mode}").sample(range(1, calls * 3 // 4), POINTS))
    failures: list[str] = []
    fired = 0
    for kill_at in points:
        cluster.reset()
        LEDGER.reset()
        in_flight = InFlight(Log(cluster))
        plan = CrashPlan(kill_at=kill_at, mode=mode, on_fire=in_flight)
        cluster.use_plan(plan)
        outcome = run_fanout(cluster)
        where = f"{mode} call #{kill_at}"
        crash_point(mode)
        if not plan.fired or in_flight.steps is None:
            continue
        fired += 1
        add("crash_recoveries")
        if outcome != expected:
            run_lost(mode)
            failures.append(f"{where}: ended as {outcome}, expected {expected}")
        excess = runs_beyond(
            LEDGER.counts(), lambda step, allowed=in_flight.steps: 2 if step in allowed else 1
        )
        if excess:
            add("double_executions", len(excess))
            failures.append(f"{where}: {'; '.join(excess)}")
    assert not failures, "\n".join(failures)
    assert fired >= POINTS // 2, f"only {fired} of {POINTS} crash points were reached"
