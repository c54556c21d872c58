"""Step timeouts that mean something: an attempt abandoned at its timeout whose code keeps
running is never overlapped by the next attempt of the same step in this host."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from relayflow.core.views import RunDetail
from relayflow.errors import StepFailedError
from relayflow.sdk.registry import workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.runner import _ABANDONED
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
    run_id = f"run-{workflow_id}"
    try:
        run = env.trigger(workflow_id, 1, run_id=run_id)
        env.run_until_idle()
        done = env.get_run(run.id)
        assert done.status == "failed"
        assert STATE["most"] == 1, "two attempts of one step ran at once"
        assert STATE["starts"] == 1, "no attempt started while the first kept running"
        assert done.error is not None and "still running" in str(done.error)
    finally:
        RELEASE.set()
        # The released code ends before the next test counts afresh.
        assert _ABANDONED.wait_clear(f"{run_id}:hang", 10)


def test_once_the_abandoned_attempt_ended_the_next_one_starts() -> None:
    from relayflow.sdk.runner import _call_in_thread

    gate = threading.Event()
    with pytest.raises(Exception, match="timed out"):
        _call_in_thread(lambda: gate.wait(10), 20, "s", "run:s")
    gate.set()
    assert _call_in_thread(lambda: "second", 2_000, "s", "run:s") == "second"


# -- when the abandoned code really ended ------------------------------------------------

LATE = threading.Event()
LATE_ENDED = threading.Event()
LATE_ENV: dict[str, WorkflowTestEnv] = {}
#: Virtual ms the abandoned code takes past its start before it ends.
OVERRUN_MS = 700


def ends_late(how: str) -> str:
    """The first call ignores its timeout and ends when the test lets it; later calls answer."""
    if LATE_ENDED.is_set() or LATE.is_set():
        return "second"
    try:
        LATE.wait(10)
        LATE_ENV["env"].advance(OVERRUN_MS)
        if how == "raise":
            raise RuntimeError("too late")
        return "first"
    finally:
        LATE_ENDED.set()


# A retry delay over the in-process threshold: the first invocation answers "waiting" while
# the abandoned code runs, the next one journals when it ended.
LATE_POLICY = RetryPolicy(max=2, backoff="fixed", initial=5_000)


@workflow(id="overrun.sync")
def sync_late(how: str, ctx: Any) -> Any:
    return ctx.step("late", ends_late, how, retry=LATE_POLICY, timeout="50ms")


@workflow(id="overrun.async")
async def async_late(how: str, ctx: Any) -> Any:
    return await ctx.step("late", ends_late, how, retry=LATE_POLICY, timeout="50ms")


def run_past_the_overrun(
    workflow: Any, workflow_id: str, how: str
) -> tuple[WorkflowTestEnv, RunDetail, RunDetail]:
    """Runs until the run waits while its abandoned code runs, lets that code end, then runs
    to the end: the environment, the run as it waited, and the run at its end."""
    LATE.clear()
    LATE_ENDED.clear()
    env = WorkflowTestEnv(workflows=[workflow])
    LATE_ENV["env"] = env
    try:
        run = env.trigger(workflow_id, how)
        waiting = env.get_run(run.id)
    finally:
        LATE.set()
    # The host journals the end once the code's thread is done, before the next attempt.
    assert LATE_ENDED.wait(10) and _ABANDONED.wait_clear(f"{run.id}:late", 10)
    env.run_until_idle()
    return env, waiting, env.get_run(run.id)


@pytest.mark.parametrize("workflow", [sync_late, async_late], ids=["sync", "async"])
@pytest.mark.parametrize(("how", "outcome"), [("return", "returned"), ("raise", "raised")])
def test_the_timeline_shows_when_a_timed_out_attempt_really_ended(
    workflow: Any, how: str, outcome: str
) -> None:
    _, waiting, done = run_past_the_overrun(workflow, workflow.id, how)

    assert waiting.status == "waiting"
    [given_up] = [e for e in waiting.timeline if e.type == "step"]
    assert given_up.error is not None and given_up.error.code == "TIMEOUT"
    assert given_up.abandoned_ended_at is None, "its code was still running"
    assert (done.status, done.output) == ("completed", "second")
    first, second = [e for e in done.timeline if e.type == "step"]
    assert (first.attempt, first.outcome, second.attempt, second.outcome) == (1, "err", 2, "ok")
    assert first.error is not None and first.error.code == "TIMEOUT"
    assert first.abandoned_outcome == outcome
    assert first.ended_at is not None and first.abandoned_ended_at is not None
    assert first.abandoned_ended_at - first.started_at == OVERRUN_MS
    assert second.abandoned_ended_at is None and second.abandoned_outcome is None


@workflow(id="overrun.caught")
def caught_late(how: str, ctx: Any) -> Any:
    with contextlib.suppress(StepFailedError):
        ctx.step("late", ends_late, how, timeout="50ms")
    ctx.sleep("1m")  # the invocation answers while the abandoned code still runs
    return ctx.step("after", lambda: "after")


def test_a_later_step_checkpoints_when_an_earlier_timed_out_attempt_really_ended() -> None:
    env, waiting, done = run_past_the_overrun(caught_late, "overrun.caught", "return")

    assert waiting.status == "waiting"
    assert (done.status, done.output) == ("completed", "after")
    [given_up] = [e for e in done.timeline if e.id == "late"]
    assert (given_up.outcome, given_up.abandoned_outcome) == ("err", "returned")
    # The fact was made durable with the next step's checkpoint, before the answer.
    logged = [e.step for e in env.checkpoints.read(done.id, 0) if e.key == "late" and e.step]
    assert [s.attempts[0].abandoned_ended_at for s in logged] == [
        None,
        given_up.abandoned_ended_at,
    ]
    assert logged[-1].status == "err" and logged[-1].error == logged[0].error
