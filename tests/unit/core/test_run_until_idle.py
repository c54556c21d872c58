"""The test environment: `run_until_idle` ignores child checks; over-deep values are refused."""

from __future__ import annotations

from typing import Any

from relayflow import workflow
from relayflow.testing import WorkflowTestEnv


@workflow(id="idle.child")
def child(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_event("go")


@workflow(id="idle.parent")
def parent(data: Any, ctx: Any) -> Any:
    ctx.sleep("1h")
    return {"child": ctx.invoke(child, data)}


def test_a_parent_waiting_on_a_blocked_child_leaves_run_until_idle_idle() -> None:
    env = WorkflowTestEnv(workflows=[parent, child])
    run = env.trigger("idle.parent", {"n": 1})

    env.run_until_idle()  # fires the sleep, starts the child, then stops: nothing else to do

    parked = env.get_run(run.id)
    assert parked.status == "waiting"
    assert env.armed_alarm(run.id) is not None  # the child check stays armed
    (child_id,) = parked.children
    env.send_event(child_id, "go", {"ok": True})
    env.run_until_idle()
    assert env.get_run(run.id).output == {"child": {"ok": True}}


def test_values_nested_too_deeply_are_refused_before_anything_is_stored() -> None:
    import pytest

    from relayflow.errors import ValidationError
    from relayflow.protocol import MAX_JSON_DEPTH

    deep: Any = 0
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    env = WorkflowTestEnv(workflows=[child])
    with pytest.raises(ValidationError, match="nests deeper"):
        env.trigger("idle.child", {"v": deep}, run_id="too-deep")
    assert env.admin.get_run("too-deep") is None
    run = env.trigger("idle.child", {})
    with pytest.raises(ValidationError, match="nests deeper"):
        env.send_event(run.id, "go", deep)
    assert env.get_run(run.id).status == "waiting"
