"""Step timeouts that mean something: an attempt abandoned at its timeout whose code keeps
running is never overlapped by the next attempt of the same step in this host; the next
attempt waits for it (a refused start is no attempt) until a grace has passed."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from relayflow.core.checkpoints import expand
from relayflow.core.views import RunDetail
from relayflow.errors import StepFailedError
from relayflow.sdk.overruns import ABANDONED
from relayflow.sdk.registry import workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.testing import WorkflowTestEnv


class CodeThatOverruns:
    """A step function whose first call ignores its timeout and runs on for ``overrun_ms`` of
    the environment's virtual time: it ends when the clock passes that point, and the move
    of the clock waits for it to end (so the next check finds it ended, never by chance).
    Later calls answer at once. Counts starts and how many ran at once."""

    def __init__(self, env: WorkflowTestEnv, step_key: str, overrun_ms: int) -> None:
        self.env = env
        self.step_key = step_key
        self.overrun_ms = overrun_ms
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.starts = 0
        self.running = 0
        self.most = 0
        self.ends_at: int | None = None
        env.clock.add_listener(self._moved)

    def __call__(self, _: Any) -> str:
        with self.lock:
            self.starts += 1
            number = self.starts
            self.running += 1
            self.most = max(self.most, self.running)
            if number == 1:
                self.ends_at = self.env.now() + self.overrun_ms
        try:
            if number == 1:
                self.release.wait(10)
            return f"attempt {number}"
        finally:
            with self.lock:
                self.running -= 1

    def _moved(self, now: int) -> None:
        if self.ends_at is not None and now >= self.ends_at and not self.release.is_set():
            self.release.set()
            assert ABANDONED.wait_clear(self.step_key, 10)

    def finish(self) -> None:
        """Let the code end (whatever the clock says) before the next test counts afresh."""
        self.release.set()
        assert ABANDONED.wait_clear(self.step_key, 10)


HANG: dict[str, CodeThatOverruns] = {}


def hangs(data: Any) -> str:
    return HANG["code"](data)


#: As in "timeout 1s, hangs 4s, RetryPolicy(max=3)", at a twentieth of the scale: the
#: timeout is 50 ms, the first retry is due 50 ms after it, the grace is 100 ms.
POLICY = RetryPolicy(max=3, backoff="exponential", initial=50)


@workflow(id="overlap.sync")
def sync_body(data: Any, ctx: Any) -> Any:
    return ctx.step("hang", hangs, data, retry=POLICY, timeout="50ms")


@workflow(id="overlap.async")
async def async_body(data: Any, ctx: Any) -> Any:
    return await ctx.step("hang", hangs, data, retry=POLICY, timeout="50ms")


@workflow(id="overlap.once")
def at_most_once_body(data: Any, ctx: Any) -> Any:
    return ctx.step("hang", hangs, data, retry=POLICY, timeout="50ms", semantics="at_most_once")


def run_overrunning(workflow_id: str, overrun_ms: int) -> tuple[CodeThatOverruns, RunDetail]:
    """Runs ``workflow_id`` whose step's first attempt overruns; the code and the ended run."""
    env = WorkflowTestEnv(workflows=[sync_body, async_body, at_most_once_body])
    run_id = f"run-{workflow_id}-{overrun_ms}"
    code = HANG["code"] = CodeThatOverruns(env, f"{run_id}:hang", overrun_ms)
    try:
        env.trigger(workflow_id, 1, run_id=run_id)
        env.run_until_idle()
        return code, env.get_run(run_id)
    finally:
        code.finish()


def step_attempts(run: RunDetail) -> list[tuple[int | None, str | None, str | None]]:
    return [
        (e.attempt, e.outcome, e.error.code if e.error is not None else None)
        for e in run.timeline
        if e.type == "step"
    ]


@pytest.mark.parametrize("workflow_id", ["overlap.sync", "overlap.async", "overlap.once"])
def test_code_still_running_after_the_grace_fails_the_step_without_spending_attempts(
    workflow_id: str,
) -> None:
    code, done = run_overrunning(workflow_id, overrun_ms=200)

    assert done.status == "failed"
    assert done.error is not None and done.error.code == "STEP_STILL_RUNNING"
    assert "still running" in done.error.message
    assert (code.starts, code.most) == (1, 1), "no attempt started beside the first"
    # The refused starts are no attempts: only the one that timed out is journalled.
    assert step_attempts(done) == [(1, "err", "TIMEOUT")]
    # Given up at its timeout, the code had twice that (100 ms) to end before the step failed.
    assert done.completed_at is not None and done.completed_at - done.started_at == 100


@pytest.mark.parametrize("workflow_id", ["overlap.sync", "overlap.async", "overlap.once"])
def test_a_refused_start_is_not_an_attempt_the_next_runs_once_the_code_ended(
    workflow_id: str,
) -> None:
    code, done = run_overrunning(workflow_id, overrun_ms=80)

    assert (done.status, done.output) == ("completed", "attempt 2")
    assert (code.starts, code.most) == (2, 1)
    assert step_attempts(done) == [(1, "err", "TIMEOUT"), (2, "ok", None)]
    [_, second] = [e for e in done.timeline if e.type == "step"]
    # Due 50 ms after the timeout, refused (the code ran until 80 ms), started at the next
    # check, 100 ms after it.
    assert second.started_at - done.started_at == 100


@workflow(id="overlap.parked")
def parked_body(data: Any, ctx: Any) -> Any:
    # Retried 100 ms after its timeout, then 2 s after that: more than the in-process
    # threshold (1 s), so the held start parks the run on an alarm, within the 1.2 s grace.
    policy = RetryPolicy(max=2, backoff="exponential", initial=100, backoff_rate=20)
    return ctx.step("hang", hangs, data, retry=policy, timeout="600ms")


def test_a_held_start_parks_the_run_on_an_alarm_and_runs_when_it_fires() -> None:
    env = WorkflowTestEnv(workflows=[parked_body])
    code = HANG["code"] = CodeThatOverruns(env, "run-parked:hang", 1_150)
    try:
        run = env.trigger("overlap.parked", 1, run_id="run-parked")
        waiting = env.get_run(run.id)
        env.run_until_idle()
    finally:
        code.finish()
    done = env.get_run(run.id)

    assert waiting.status == "waiting"
    assert [w.id for w in waiting.timeline if w.type == "wait"] == ["retry:hang:2:held1"]
    assert (done.status, done.output) == ("completed", "attempt 2")
    assert step_attempts(done) == [(1, "err", "TIMEOUT"), (2, "ok", None)]
    [_, second] = [e for e in done.timeline if e.type == "step"]
    assert second.started_at - done.started_at == 1_200
    assert (code.starts, code.most) == (2, 1)


@workflow(id="overlap.shared")
def shared_key_body(data: Any, ctx: Any) -> Any:
    return ctx.step("hang", hangs, data, timeout="50ms", idempotency_key="charge-o1")


@pytest.mark.parametrize(
    ("overrun_ms", "status", "starts"), [(80, "completed", 2), (200, "failed", 1)]
)
def test_a_step_sharing_the_idempotency_key_of_timed_out_code_waits_for_it(
    overrun_ms: int, status: str, starts: int
) -> None:
    env = WorkflowTestEnv(workflows=[shared_key_body])
    code = HANG["code"] = CodeThatOverruns(env, "charge-o1", overrun_ms)
    try:
        first = env.trigger("overlap.shared", 1, run_id="run-first")
        second = env.trigger("overlap.shared", 2, run_id="run-second")
    finally:
        code.finish()

    assert first.error is not None and first.error.code == "TIMEOUT"
    assert (second.status, code.starts, code.most) == (status, starts, 1)
    if status == "completed":
        assert second.output == "attempt 2"
        [attempt] = [e for e in second.timeline if e.type == "step"]
        assert (attempt.attempt, attempt.started_at - second.started_at) == (1, 100)
    else:
        assert second.error is not None and second.error.code == "STEP_STILL_RUNNING"
        assert "idempotency key 'charge-o1'" in second.error.message
        assert second.completed_at is not None
        assert second.completed_at - second.started_at == 100


def test_the_abandoned_registry_knows_when_the_code_ended() -> None:
    from relayflow.sdk.runner import _call_in_thread

    gate = threading.Event()
    with pytest.raises(Exception, match="timed out"):
        _call_in_thread(lambda: gate.wait(10), 20, "s", "run:s")
    assert ABANDONED.running("run:s")
    gate.set()
    assert ABANDONED.wait_clear("run:s", 10)
    assert not ABANDONED.running("run:s")


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
    assert LATE_ENDED.wait(10) and ABANDONED.wait_clear(f"{run.id}:late", 10)
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
    log = expand(env.checkpoints.read(done.id, 0))
    logged = [e.step for e in log if e.key == "late" and e.step]
    assert [s.attempts[0].abandoned_ended_at for s in logged] == [
        None,
        given_up.abandoned_ended_at,
    ]
    assert logged[-1].status == "err" and logged[-1].error == logged[0].error
