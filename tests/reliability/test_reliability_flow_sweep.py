"""Flow control under crashes and transient AWS errors: the scenario of ``reliability_flow``
(a singleton per key with a queued and a delayed run, and a debounced burst) is run once
without faults, recording every call, then again with the process killed at a call (modes
``refused`` and ``applied``, see ``fault_injection``), and again with a call failing as a
whole past botocore's retries. Recovery by the normal means must end every run as the
fault-free execution does: never two holders of the key at once, no step run beyond its
at-least-once window, the key's slots and queue empty at the end, one run for the burst.

By default every third call is swept per mode (the modes on different residues);
``RELAYFLOW_FAULT_SWEEP=full`` sweeps every call in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fault_injection import (
    FAULT_MODES,
    OUTAGE_ERRORS,
    CrashPlan,
    FaultMode,
    OutagePlan,
    RecordingSleep,
)
from reliability_cluster import Cluster
from reliability_flow import BURST, NAMES, FlowOutcome, run_flow
from reliability_tally import add, crash_point, differences, run_lost, swept
from reliability_workflows import LEDGER, runs_beyond

from relayflow.api.metrics import RUNS_DRIVEN_AGAIN


@dataclass(frozen=True)
class Baseline:
    """The fault-free execution: its calls and its outcome."""

    calls: list[str]
    outcome: FlowOutcome


@pytest.fixture(scope="module")
def baseline(module_cluster: Cluster) -> Baseline:
    plan, outcome = module_cluster.fault_free(run_flow)
    return Baseline(calls=list(plan.calls), outcome=outcome)


def more_than_twice() -> list[str]:
    """Step attempts run beyond at-least-once after one fault (again once, at most)."""
    return runs_beyond(LEDGER.counts(), lambda step: 2)


def test_the_fault_free_scenario_queues_delays_and_folds_the_burst(baseline: Baseline) -> None:
    outcome = baseline.outcome
    assert [run.status for run in outcome.singletons] == ["completed"] * len(NAMES)
    assert [run.output for run in outcome.singletons] == list(NAMES)
    assert outcome.next_run_ok
    assert [(run.status, run.output) for run in outcome.digests] == [("completed", BURST - 1)]
    assert outcome.most_at_once == 1
    assert outcome.delay_kept
    assert outcome.holders == () and outcome.queue == ()
    calls = set(baseline.calls)
    assert {"dynamodb:TransactWriteItems", "dynamodb:UpdateItem", "scheduler:CreateSchedule"} <= (
        calls
    )
    assert len(baseline.calls) >= 60  # every phase: admission, queue, release, delay, burst


def run_once(cluster: Cluster, plan: CrashPlan | OutagePlan) -> FlowOutcome:
    """The scenario on an emptied deployment under ``plan``."""
    cluster.reset()
    LEDGER.reset()
    cluster.use_plan(plan)
    return run_flow(cluster)


def judge(
    outcome: FlowOutcome, baseline: Baseline, where: str, mode: FaultMode, *, transient: bool
) -> list[str]:
    """What went wrong after one fault (counted in the totals): a run ending differently
    (failed, after a ``transient`` error), or a step run beyond at-least-once."""
    problems: list[str] = []
    wrong = differences(outcome, baseline.outcome)
    if wrong:
        run_lost(mode)
        failed = [run for run in (*outcome.singletons, *outcome.digests) if run.error_code]
        if failed and transient:
            add("runs_failed_transient", len(failed))
        problems.append(f"{where}: {'; '.join(wrong)}")
    excess = more_than_twice()
    if excess:
        add("double_executions", len(excess))
        problems.append(f"{where}: {'; '.join(excess)}")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_any_call_loses_no_run_and_leaves_no_slot_held(
    cluster: Cluster, baseline: Baseline, mode: FaultMode
) -> None:
    failures: list[str] = []
    points = swept(baseline.calls, mode)
    for kill_at in points:
        plan = CrashPlan(kill_at=kill_at, mode=mode)
        outcome = run_once(cluster, plan)
        where = f"{mode} call #{kill_at} ({baseline.calls[kill_at - 1]})"
        crash_point(mode)
        if not plan.fired:
            failures.append(f"{where}: the crash was never reached")
            continue
        add("crash_recoveries")
        failures.extend(judge(outcome, baseline, where, mode, transient=False))
    assert not failures, "\n".join(failures)
    assert len(points) >= len(baseline.calls) // 3


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_any_call_failing_past_its_retries_loses_no_run_and_leaves_no_slot_held(
    cluster: Cluster, baseline: Baseline, backoff: RecordingSleep, mode: FaultMode
) -> None:
    failures: list[str] = []
    points = swept(baseline.calls, mode, tuple(OUTAGE_ERRORS))
    for fail_at in points:
        plan = OutagePlan(cluster.injector, fail_at=fail_at, mode=mode)
        outcome = run_once(cluster, plan)
        call = baseline.calls[fail_at - 1]
        where = f"{mode} call #{fail_at} ({call})"
        add("outage_points")
        add(f"outage_points_{mode}")
        add(f"outage_points_{call.split(':')[0]}")
        injected = plan.burst.injected if plan.burst is not None else 0
        add("transient_faults", injected)
        add(f"transient_faults_{mode}", injected)
        add("runs_driven_again", cluster.metrics.counts[RUNS_DRIVEN_AGAIN])
        if not plan.fired:
            failures.append(f"{where}: the call was never failed")
            continue
        failures.extend(judge(outcome, baseline, where, mode, transient=True))
    assert not failures, "\n".join(failures)
    assert backoff.delays  # botocore retried each failed call before giving up
    assert len(points) >= len([c for c in baseline.calls if c.split(":")[0] in OUTAGE_ERRORS]) // 3
