"""The concurrency routes over HTTP (in-memory driver, virtual clock): a queued run's view
says why it waits, a key's holders and queue are listed, and an ended run's stuck slot is
released, starting the next queued run."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import READER, WRITER, Api, make_api

from relayflow import workflow
from relayflow.flow import Concurrency
from relayflow.testing import WorkflowTestEnv

BASE = "/api/workflows/crm.sync/concurrency"


@pytest.fixture
def api() -> Api:
    @workflow(id="crm.sync", concurrency=Concurrency(limit=1, key="customer"))
    async def sync(data: Any, ctx: Any) -> Any:
        await ctx.sleep("1m")
        return data["name"]

    @workflow(id="crm.free")
    async def free(data: Any, ctx: Any) -> Any:
        return data

    return make_api(WorkflowTestEnv(workflows=[sync, free]))


def _trigger(api: Api, name: str) -> dict[str, Any]:
    body = {"workflowId": "crm.sync", "input": {"customer": "acme", "name": name}}
    answer = api.post("/api/runs", body)
    assert answer.status == 201, answer.body
    return dict(answer.body)


def _stick_slot_of(api: Api, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Let ``run_id`` end while its release is lost: its slot stays held."""
    slots = api.env.engine.slots
    assert slots is not None
    real = slots.release

    def lost(*args: Any, **kwargs: Any) -> list[str]:
        raise ConnectionError("lost")

    monkeypatch.setattr(slots, "release", lost)
    api.env.run_until_idle()
    monkeypatch.setattr(slots, "release", real)
    assert api.get(f"/api/runs/{run_id}").body["status"] == "completed"


def test_a_queued_runs_view_and_timeline_say_why_it_waits(api: Api) -> None:
    first = _trigger(api, "first")
    queued = _trigger(api, "queued")

    line = "queued (concurrency key acme: 1 of 1 in use)"
    assert queued["status"] == "queued"
    assert api.get(f"/api/runs/{queued['id']}").body["statusDetail"] == line
    assert api.get(f"/api/runs/{queued['id']}/timeline").body["statusDetail"] == line
    assert api.get(f"/api/runs/{first['id']}").body["statusDetail"] is None
    listed = api.get("/api/runs", query={"status": "queued"}).body["runs"]
    assert [run["id"] for run in listed] == [queued["id"]]
    assert api.get("/api/runs", query={"status": "delayed"}).body["runs"] == []


def test_a_keys_holders_and_queue_are_listed(api: Api) -> None:
    runs = [_trigger(api, f"r{n}") for n in range(3)]

    answer = api.get(BASE, query={"key": "acme"}, token=READER)

    assert answer.status == 200
    body = answer.body
    assert {k: body[k] for k in ("workflowId", "key", "limit", "strategy", "inUse")} == {
        "workflowId": "crm.sync",
        "key": "acme",
        "limit": 1,
        "strategy": "queue",
        "inUse": 1,
    }
    assert [h["runId"] for h in body["holders"]] == [runs[0]["id"]]
    assert body["holders"][0]["since"].endswith("Z")
    assert [(q["runId"], q["position"], q["priority"]) for q in body["queue"]] == [
        (runs[1]["id"], 1, 0),
        (runs[2]["id"], 2, 0),
    ]


def test_releasing_a_stuck_slot_starts_the_next_queued_run(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = _trigger(api, "stuck")
    waiting = _trigger(api, "waiting")
    _stick_slot_of(api, stuck["id"], monkeypatch)
    assert api.get(f"/api/runs/{waiting['id']}").body["status"] == "queued"

    body = {"runId": stuck["id"], "key": "acme"}
    headers = {"Idempotency-Key": "release-1"}
    first = api.post(f"{BASE}/release", body, token=WRITER, headers=headers)
    again = api.post(f"{BASE}/release", body, token=WRITER, headers=headers)

    assert first.status == 200, first.body
    assert first.body == {
        "workflowId": "crm.sync",
        "key": "acme",
        "runId": stuck["id"],
        "released": True,
        "started": [waiting["id"]],
    }
    assert (again.status, again.body) == (200, first.body)
    assert again.headers.get("idempotent-replayed") == "true"
    api.env.run_until_idle()
    assert api.get(f"/api/runs/{waiting['id']}").body["status"] == "completed"


def test_release_needs_the_writer_scope(api: Api) -> None:
    run = _trigger(api, "r")
    answer = api.post(f"{BASE}/release", {"runId": run["id"]}, token=READER)
    assert answer.status == 403


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/api/workflows/nope/concurrency", None, 404, "workflow_not_found"),
        ("GET", "/api/workflows/crm.free/concurrency", None, 409, "not_concurrency_limited"),
        ("GET", BASE, None, 400, "invalid_body"),
        ("POST", f"{BASE}/release", {"key": "acme"}, 400, "invalid_body"),
        ("POST", f"{BASE}/release", {"runId": "active"}, 409, "run_active"),
    ],
)
def test_bad_requests_get_clear_errors(
    api: Api, method: str, path: str, body: Any, status: int, code: str
) -> None:
    api.post(
        "/api/runs",
        {"workflowId": "crm.sync", "runId": "active", "input": {"customer": "a", "name": "x"}},
    )
    answer = api.call(method, path, body=body)
    assert (answer.status, answer.body["error"]) == (status, code), answer.body
    assert answer.body["message"]
