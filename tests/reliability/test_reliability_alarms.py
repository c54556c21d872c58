"""Alarms that arrive twice, early or late (Scheduler is at-least-once and only minute-precise)
never run a step twice and never lose a wake-up, on the AWS driver."""

from __future__ import annotations

import pytest
from reliability_cluster import Cluster
from reliability_tally import add
from reliability_workflows import LEDGER

MINUTE = 60_000


def start_sleeper(cluster: Cluster, name: str) -> str:
    LEDGER.reset()
    run_id = cluster.process().trigger("reliability.sleeper", {}, run_id=name).id
    assert cluster.run(run_id).pending_waits == ["sleep:0"]
    return run_id


def deliver(cluster: Cluster, run_id: str, wake_at: int, times: int = 1) -> None:
    for _ in range(times):
        cluster.deliver({"runId": run_id, "wakeAt": wake_at})
        add("alarms_misdelivered")


def assert_woke_once(cluster: Cluster, run_id: str) -> None:
    done = cluster.run(run_id)
    assert done.status == "completed"
    assert done.output == "woke"
    assert LEDGER.by_step() == {f"{run_id}:before": 1, f"{run_id}:after": 1}
    add("runs_checked")


def test_early_alarms_change_nothing_and_re_arm_the_wake_time(cluster: Cluster) -> None:
    run_id = start_sleeper(cluster, "early")
    wake_at = cluster.clock.now_ms() + MINUTE

    for early in (0, 1_000, 59_999):
        cluster.clock.set(wake_at - MINUTE + early)
        deliver(cluster, run_id, wake_at)
        assert cluster.run(run_id).status == "waiting"
        assert [due for due, _, _ in cluster.armed()] == [wake_at]
    cluster.settle(MINUTE)

    assert_woke_once(cluster, run_id)


@pytest.mark.parametrize("copies", [2, 5])
def test_duplicate_alarms_at_the_wake_time_wake_the_run_once(cluster: Cluster, copies: int) -> None:
    run_id = start_sleeper(cluster, f"dup-{copies}")
    wake_at = cluster.clock.now_ms() + MINUTE
    cluster.clock.set(wake_at)

    deliver(cluster, run_id, wake_at, times=copies)
    cluster.settle()

    assert_woke_once(cluster, run_id)
    assert cluster.armed() == []


def test_a_late_alarm_still_wakes_the_run_and_a_stale_one_after_the_end_is_ignored(
    cluster: Cluster,
) -> None:
    run_id = start_sleeper(cluster, "late")
    wake_at = cluster.clock.now_ms() + MINUTE
    cluster.clock.set(wake_at + 60 * MINUTE)

    deliver(cluster, run_id, wake_at)
    deliver(cluster, run_id, wake_at)
    cluster.settle()

    assert_woke_once(cluster, run_id)


def test_a_missed_alarm_is_recovered_by_the_sweeper(cluster: Cluster) -> None:
    run_id = start_sleeper(cluster, "missed")
    for _, name, _ in cluster.armed():
        cluster._scheduler.delete_schedule(Name=name, GroupName="reliability")
    add("alarms_misdelivered")
    cluster.clock.advance(2 * MINUTE)

    swept = cluster.process().engine.sweep()

    assert swept == [run_id]
    cluster.settle()
    assert_woke_once(cluster, run_id)


def test_an_alarm_for_an_unknown_run_is_harmless(cluster: Cluster) -> None:
    deliver(cluster, "no-such-run", cluster.clock.now_ms())

    assert cluster.find("no-such-run") is None
    assert cluster.deliveries == type(cluster.deliveries)()
