"""Races on the AWS driver (moto, in process), each request in its own process and thread:
concurrent events and alarms into one run, concurrent triggers with one idempotency key, and
a cancel racing a run's last step."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from reliability_cluster import Cluster
from reliability_tally import FULL_SWEEP, add
from reliability_workflows import LEDGER

from relayflow.errors import RunTerminalError

CANCEL_RACES = 24 if FULL_SWEEP else 8


#: Every test here is repeated by ``make test-races``. moto applies each request atomically
#: (``relayflow.testing.aws.mock_aws``), as the real services do.
pytestmark = pytest.mark.race


def race(actions: Sequence[Callable[[], Any]]) -> list[Any]:
    """Start every action at the same moment (one thread each); results or exceptions."""
    barrier = threading.Barrier(len(actions))

    def run(action: Callable[[], Any]) -> Any:
        barrier.wait()
        try:
            return action()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=len(actions)) as pool:
        results = list(pool.map(run, actions))
    add("races")
    add("race_operations", len(actions))
    return results


def test_fifty_concurrent_events_and_alarms_are_each_consumed_once(cluster: Cluster) -> None:
    LEDGER.reset()
    count = 50
    run_id = cluster.process().trigger("reliability.collector", {"count": count}).id

    def send(n: int) -> Callable[[], Any]:
        return lambda: cluster.process().send_event(run_id, "item", {"n": n}, event_id=f"e{n}")

    def alarm() -> Any:
        return cluster.process().engine.drive_from_event({"runId": run_id, "wakeAt": 0})

    results = race([send(n) for n in range(count)] + [alarm for _ in range(10)])
    cluster.settle()

    errors = [r for r in results if isinstance(r, Exception)]
    assert errors == []
    done = cluster.run(run_id)
    assert done.status == "completed"
    assert done.output == {"items": list(range(count))}
    assert LEDGER.overlaps == []
    assert set(LEDGER.counts().values()) == {1}
    assert len(LEDGER.counts()) == count
    add("runs_checked")


def test_duplicate_events_in_a_race_are_consumed_once(cluster: Cluster) -> None:
    LEDGER.reset()
    run_id = cluster.process().trigger("reliability.collector", {"count": 2}).id

    def send(n: int) -> Callable[[], Any]:
        return lambda: cluster.process().send_event(run_id, "item", {"n": n}, event_id=f"e{n}")

    race([send(n % 2) for n in range(20)])
    cluster.settle()

    done = cluster.run(run_id)
    assert done.status == "completed"
    assert done.output == {"items": [0, 1]}
    assert set(LEDGER.counts().values()) == {1}
    add("runs_checked")


def test_a_hundred_concurrent_triggers_with_one_key_start_one_run(cluster: Cluster) -> None:
    LEDGER.reset()

    def trigger(n: int) -> Callable[[], Any]:
        return lambda: cluster.process().trigger(
            "reliability.once", {"value": n}, idempotency_key="same-key"
        )

    results = race([trigger(n) for n in range(100)])
    cluster.settle()

    errors = [r for r in results if isinstance(r, Exception)]
    assert errors == []
    assert {r.id for r in results} == {"idem-reliability.once-same-key"}
    runs = cluster.process().admin.list_runs(workflow="reliability.once").runs
    assert [r.id for r in runs] == ["idem-reliability.once-same-key"]
    done = cluster.run("idem-reliability.once-same-key")
    assert done.status == "completed"
    assert done.output == {"value": done.input["value"]}
    assert LEDGER.by_step() == {"idem-reliability.once-same-key:body": 1}
    add("runs_checked")


@pytest.mark.parametrize("signal_first", [True, False], ids=["signal-first", "cancel-first"])
def test_a_cancel_racing_the_last_step_is_never_lost(cluster: Cluster, signal_first: bool) -> None:
    outcomes: dict[str, int] = {}
    for attempt in range(CANCEL_RACES):
        LEDGER.reset()
        run_id = cluster.process().trigger("reliability.finisher", {}, run_id=f"f-{attempt}").id

        def signal(run_id: str = run_id) -> Any:
            return cluster.process().send_signal(run_id, "go", None, signal_id="go-1")

        def cancel(run_id: str = run_id) -> Any:
            return cluster.process().admin.cancel_run(run_id, reason="customer changed mind")

        actions = [signal, cancel] if signal_first else [cancel, signal]
        results = race(actions)
        cluster.settle()
        cancel_result = results[actions.index(cancel)]
        final = cluster.run(run_id)

        if isinstance(cancel_result, RunTerminalError):
            assert final.status == "completed", run_id
            assert final.output == "done"
        else:
            assert not isinstance(cancel_result, Exception), cancel_result
            assert final.status == "cancelled", run_id
        assert LEDGER.overlaps == []
        assert all(count == 1 for count in LEDGER.counts().values())
        outcomes[final.status] = outcomes.get(final.status, 0) + 1
        add("runs_checked")
    assert set(outcomes) <= {"completed", "cancelled"}
