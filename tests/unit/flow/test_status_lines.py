"""The status line a run view shows for a run flow control holds back: delayed until its
start, rate limited until its step's slot (queued is covered with the slots stores in
tests/contract/test_concurrency_operations.py)."""

from __future__ import annotations

from typing import Any

from relayflow import workflow
from relayflow.flow import Concurrency, Debounce, RateLimit, TriggerOptions
from relayflow.schedules.times import iso_utc
from relayflow.testing import WorkflowTestEnv


@workflow(id="status.partner")
async def partner(data: Any, ctx: Any) -> Any:
    limit = RateLimit(key="partner", limit=1, window="1m")
    return await ctx.step("call", str, data, rate_limit=limit)


def test_a_delayed_run_says_until_when() -> None:
    env = WorkflowTestEnv(workflows=[partner])
    run = env.trigger("status.partner", "a", options=TriggerOptions(delay="10m"))

    assert run.status == "delayed"
    line = f"delayed until {iso_utc(env.now() + 600_000)}"
    assert env.get_run(run.id).status_detail == line
    assert env.admin.timeline(run.id).status_detail == line
    env.run_until_idle()
    assert env.get_run(run.id).status_detail is None


def test_a_run_parked_on_a_rate_limit_says_until_when() -> None:
    env = WorkflowTestEnv(workflows=[partner])
    first = env.trigger("status.partner", "a")
    second = env.trigger("status.partner", "b")

    assert env.get_run(first.id).status_detail is None
    assert (
        env.get_run(second.id).status_detail == f"rate limited until {iso_utc(env.now() + 60_000)}"
    )
    env.run_until_idle()
    assert env.get_run(second.id).status == "completed"
    assert env.get_run(second.id).status_detail is None


def test_a_debounced_run_says_its_start_is_the_earliest() -> None:
    env = WorkflowTestEnv(workflows=[partner])
    options = TriggerOptions(debounce=Debounce(key="user", delay="30s"))
    run = env.trigger("status.partner", {"user": "u1"}, options=options)
    start = iso_utc(env.now() + 30_000)
    expected = f"delayed: debounced (key u1), starts {start} at the earliest"
    assert env.get_run(run.id).status_detail == expected


def test_a_round_robin_run_counts_the_workflows_slots() -> None:
    @workflow(id="status.rr", concurrency=Concurrency(limit=1, key="team", strategy="round-robin"))
    async def fair(data: Any, ctx: Any) -> Any:
        await ctx.sleep("1m")

    env = WorkflowTestEnv(workflows=[fair])
    env.trigger("status.rr", {"team": "a"})
    waiting = env.trigger("status.rr", {"team": "b"})
    assert env.get_run(waiting.id).status_detail == "queued (concurrency key b: 1 of 1 in use)"
