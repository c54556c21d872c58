"""Pause, resume, redrive, rerun and cancel of one run over HTTP: the answers, the 404s, 409s
and 400s, the scope, who is recorded as asking, and an ``Idempotency-Key`` acting once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from api_harness import Api, make_api

from relayflow.api.auth import BearerTokenAuth, hash_token
from relayflow.testing import WorkflowTestEnv

pytestmark = pytest.mark.usefixtures("clean_registry")

#: Step calls of the five-step workflow, in order, across runs.
CALLS: list[str] = []
#: Whether the flaky step's dependency is repaired (its next attempt succeeds).
REPAIRED: list[bool] = [False]


def call(name: str, value: Any) -> Any:
    CALLS.append(name)
    return {"step": name, "saw": value}


def charge(order: Any) -> dict[str, Any]:
    if not REPAIRED[0]:
        raise RuntimeError("the bank is down")
    return {"charged": order}


def _define() -> list[Any]:
    from relayflow.sdk.registry import workflow

    @workflow(id="ops.wait")
    async def wait(data: Any, ctx: Any) -> Any:
        return {"go": await ctx.wait_for_signal("go")}

    @workflow(id="ops.flaky")
    async def flaky(data: Any, ctx: Any) -> Any:
        return await ctx.step("charge", charge, data)

    @workflow(id="ops.five")
    async def five(data: Any, ctx: Any) -> Any:
        results = []
        for name in ("s1", "s2", "s3", "s4", "s5"):
            results.append(await ctx.step(name, call, name, data))
        return results

    return [wait, flaky, five]


OPS = "ops-token"
ONCALL = "oncall-token"
READER = "reader-token"
#: Named tokens: an action records the name of the token that asked for it.
SECRET = {
    "tokens": [
        {"sha256": hash_token(OPS), "name": "ops-alice", "scopes": ["runs:read", "runs:write"]},
        {"sha256": hash_token(ONCALL), "name": "oncall-bob", "scopes": ["runs:write"]},
        {"sha256": hash_token(READER), "name": "dash", "scopes": ["runs:read"]},
    ]
}


class Ops(Api):
    """The API called with the ops token unless told otherwise."""

    def call(self, method: str, path: str, *, token: str | None = OPS, **kwargs: Any) -> Any:
        return super().call(method, path, token=token, **kwargs)


@pytest.fixture
def api() -> Iterator[Api]:
    CALLS.clear()
    REPAIRED[0] = False
    auth = BearerTokenAuth(lambda: SECRET, ttl_s=float("inf"))
    plain = make_api(WorkflowTestEnv(workflows=_define()), auth=auth)
    yield Ops(app=plain.app, env=plain.env, metrics=plain.metrics, context=plain.context)


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def waiting_run(api: Api) -> str:
    run = api.post("/api/runs", {"workflowId": "ops.wait"}).body
    assert run["status"] == "waiting"
    return str(run["id"])


def failed_run(api: Api) -> str:
    run = api.post("/api/runs", {"workflowId": "ops.flaky", "input": "o-1"}).body
    assert run["status"] == "failed"
    return str(run["id"])


def completed_five(api: Api, data: Any = "first") -> str:
    run = api.post("/api/runs", {"workflowId": "ops.five", "input": data}).body
    assert run["status"] == "completed"
    return str(run["id"])


def test_pause_then_resume_a_waiting_run_records_who_asked_and_why(api: Api) -> None:
    run_id = waiting_run(api)

    paused = api.post(f"/api/runs/{run_id}/pause", {"reason": "bank down"}, headers=keyed("p-1"))
    resumed = api.post(f"/api/runs/{run_id}/resume", token=ONCALL)

    assert paused.status == 200 and paused.body["status"] == "paused"
    assert paused.body["pause"]["by"] == "ops-alice"
    assert paused.body["pause"]["reason"] == "bank down"
    assert paused.body["pause"]["resumeTo"] == "waiting"
    assert resumed.status == 200 and resumed.body["status"] == "waiting"
    assert resumed.body["pause"] is None
    kinds = [(a["kind"], a["id"], a["by"]) for a in resumed.body["actions"]]
    assert kinds[0] == ("pause", "p-1", "ops-alice")
    assert kinds[1][0] == "resume" and kinds[1][1].startswith("act_")
    assert kinds[1][2] == "oncall-bob"
    entries = api.get(f"/api/runs/{run_id}/timeline").body["entries"]
    actions = [(e["kind"], e["by"], e["reason"]) for e in entries if e["type"] == "action"]
    assert actions == [("pause", "ops-alice", "bank down"), ("resume", "oncall-bob", None)]
    # Resumed, the run takes its signal as before.
    api.post(f"/api/runs/{run_id}/signals", {"name": "go", "payload": 1})
    assert api.get(f"/api/runs/{run_id}").body["status"] == "completed"


def test_a_paused_run_is_listed_with_its_pause_and_can_be_cancelled(api: Api) -> None:
    run_id = waiting_run(api)
    api.post(f"/api/runs/{run_id}/pause")

    listed = api.get("/api/runs", query={"status": "paused"}).body["runs"]
    cancelled = api.post(f"/api/runs/{run_id}/cancel", {"reason": "not needed"})

    assert [r["id"] for r in listed] == [run_id] and listed[0]["pause"]["by"] == "ops-alice"
    assert cancelled.status == 200 and cancelled.body["status"] == "cancelled"
    assert [a["kind"] for a in cancelled.body["actions"]] == ["pause", "cancel"]
    assert cancelled.body["actions"][1]["reason"] == "not needed"


def test_redrive_gives_the_failed_step_a_fresh_budget_and_keeps_its_history(api: Api) -> None:
    run_id = failed_run(api)
    REPAIRED[0] = True

    redriven = api.post(f"/api/runs/{run_id}/redrive", {"retry": {"max": 2, "initial": "1s"}})

    assert redriven.status == 200 and redriven.body["status"] == "completed"
    run = api.get(f"/api/runs/{run_id}").body
    assert run["status"] == "completed" and run["output"] == {"charged": "o-1"}
    assert run["redriveCount"] == 1
    assert [a["kind"] for a in run["actions"]] == ["redrive"]
    assert run["actions"][0]["by"] == "ops-alice"
    [history] = run["redrives"]
    assert list(history["steps"]) == ["charge"]
    assert [a["status"] for a in history["steps"]["charge"]] == ["err"]
    steps = [
        (e["id"], e["attempt"], e["outcome"], e["redrive"])
        for e in api.get(f"/api/runs/{run_id}/timeline").body["entries"]
        if e["type"] == "step"
    ]
    assert steps == [("charge", 1, "err", 1), ("charge", 1, "ok", None)]


def test_rerun_from_the_third_of_five_steps_answers_201_with_the_linked_new_run(
    api: Api,
) -> None:
    original = completed_five(api)
    CALLS.clear()

    answer = api.post(
        f"/api/runs/{original}/rerun", {"fromStep": "s3", "input": "second", "reason": "fix"}
    )

    assert answer.status == 201
    rerun = answer.body
    assert rerun["id"] != original and rerun["status"] == "completed"
    assert rerun["rerunOf"] == {"runId": original, "fromStep": "s3"}
    assert rerun["input"] == "second"
    assert CALLS == ["s3", "s4", "s5"]
    # The copied steps keep the original's results; the rest saw the new input.
    assert [r["saw"] for r in rerun["output"]] == ["first", "first", "second", "second", "second"]
    source = api.get(f"/api/runs/{original}").body
    assert source["reruns"] == [rerun["id"]]
    assert [(a["kind"], a["detail"].get("rerunId")) for a in source["actions"]] == [
        ("rerun", rerun["id"])
    ]
    entries = api.get(f"/api/runs/{original}/timeline").body["entries"]
    assert {e["id"]: e["topLevel"] for e in entries if e["type"] == "step"} == {
        f"s{i}": True for i in range(1, 6)
    }


def test_rerun_without_input_keeps_the_original_s(api: Api) -> None:
    original = completed_five(api, {"order": 7})

    rerun = api.post(f"/api/runs/{original}/rerun", {"fromStep": "s1"}).body

    assert rerun["input"] == {"order": 7}


ROUTES = ("pause", "resume", "redrive", "cancel")


@pytest.mark.parametrize("action", [*ROUTES, "rerun"])
def test_an_unknown_run_answers_404(api: Api, action: str) -> None:
    body = {"fromStep": "s1"} if action == "rerun" else {}
    answer = api.post(f"/api/runs/run_missing/{action}", body)
    assert (answer.status, answer.error) == (404, "not_found")


@pytest.mark.parametrize("action", [*ROUTES, "rerun"])
def test_a_token_without_runs_write_answers_403(api: Api, action: str) -> None:
    run_id = waiting_run(api)
    body = {"fromStep": "s1"} if action == "rerun" else {}
    answer = api.post(f"/api/runs/{run_id}/{action}", body, token=READER)
    assert answer.status == 403
    assert api.get(f"/api/runs/{run_id}").body["actions"] == []


def test_actions_on_a_run_that_moved_on_answer_409_with_the_reason(api: Api) -> None:
    waiting = waiting_run(api)
    done = completed_five(api)
    api.post(f"/api/runs/{waiting}/pause")

    def refused(run_id: str, action: str, body: Any = None) -> tuple[int, str | None]:
        answer = api.post(f"/api/runs/{run_id}/{action}", body or {})
        return answer.status, answer.error

    assert refused(waiting, "pause") == (409, "already_paused")
    assert refused(done, "pause") == (409, "already_terminal")
    assert refused(done, "resume") == (409, "already_terminal")
    assert refused(done, "cancel") == (409, "already_terminal")
    assert refused(done, "redrive") == (409, "not_redrivable")
    assert refused(waiting, "redrive") == (409, "not_redrivable")
    assert refused(waiting, "rerun", {"fromStep": "s1"}) == (409, "not_rerunnable")
    api.post(f"/api/runs/{waiting}/resume")
    assert refused(waiting, "resume") == (409, "not_paused")
    assert [a["kind"] for a in api.get(f"/api/runs/{waiting}").body["actions"]] == [
        "pause",
        "resume",
    ]


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("rerun", {}, "fromStep"),
        ("rerun", {"fromStep": ""}, "fromStep"),
        ("redrive", {"retry": {"max": 0}}, "retry.max"),
        ("redrive", {"retry": {"max": 1001}}, "retry.max"),
        ("redrive", {"retry": {"initial": "2d"}}, "retry"),
        ("redrive", {"retry": {"backoff": "random"}}, "retry.backoff"),
        ("pause", {"reason": 5}, "reason"),
        ("resume", {"because": "x"}, "because"),
    ],
)
def test_a_bad_body_answers_400_naming_the_field(
    api: Api, action: str, body: dict[str, Any], field: str
) -> None:
    run_id = failed_run(api)
    answer = api.post(f"/api/runs/{run_id}/{action}", body)
    assert (answer.status, answer.error) == (400, "invalid_body")
    assert field in {d["field"] for d in answer.body.get("details", [])}
    assert api.get(f"/api/runs/{run_id}").body["actions"] == []


def test_rerun_from_an_unknown_step_answers_400_step_not_found(api: Api) -> None:
    original = completed_five(api)
    answer = api.post(f"/api/runs/{original}/rerun", {"fromStep": "s9"})
    assert (answer.status, answer.error) == (400, "step_not_found")
    assert api.get(f"/api/runs/{original}").body["reruns"] == []


def test_a_repeated_idempotency_key_acts_once(api: Api) -> None:
    waiting = waiting_run(api)
    original = completed_five(api)

    pauses = [api.post(f"/api/runs/{waiting}/pause", {}, headers=keyed("k-p")) for _ in range(2)]
    reruns = [
        api.post(f"/api/runs/{original}/rerun", {"fromStep": "s2"}, headers=keyed("k-r"))
        for _ in range(2)
    ]

    assert [a.status for a in pauses] == [200, 200]
    assert pauses[1].body == pauses[0].body
    assert pauses[1].headers.get("idempotent-replayed") == "true"
    assert [a["id"] for a in api.get(f"/api/runs/{waiting}").body["actions"]] == ["k-p"]
    assert [a.status for a in reruns] == [201, 201]
    assert reruns[1].body["id"] == reruns[0].body["id"]
    assert api.get(f"/api/runs/{original}").body["reruns"] == [reruns[0].body["id"]]


def test_an_action_id_the_run_already_holds_is_not_applied_again(api: Api) -> None:
    """The engine's own guard, for a retry whose stored answer is gone (another caller's
    claim scope, or a store without claims): the run is answered as it is."""
    run_id = waiting_run(api)
    api.post(f"/api/runs/{run_id}/pause", {}, headers=keyed("k-x"))

    # Another caller's claims are apart: the request reaches the route with the same id.
    again = api.post(f"/api/runs/{run_id}/pause", {}, headers=keyed("k-x"), token=ONCALL)

    assert again.status == 200 and again.body["status"] == "paused"
    assert "idempotent-replayed" not in again.headers
    assert [a["id"] for a in again.body["actions"]] == ["k-x"]
