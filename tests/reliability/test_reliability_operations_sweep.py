"""Operator actions under crashes and transient AWS errors: the scenario of
``reliability_operations`` (pause and resume, redrive, rerun from a step) is run once
without faults, recording every call, then again with the process killed at a call (modes
``refused`` and ``applied``, see ``fault_injection``), and again with a call failing as a
whole past botocore's retries. The client retries each action with the same action id;
every run must end as in the fault-free execution, each action applied once (one redrive,
one rerun), and no step run beyond its at-least-once window.

By default every third call is swept per mode; ``RELAYFLOW_FAULT_SWEEP=full`` sweeps every
call in both modes.
"""

from __future__ import annotations

import pytest
from fault_injection import FAULT_MODES, OUTAGE_ERRORS, CrashPlan, FaultMode, OutagePlan
from reliability_cluster import Cluster
from reliability_operations import OperationsOutcome, run_operations
from reliability_tally import add, crash_point, differences, run_lost, swept
from reliability_workflows import LEDGER, runs_beyond


@pytest.fixture(scope="module")
def baseline(module_cluster: Cluster) -> tuple[list[str], OperationsOutcome]:
    plan, outcome = module_cluster.fault_free(run_operations)
    return list(plan.calls), outcome


def test_the_fault_free_scenario_pauses_redrives_and_reruns(
    baseline: tuple[list[str], OperationsOutcome],
) -> None:
    calls, outcome = baseline
    assert outcome.held_while_paused
    assert outcome.paused.status == "completed"
    assert outcome.paused_actions == ("pause", "resume")
    assert (outcome.redriven.status, outcome.redriven.output) == (
        "completed",
        ["prepare", "call"],
    )
    assert outcome.redrive_count == 1
    assert [(r.status, r.output) for r in outcome.reruns] == [("completed", ["one", "two"])]
    assert len(calls) >= 30


def _judge(
    outcome: OperationsOutcome, expected: OperationsOutcome, where: str, mode: str
) -> list[str]:
    problems: list[str] = []
    wrong = differences(outcome, expected)
    if wrong:
        run_lost(mode)
        problems.append(f"{where}: {'; '.join(wrong)}")
    # The redriven step ran once in the outage and once after the redrive: one fault may
    # run either once more.
    excess = runs_beyond(LEDGER.counts(), lambda step: 3 if "call" in step else 2)
    if excess:
        add("double_executions", len(excess))
        problems.append(f"{where}: {'; '.join(excess)}")
    return problems


def _run_once(cluster: Cluster, plan: CrashPlan | OutagePlan) -> OperationsOutcome:
    cluster.reset()
    LEDGER.reset()
    cluster.use_plan(plan)
    return run_operations(cluster)


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_any_call_applies_every_action_once(
    cluster: Cluster, baseline: tuple[list[str], OperationsOutcome], mode: FaultMode
) -> None:
    calls, expected = baseline
    failures: list[str] = []
    for kill_at in swept(calls, mode):
        plan = CrashPlan(kill_at=kill_at, mode=mode)
        outcome = _run_once(cluster, plan)
        where = f"{mode} call #{kill_at} ({calls[kill_at - 1]})"
        crash_point(mode)
        if not plan.fired:
            failures.append(f"{where}: the crash was never reached")
            continue
        add("crash_recoveries")
        failures.extend(_judge(outcome, expected, where, mode))
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_any_call_failing_past_its_retries_applies_every_action_once(
    cluster: Cluster, baseline: tuple[list[str], OperationsOutcome], mode: FaultMode
) -> None:
    calls, expected = baseline
    failures: list[str] = []
    for fail_at in swept(calls, mode, tuple(OUTAGE_ERRORS)):
        plan = OutagePlan(cluster.injector, fail_at=fail_at, mode=mode)
        outcome = _run_once(cluster, plan)
        call = calls[fail_at - 1]
        where = f"{mode} call #{fail_at} ({call})"
        add("outage_points")
        add(f"outage_points_{mode}")
        add(f"outage_points_{call.split(':')[0]}")
        injected = plan.burst.injected if plan.burst is not None else 0
        add("transient_faults", injected)
        add(f"transient_faults_{mode}", injected)
        if not plan.fired:
            failures.append(f"{where}: the call was never failed")
            continue
        failures.extend(_judge(outcome, expected, where, mode))
    assert not failures, "\n".join(failures)
