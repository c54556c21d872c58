"""The console's transition log: one line per visible change of a run, none for lease saves."""

from __future__ import annotations

from typing import Any

from examples.order_saga import fulfil_order, print_label
from relayflow.local.transitions_log import TransitionLog
from relayflow.testing import WorkflowTestEnv

SHIPMENT = {"orderId": "o-1", "carrier": "UPS", "trackingNumber": "1Z"}


def logged_env() -> tuple[WorkflowTestEnv, list[str]]:
    env = WorkflowTestEnv(workflows=[fulfil_order, print_label])
    lines: list[str] = []
    env.engine.add_observer(TransitionLog(lines.append, env.now))
    return env, lines


def fields(line: str) -> list[str]:
    # time, run id, workflow, status, then the free text
    return line.split("  ", 4)


def test_each_visible_transition_is_one_line() -> None:
    env, lines = logged_env()
    run = env.trigger(fulfil_order, {"id": "o-1", "total": 5, "items": ["x"], "coolingOff": "3s"})
    env.advance("3s")
    env.send_event(run.id, "shipment.created", SHIPMENT)

    own = [fields(line) for line in lines if fields(line)[1] == run.id]
    assert [f[3] for f in own] == [
        "running",
        "waiting",
        "running",
        "waiting",
        "running",
        "waiting",
        "running",
        "completed",
    ]
    assert own[1][4] == "waits on sleep:0 until 22:13:23 (in 3.0s)"
    assert own[2][4] == "after wait sleep:0 resolved"
    assert own[3][4] == "waits on event:shipment.created:1 (timeout in 2d0h)"
    assert own[5][4] == "waits on invoke:orders.label:2"
    assert own[7][4].startswith('output {"charge":')
    child = [fields(line) for line in lines if fields(line)[2] == "orders.label"]
    assert [f[3] for f in child] == ["running", "completed"]


def test_a_failed_run_shows_its_error() -> None:
    env, lines = logged_env()
    run = env.trigger(fulfil_order, {"id": "o-1", "total": 5, "items": []})
    last = fields([line for line in lines if fields(line)[1] == run.id][-1])
    assert last[3] == "failed"
    assert last[4] == "error EMPTY_ORDER: order o-1 has no items"


def test_reads_pass_through_to_the_store() -> None:
    env, _ = logged_env()
    run = env.trigger(fulfil_order, {"id": "o-1", "total": 5, "items": ["x"]})
    assert env.engine.runs.get(run.id) is not None
    assert env.list_runs().runs[0].id == run.id


def test_each_failed_attempt_prints_its_type_and_traceback_once() -> None:
    from relayflow.sdk import RetryPolicy, workflow

    def lookup(order: dict[str, Any]) -> Any:
        return order["id"]

    @workflow(id="log.failing")
    def failing(data: Any, ctx: Any) -> Any:
        ctx.sleep("1s")
        return ctx.step("lookup", lookup, {}, retry=RetryPolicy(max=2, initial="1m"))

    env = WorkflowTestEnv(workflows=[failing])
    lines: list[str] = []
    env.engine.add_observer(TransitionLog(lines.append, env.now))
    run = env.trigger(failing)
    env.advance("1s")
    env.advance("1m")  # the retry: an invocation that replays the first failed attempt

    failures = [line for line in lines if " failed: " in line.split("\n")[0]]
    assert [f.split("\n")[0].split("  ", 2)[2] for f in failures] == [
        "step lookup attempt 1 failed: KeyError: 'id'",
        "step lookup attempt 2 failed: KeyError: 'id'",
    ]
    for failure in failures:
        assert failure.split("\n")[1] == "    Traceback (most recent call last):"
        assert 'test_local_transitions_log.py", line' in failure
        assert "in lookup\n" in failure
        assert failure.endswith("    KeyError: 'id'")
    last = fields([line for line in lines if fields(line)[1] == run.id][-1])
    assert last[3:] == ["failed", "error KeyError: 'id'"]
