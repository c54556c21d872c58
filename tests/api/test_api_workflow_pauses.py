"""Pausing and resuming a whole workflow over HTTP: new runs are inserted paused, a bulk job
pauses the runs in flight, a resume clears the mark and resumes the paused runs at a bounded
rate; 409s, scopes and the list of paused workflows."""

from __future__ import annotations

from api_harness import READER, WRITER, Api

PAUSE = "/api/workflows/api.signal/pause"
RESUME = "/api/workflows/api.signal/resume"


def _start(api: Api) -> str:
    answer = api.post("/api/runs", {"workflowId": "api.signal", "environment": "production"})
    assert answer.status == 201, answer.body
    run_id: str = answer.body["id"]
    return run_id


def test_a_paused_workflow_holds_new_runs_and_pauses_those_in_flight(api: Api) -> None:
    before = [_start(api) for _ in range(3)]
    assert {api.env.get_run(r).status for r in before} == {"waiting"}
    paused = api.post(PAUSE, {"environment": "production", "reason": "bad deploy"})
    assert paused.status == 200, paused.body
    assert (paused.body["workflowId"], paused.body["by"]) == ("api.signal", "static")
    assert paused.body["job"]["action"] == "pause"
    api.env.run_until_idle()
    assert {api.env.get_run(r).status for r in before} == {"paused"}
    during = _start(api)
    assert api.env.get_run(during).status == "paused", "a new run is inserted paused"
    other_env = api.post("/api/runs", {"workflowId": "api.signal"}).body["id"]
    assert api.env.get_run(other_env).status == "waiting", "other environments go on"
    listed = api.get("/api/paused-workflows", query={"environment": "production"}, token=READER)
    assert [w["workflowId"] for w in listed.body["workflows"]] == ["api.signal"]

    again = api.post(PAUSE, {"environment": "production"})
    assert (again.status, again.body["error"]) == (409, "already_paused")

    resumed = api.post(RESUME, {"environment": "production", "ratePerSecond": 2})
    assert resumed.status == 200, resumed.body
    assert resumed.body["job"]["action"] == "resume"
    api.env.run_until_idle()
    statuses = {api.env.get_run(r).status for r in [*before, during]}
    assert statuses == {"waiting"}, "every paused run was resumed (and waits on its signal)"
    job = api.get(f"/api/bulk-actions/{resumed.body['job']['jobId']}").body
    assert (job["done"], job["failed"]) == (4, 0)
    assert api.get("/api/paused-workflows").body["workflows"] == []
    not_paused = api.post(RESUME, {"environment": "production"})
    assert (not_paused.status, not_paused.body["error"]) == (409, "not_paused")
    after = _start(api)
    assert api.env.get_run(after).status == "waiting"
    kinds = [e["kind"] for e in api.get("/api/audit").body["entries"]]
    assert "pause_workflow" in kinds and "resume_workflow" in kinds


def test_pausing_a_workflow_needs_the_admin_scope_and_a_known_environment(api: Api) -> None:
    refused = api.post(PAUSE, {"environment": "production"}, token=WRITER)
    assert refused.status == 403
    bad = api.post(PAUSE, {"environment": "moon"})
    assert bad.status == 400
    missing = api.post(PAUSE, {})
    assert missing.status == 400
    assert api.post(RESUME, {"environment": "production", "ratePerSecond": 0}).status == 400
