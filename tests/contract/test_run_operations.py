"""Operating single runs on every driver (in memory, and on atomic moto with the DynamoDB
run store and checkpoint log): pause and resume, redrive, rerun from a step, the action ids
that make each act once, and the 409s of runs that moved on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relayflow import workflow
from relayflow.errors import (
    RunActionConflictError,
    RunTerminalError,
    StepNotFoundError,
)
from relayflow.protocol import RetryOverride
from relayflow.sdk.retry import RetryPolicy
from relayflow.testing import DriverHarness

pytestmark = pytest.mark.usefixtures("clean_registry")

MakeEnv = Callable[..., DriverHarness]


def _ledger_env(make_env: MakeEnv) -> tuple[DriverHarness, list[str], dict[str, Any]]:
    """Five steps with a sleep after the second; step 3 fails while ``outage`` is set."""
    ledger: list[str] = []
    state: dict[str, Any] = {"outage": False}

    def work(name: str, value: int) -> int:
        ledger.append(name)
        if name == "s3" and state["outage"]:
            raise ConnectionError("downstream unavailable")
        return value + 1

    @workflow(id="ops.five", retry=RetryPolicy(max=2, initial=1_000))
    async def five(data: Any, ctx: Any) -> Any:
        total = data["start"]
        total = await ctx.step("s1", work, "s1", total)
        total = await ctx.step("s2", work, "s2", total)
        await ctx.sleep("1m")
        total = await ctx.step("s3", work, "s3", total)
        total = await ctx.step("s4", work, "s4", total)
        return await ctx.step("s5", work, "s5", total)

    return make_env(workflows=[five]), ledger, state


def _settle(env: DriverHarness) -> None:
    env.run_until_idle()
    env.advance("2m")
    env.run_until_idle()


def test_a_paused_waiting_run_does_nothing_until_resumed(make_env: MakeEnv) -> None:
    env, ledger, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    assert run.status == "waiting"
    paused = env.admin.pause_run(run.id, by="oncall", reason="investigating")
    assert paused.status == "paused"
    env.advance("10m")
    env.run_until_idle()
    assert ledger == ["s1", "s2"], "the sleep ended while paused: nothing ran"
    assert env.get_run(run.id).status == "paused"
    resumed = env.admin.resume_run(run.id, by="oncall")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed", resumed
    assert done.output == 5
    assert ledger == ["s1", "s2", "s3", "s4", "s5"]
    assert [a.kind for a in done.actions] == ["pause", "resume"]
    assert done.actions[0].by == "oncall"
    assert done.actions[0].reason == "investigating"


def test_events_sent_to_a_paused_run_are_kept_for_its_resume(make_env: MakeEnv) -> None:
    @workflow(id="ops.inbox")
    async def inbox(data: Any, ctx: Any) -> Any:
        first = await ctx.wait_for_event("order.paid", timeout="1h")
        second = await ctx.wait_for_event("order.shipped", timeout="1h")
        return [first, second]

    env = make_env(workflows=[inbox])
    run = env.trigger("ops.inbox", {})
    env.admin.pause_run(run.id, by="oncall")
    env.send_event(run.id, "order.paid", {"n": 1})
    env.send_event(run.id, "order.shipped", {"n": 2})
    env.run_until_idle()
    assert env.get_run(run.id).status == "paused"
    env.admin.resume_run(run.id, by="oncall")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output == [{"n": 1}, {"n": 2}]


def test_pause_and_resume_answer_409_when_the_run_moved_on(make_env: MakeEnv) -> None:
    env, _, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    env.admin.pause_run(run.id, by="a")
    with pytest.raises(RunActionConflictError) as twice:
        env.admin.pause_run(run.id, by="b")
    assert twice.value.code == "already_paused"
    env.admin.resume_run(run.id, by="a")
    with pytest.raises(RunActionConflictError) as again:
        env.admin.resume_run(run.id, by="b")
    assert again.value.code == "not_paused"
    _settle(env)
    assert env.get_run(run.id).status == "completed"
    with pytest.raises(RunTerminalError) as ended:
        env.admin.pause_run(run.id, by="a")
    assert ended.value.code == "already_terminal"
    with pytest.raises(RunActionConflictError) as not_failed:
        env.admin.redrive_run(run.id, by="a")
    assert not_failed.value.code == "not_redrivable"


def test_an_action_id_acts_once(make_env: MakeEnv) -> None:
    env, _, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    first = env.admin.pause_run(run.id, by="a", action_id="key-1")
    repeat = env.admin.pause_run(run.id, by="a", action_id="key-1")
    assert first.status == repeat.status == "paused"
    assert [a.id for a in env.get_run(run.id).actions] == ["key-1"]


def test_cancel_ends_a_paused_run(make_env: MakeEnv) -> None:
    env, ledger, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    env.admin.pause_run(run.id, by="a")
    cancelled = env.admin.cancel_run(run.id, reason="not needed", by="a")
    assert cancelled.status == "cancelled"
    _settle(env)
    assert ledger == ["s1", "s2"]
    assert [a.kind for a in env.get_run(run.id).actions] == ["pause", "cancel"]


def test_redrive_after_an_outage_runs_only_what_had_not_completed(make_env: MakeEnv) -> None:
    env, ledger, state = _ledger_env(make_env)
    state["outage"] = True
    run = env.trigger("ops.five", {"start": 0})
    _settle(env)
    failed = env.get_run(run.id)
    assert failed.status == "failed"
    assert ledger == ["s1", "s2", "s3", "s3"], "two attempts of s3, as its policy says"
    state["outage"] = False
    ledger.clear()
    env.admin.redrive_run(run.id, by="oncall", reason="downstream is back")
    _settle(env)
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output == 5
    assert ledger == ["s3", "s4", "s5"], "s1 and s2 kept their results"
    assert done.redrive_count == 1
    assert done.error is None


def test_redrive_gives_the_failed_step_a_fresh_budget_and_an_optional_policy(
    make_env: MakeEnv,
) -> None:
    env, ledger, state = _ledger_env(make_env)
    state["outage"] = True
    run = env.trigger("ops.five", {"start": 0})
    _settle(env)
    ledger.clear()
    env.admin.redrive_run(run.id, by="a", retry=RetryOverride(max=4, initial_ms=500))
    _settle(env)
    assert ledger == ["s3"] * 4, "the redrive's policy: four attempts"
    again = env.get_run(run.id)
    assert again.status == "failed"
    assert again.redrive_count == 1
    state["outage"] = False
    env.admin.redrive_run(run.id, by="a")
    _settle(env)
    assert env.get_run(run.id).status == "completed"
    assert env.get_run(run.id).redrive_count == 2


def test_redrive_of_a_cancelled_run_continues_it(make_env: MakeEnv) -> None:
    env, ledger, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    env.admin.cancel_run(run.id, by="a")
    env.admin.redrive_run(run.id, by="a", action_id="redrive-1")
    env.admin.redrive_run(run.id, by="a", action_id="redrive-1")
    _settle(env)
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert ledger == ["s1", "s2", "s3", "s4", "s5"]
    assert done.redrive_count == 1, "the repeated action id redrove once"


def test_rerun_from_step_three_reuses_steps_one_and_two(make_env: MakeEnv) -> None:
    env, ledger, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    _settle(env)
    assert env.get_run(run.id).output == 5
    ledger.clear()
    rerun = env.admin.rerun_run(run.id, from_step="s3", by="a", input={"start": 100})
    assert rerun.id != run.id
    _settle(env)
    done = env.get_run(rerun.id)
    assert done.status == "completed"
    assert ledger == ["s3", "s4", "s5"], "s1, s2 and the sleep were copied"
    assert done.output == 5, "the copied results stand, whatever the new input"
    assert done.input == {"start": 100}
    assert done.rerun_of is not None and done.rerun_of.run_id == run.id
    assert env.get_run(run.id).reruns == [rerun.id]


def test_rerun_is_refused_for_an_unknown_step_or_a_live_run(make_env: MakeEnv) -> None:
    env, _, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    with pytest.raises(RunActionConflictError) as live:
        env.admin.rerun_run(run.id, from_step="s1", by="a")
    assert live.value.code == "not_rerunnable"
    _settle(env)
    with pytest.raises(StepNotFoundError):
        env.admin.rerun_run(run.id, from_step="nope", by="a")


def test_a_repeated_rerun_action_starts_one_run(make_env: MakeEnv) -> None:
    env, _, _ = _ledger_env(make_env)
    run = env.trigger("ops.five", {"start": 0})
    _settle(env)
    first = env.admin.rerun_run(run.id, from_step="s4", by="a", action_id="k")
    second = env.admin.rerun_run(run.id, from_step="s4", by="a", action_id="k")
    assert first.id == second.id
    assert env.get_run(run.id).reruns == [first.id]


def test_pause_while_a_step_runs_lets_the_step_finish_and_nothing_after_it(
    make_env: MakeEnv,
) -> None:
    ledger: list[str] = []
    holder: list[DriverHarness] = []
    running: list[str] = []

    def work(name: str) -> str:
        ledger.append(name)
        if name == "s2":
            holder[0].admin.pause_run(running[0], by="oncall")
        return name

    @workflow(id="ops.straight")
    async def straight(data: Any, ctx: Any) -> Any:
        return [await ctx.step(f"s{n}", work, f"s{n}") for n in range(1, 6)]

    env = make_env(workflows=[straight])
    holder.append(env)
    per_step = env.engine.checkpoints is not None  # type: ignore[attr-defined]
    running.append(env.engine.new_run_id())  # type: ignore[attr-defined]
    run = env.trigger("ops.straight", {}, run_id=running[0])
    env.run_until_idle()
    if not per_step:
        # A host without per-step checkpoints finishes its invocation: the run completed.
        assert env.get_run(run.id).status == "completed"
        return
    paused = env.get_run(run.id)
    assert paused.status == "paused"
    assert ledger == ["s1", "s2"], "s2 finished; nothing after it ran"
    env.admin.resume_run(run.id, by="oncall")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output == ["s1", "s2", "s3", "s4", "s5"]
    assert ledger == ["s1", "s2", "s3", "s4", "s5"], "no step ran twice"
