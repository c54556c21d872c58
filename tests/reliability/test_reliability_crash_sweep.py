"""Kill the process at every AWS call (and every step-host dispatch) along a saga on the AWS
driver; recovery by the normal means must end the run exactly as a fault-free run does, and
no step may run more often than at-least-once (or at-most-once) allows.

Each crash has a mode (see ``fault_injection``): ``refused``, the process dies before the call
reaches the service, or ``applied``, the service applied the call and the answer died with
the process. By default every third call is swept in each mode (on different residues);
``RELAYFLOW_FAULT_SWEEP=full`` sweeps every call in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fault_injection import FAULT_MODES, CrashPlan, FaultMode
from reliability_cluster import Cluster, Outcome
from reliability_saga import run_saga, saga_run_id
from reliability_tally import FULL_SWEEP, add, crash_point, run_lost
from reliability_workflows import LEDGER, runs_beyond

KEY = "o-1"
RUN_ID = saga_run_id(KEY)
#: A crash between a run's save and the start of its child run, or between a child's end
#: and the resumption of its parent, must not leave the parent waiting forever (see the two
#: tests at the end): the sweep fails on any run lost that way.
TOLERATE_LOST_CHILD_LINKS = False
#: Steps whose attempts must never run twice (``semantics="at_most_once"``).
AT_MOST_ONCE = frozenset({f"{RUN_ID}:charge"})


@dataclass(frozen=True)
class Baseline:
    """The fault-free run: its calls (and the sort key each wrote), outcome and effects."""

    calls: list[str]
    written: list[str]
    outcome: Outcome
    steps: frozenset[str]


@pytest.fixture(scope="module")
def baseline(module_cluster: Cluster) -> Baseline:
    plan, outcome = module_cluster.fault_free(lambda cluster: run_saga(cluster, KEY))
    return Baseline(
        calls=list(plan.calls),
        written=list(plan.written),
        outcome=outcome,
        steps=frozenset(LEDGER.by_step()),
    )


def excess_executions(counts: dict[tuple[str, int], int]) -> list[str]:
    """Step attempts that ran more often than allowed after one crash: an at-most-once
    attempt never re-runs; an at-least-once one re-runs at most once (it finished but its
    result was not checkpointed when the process died)."""
    return runs_beyond(counts, lambda step: 1 if step in AT_MOST_ONCE else 2)


def sweep_points(total: int, mode: FaultMode) -> list[int]:
    """The crash points swept: all of them, or every third (modes on different residues)."""
    if FULL_SWEEP:
        return list(range(1, total + 1))
    start = 1 if mode == "refused" else 2
    return list(range(start, total + 1, 3))


def test_the_fault_free_saga_crosses_every_service_and_ends_compensated(
    baseline: Baseline,
) -> None:
    kinds = {call.split(":")[0] for call in baseline.calls}
    assert {"dynamodb", "scheduler", "host"} <= kinds
    assert len(baseline.calls) >= 30  # enough crash points to cover every phase of the saga
    assert baseline.outcome.status == "compensated"
    assert baseline.outcome.error_code == "AUDIT_FAILED"
    assert baseline.outcome.compensations == (("charge", "ok"), ("reserve", "ok"))
    assert baseline.outcome.children == (("completed", {"label": "lbl-o-1", "carrier": "UPS"}),)
    assert {"release", "refund"} <= baseline.steps


def crash_once(cluster: Cluster, kill_at: int, mode: FaultMode) -> tuple[CrashPlan, Outcome]:
    """Run the saga once with the process killed at call ``kill_at``."""
    cluster.reset()
    LEDGER.reset()
    plan = CrashPlan(kill_at=kill_at, mode=mode)
    cluster.use_plan(plan)
    return plan, run_saga(cluster, KEY)


def call_index(baseline: Baseline, name: str, occurrence: int) -> int:
    """The 1-based index of the ``occurrence``-th call named ``name`` in the fault-free run."""
    indexes = [i for i, call in enumerate(baseline.calls, 1) if call == name]
    return indexes[occurrence - 1]


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_any_call_is_recovered_to_the_same_end(
    cluster: Cluster, baseline: Baseline, mode: FaultMode
) -> None:
    failures: list[str] = []
    known: list[str] = []
    points = sweep_points(len(baseline.calls), mode)
    for kill_at in points:
        plan, outcome = crash_once(cluster, kill_at, mode)
        where = f"{mode} call #{kill_at} ({baseline.calls[kill_at - 1]})"
        crash_point(mode)
        if not plan.fired:
            failures.append(f"{where}: the crash was never reached")
            continue
        add("crash_recoveries")
        if outcome != baseline.outcome:
            run_lost(mode)
            lost_link = cluster.lost_child_link(RUN_ID)
            if lost_link is not None and TOLERATE_LOST_CHILD_LINKS:
                known.append(f"{where}: {lost_link}")
                continue
            failures.append(f"{where}: ended as {outcome}, expected {baseline.outcome}")
        excess = excess_executions(LEDGER.counts())
        if excess:
            add("double_executions", len(excess))
            failures.append(f"{where}: {'; '.join(excess)}")
        missing = baseline.steps - set(LEDGER.by_step())
        if missing:
            failures.append(f"{where}: steps never ran: {sorted(missing)}")
    assert not failures, "\n".join(failures)
    assert len(points) >= len(baseline.calls) // 3
    assert len(known) < len(points) // 4, "\n".join(known)


def test_a_crash_before_the_child_is_inserted_still_starts_the_child(
    cluster: Cluster, baseline: Baseline
) -> None:
    # The child's insert is the first write after the parent registered the RUN wait.
    first_dispatch_after_sleep = call_index(baseline, "host:Dispatch", 4)
    # The parent's save: its header write (after the pages it makes visible, if any).
    registered = next(
        n
        for n in range(first_dispatch_after_sleep + 1, len(baseline.calls) + 1)
        if baseline.calls[n - 1] == "dynamodb:PutItem"
    )

    _, outcome = crash_once(cluster, registered, "applied")

    assert cluster.lost_child_link(RUN_ID) is None
    assert outcome == baseline.outcome


def test_a_crash_after_the_child_ended_still_resumes_the_parent(
    cluster: Cluster, baseline: Baseline
) -> None:
    child_answer = call_index(baseline, "host:Dispatch", 5)
    # The child's terminal save: the first write after its last answer.
    child_saved = next(
        n
        for n in range(child_answer + 1, len(baseline.calls) + 1)
        if baseline.calls[n - 1] == "dynamodb:PutItem"
    )

    _, outcome = crash_once(cluster, child_saved, "applied")

    assert cluster.lost_child_link(RUN_ID) is None
    assert outcome == baseline.outcome


def lease_renewals(baseline: Baseline) -> list[int]:
    """The 1-based indexes of the fault-free run's lease renewals: header writes made while
    an invocation is in flight, before its host wrote its first checkpoint."""
    first_dispatch = call_index(baseline, "host:Dispatch", 1)
    first_checkpoint = next(
        n
        for n, sk in enumerate(baseline.written, 1)
        if n > first_dispatch and sk.startswith("log#")
    )
    return [
        n
        for n in range(first_dispatch + 1, first_checkpoint)
        if baseline.calls[n - 1] == "dynamodb:PutItem" and baseline.written[n - 1] == "#run"
    ]


@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_the_lease_renewal_is_recovered_to_the_same_end(
    cluster: Cluster, baseline: Baseline, mode: FaultMode
) -> None:
    # The reserve step works past a third of the lease: its driver renews the lease once.
    (renewal,) = lease_renewals(baseline)

    plan, outcome = crash_once(cluster, renewal, mode)

    assert plan.fired
    assert outcome == baseline.outcome
    assert not excess_executions(LEDGER.counts())
