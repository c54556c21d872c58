"""Step timeouts that mean something: an attempt abandoned at its timeout whose code keeps
running is never overlapped by the next attempt of the same step in this host."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from relayflow.sdk.registry import workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.testing import WorkflowTestEnv

RELEASE = threading.Event()
LOCK = threading.Lock()
STATE = {"running": 0, "most": 0, "starts": 0}


def hangs(_: Any) -> str:
    """Ignores its timeout: blocks until the test lets it go."""
    with LOCK:
        STATE["starts"] += 1
        STATE["running"] += 1
        STATE["most"] = max(STATE["most"], STATE["running"])
    try:
        RELEASE.wait(10)
        return "late"
    finally:
        with LOCK:
            STATE["running"] -= 1


@workflow(id="overlap.sync")
def sync_body(data: Any, ctx: Any) -> Any:
    policy = RetryPolicy(max=3, backoff="fixed", initial=1)
    return ctx.step("hang", hangs, data, retry=policy, timeout="50ms")


@workflow(id="overlap.async")
async def async_body(data: Any, ctx: Any) -> Any:
    policy = RetryPolicy(max=3, backoff="fixed", initial=1)
    return await ctx.step("hang", hangs, data, retry=policy, timeout="50ms")


@pytest.mark.parametrize("workflow_id", ["overlap.sync", "overlap.async"])
def test_a_timed_out_attempt_still_running_is_never_overlapped(workflow_id: str) -> None:
    RELEASE.clear()
    STATE.update(running=0, most=0, starts=0)
    env = WorkflowTestEnv(workflows=[sync_body, async_body])
    try:
        run = env.trigger(workflow_id, 1)
        env.run_until_idle()
        done = env.get_run(run.id)
        assert done.status == "failed"
        assert STATE["most"] == 1, "two attempts of one step ran at once"
        assert STATE["starts"] == 1, "no attempt started while the first kept running"
        assert done.error is not None and "still running" in str(done.error)
    finally:
        RELEASE.set()


def test_once_the_abandoned_attempt_ended_the_next_one_starts() -> None:
    from relayflow.sdk.runner import _call_in_thread

    gate = threading.Event()
    with pytest.raises(Exception, match="timed out"):
        _call_in_thread(lambda: gate.wait(10), 20, "s", "run:s")
    gate.set()
    assert _call_in_thread(lambda: "second", 2_000, "s", "run:s") == "second"
