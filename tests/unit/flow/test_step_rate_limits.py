"""Step rate limits through ``WorkflowTestEnv``: the same reservations every host makes, on
the virtual clock, for both the sync and the async context."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow import workflow
from relayflow.flow import RateLimit
from relayflow.testing import WorkflowTestEnv

pytestmark = pytest.mark.usefixtures("clean_registry")


def _limited(kind: str, limit: RateLimit, calls: list[int], env: list[WorkflowTestEnv]) -> Any:
    def call_partner(n: Any) -> Any:
        calls.append(env[0].now())
        return n

    if kind == "async":

        @workflow(id="partner.async")
        async def body(data: Any, ctx: Any) -> Any:
            return await ctx.step("call", call_partner, data, rate_limit=limit)

        return body

    @workflow(id="partner.sync")
    def sync_body(data: Any, ctx: Any) -> Any:
        return ctx.step("call", call_partner, data, rate_limit=limit)

    return sync_body


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_ten_a_minute_admits_ten_at_once_then_one_every_six_seconds(kind: str) -> None:
    calls: list[int] = []
    holder: list[WorkflowTestEnv] = []
    body = _limited(kind, RateLimit(key="partner", limit=10, window="1m"), calls, holder)
    env = WorkflowTestEnv([body])
    holder.append(env)
    start = env.now()
    runs = [env.trigger(body.id, n) for n in range(14)]
    env.run_until_idle()
    assert [env.get_run(r.id).status for r in runs] == ["completed"] * 14
    assert [env.get_run(r.id).output for r in runs] == list(range(14))
    assert sorted(t - start for t in calls) == [0] * 10 + [6_000, 12_000, 18_000, 24_000]


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_fail_raises_rate_limited_with_retry_after(kind: str) -> None:
    calls: list[int] = []
    holder: list[WorkflowTestEnv] = []
    limit = RateLimit(key="partner", limit=1, window="1m", on_limit="fail")
    body = _limited(kind, limit, calls, holder)
    env = WorkflowTestEnv([body])
    holder.append(env)
    first = env.trigger(body.id, 1)
    second = env.trigger(body.id, 2)
    env.run_until_idle()
    assert env.get_run(first.id).status == "completed"
    failed = env.get_run(second.id)
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == "RATE_LIMITED"
    assert failed.error.data == {"retryAfterMs": 60_000}
    assert len(calls) == 1
