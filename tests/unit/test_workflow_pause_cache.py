"""The workflow pause marks as ``WorkflowTestEnv`` wires them (as the AWS driver does): the
engine reads them through ``PausedWorkflows``, so a pause made through the engine holds the
next trigger at once, and one another process writes to the store within 5 seconds."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow import workflow
from relayflow.operations.paused import CACHE_TTL_MS, PausedWorkflows
from relayflow.operations.ports import WorkflowPause
from relayflow.testing import WorkflowTestEnv

pytestmark = pytest.mark.usefixtures("clean_registry")

MARK = WorkflowPause(workflow_id="ops.wait", environment="production", at=0, by="ops")


@pytest.fixture
def env() -> WorkflowTestEnv:
    @workflow(id="ops.wait")
    async def wait(data: Any, ctx: Any) -> Any:
        return await ctx.wait_for_signal("go")

    return WorkflowTestEnv(workflows=[wait], environment="production")


def pauses_of(env: WorkflowTestEnv) -> PausedWorkflows:
    pauses = env.engine.workflow_pauses
    assert isinstance(pauses, PausedWorkflows)
    return pauses


def test_a_pause_through_the_engine_holds_the_next_run_at_once(env: WorkflowTestEnv) -> None:
    assert env.trigger("ops.wait").status == "waiting"

    assert pauses_of(env).pause(MARK) is True
    held = env.trigger("ops.wait")
    other_environment = env.trigger("ops.wait", environment="preview")
    assert pauses_of(env).resume("ops.wait", "production") == MARK
    after = env.trigger("ops.wait")

    assert held.status == "paused"
    assert other_environment.status == "waiting"
    assert after.status == "waiting"


def test_a_mark_another_process_writes_is_seen_within_five_seconds(env: WorkflowTestEnv) -> None:
    assert env.trigger("ops.wait").status == "waiting"

    # Straight into the store, as another process's pause lands: this one's cache holds.
    assert pauses_of(env).store.pause(MARK) is True
    env.clock.advance(CACHE_TTL_MS - 1)
    not_yet = env.trigger("ops.wait")
    env.clock.advance(1)
    held = env.trigger("ops.wait")

    assert not_yet.status == "waiting"
    assert held.status == "paused"
