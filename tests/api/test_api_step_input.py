"""The timeline with values gives a failed step attempt's arguments (and none for attempts
that succeeded)."""

from __future__ import annotations

from typing import Any

from api_harness import make_api

from relayflow.sdk import RetryPolicy, workflow
from relayflow.testing import WorkflowTestEnv

_tries = {"n": 0}


def _charge(order: dict[str, Any]) -> dict[str, Any]:
    _tries["n"] += 1
    if _tries["n"] == 1:
        raise ConnectionError("gateway down")
    return {"charged": order["total"]}


def test_a_failed_attempt_shows_what_it_was_given(clean_registry: None) -> None:
    _tries["n"] = 0

    @workflow(id="api.charge", retry=RetryPolicy(max=2, initial="1s"))
    async def charge(order: dict[str, Any], ctx: Any) -> Any:
        return await ctx.step("charge-card", _charge, order)

    api = make_api(WorkflowTestEnv(workflows=[charge]))
    run = api.post("/api/runs", {"workflowId": "api.charge", "input": {"total": 42}}).body
    api.env.run_until_idle()
    plain = api.get(f"/api/runs/{run['id']}/timeline").body["entries"]
    valued = api.get(f"/api/runs/{run['id']}/timeline", query={"values": "true"}).body["entries"]

    attempts = [e for e in valued if e["type"] == "step" and e["id"] == "charge-card"]
    assert [(e["outcome"], e["input"]) for e in attempts] == [
        ("err", [{"total": 42}]),
        ("ok", None),
    ]
    assert all(e["input"] is None for e in plain), "arguments come with the values only"
