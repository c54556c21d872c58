"""``/api/schedules``: listing with next fire times, pause, resume, trigger now, errors, and
the routes in the OpenAPI document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api_harness import READER, make_api

from relayflow import Schedule, workflow
from relayflow.testing import WorkflowTestEnv

START_MS = int(datetime(2026, 3, 2, tzinfo=UTC).timestamp() * 1000)


def body(input: Any, ctx: Any) -> Any:
    return ctx.step("echo", lambda: input)


def scheduled_env() -> WorkflowTestEnv:
    wf = workflow(
        id="api.scheduled",
        schedule=Schedule.cron("0 9 * * MON-FRI", timezone="Europe/Berlin", name="morning"),
    )(body)
    return WorkflowTestEnv(workflows=[wf], start_ms=START_MS, environment="production")


def test_list_pause_resume_trigger() -> None:
    api = make_api(scheduled_env())
    listed = api.get("/api/schedules", query={"environment": "production"})
    assert listed.status == 200
    (item,) = listed.body["schedules"]
    assert item["workflowId"] == "api.scheduled"
    assert item["name"] == "morning"
    assert item["declaration"] == {
        "cron": "0 9 * * MON-FRI",
        "timezone": "Europe/Berlin",
        "name": "morning",
    }
    assert item["nextFireTimes"] == [
        "2026-03-02T08:00:00Z",
        "2026-03-03T08:00:00Z",
        "2026-03-04T08:00:00Z",
        "2026-03-05T08:00:00Z",
        "2026-03-06T08:00:00Z",
    ]
    sid = item["id"]

    paused = api.post(f"/api/schedules/{sid}/pause", query={"environment": "production"})
    assert (paused.status, paused.body["paused"], paused.body["nextFireTimes"]) == (200, True, [])
    resumed = api.post(f"/api/schedules/{sid}/resume", query={"environment": "production"})
    assert (resumed.status, resumed.body["paused"]) == (200, False)

    fired = api.post(f"/api/schedules/{sid}/trigger", query={"environment": "production"})
    assert fired.status == 200
    assert fired.body["status"] == "started"
    run = api.get(f"/api/runs/{fired.body['runId']}")
    assert run.body["status"] == "completed"
    assert run.body["triggeredBy"] == {
        "kind": "schedule",
        "scheduleId": sid,
        "scheduledTime": fired.body["scheduledTime"],
        "manual": True,
    }
    listed = api.get("/api/schedules", query={"environment": "production"}).body["schedules"]
    assert listed[0]["lastScheduledTime"] is None  # "trigger now" moves no progress
    assert listed[0]["lastRun"] == {
        "runId": fired.body["runId"],
        "status": "completed",
        "manual": True,
        "scheduledTime": fired.body["scheduledTime"],
        "startedAt": run.body["startedAt"],
    }


def test_unknown_schedules_and_environments() -> None:
    api = make_api(scheduled_env())
    missing = api.post("/api/schedules/sch_nope/pause", query={"environment": "production"})
    assert (missing.status, missing.body["error"]) == (404, "not_found")
    bad = api.get("/api/schedules", query={"environment": "staging"})
    assert bad.status == 400
    empty = api.get("/api/schedules", query={"environment": "preview"})
    assert empty.body == {"environment": "preview", "schedules": []}


def test_reading_needs_runs_read_and_changing_needs_runs_write() -> None:
    api = make_api(scheduled_env())
    assert api.get("/api/schedules", token=READER).status == 200
    sid = api.get("/api/schedules").body["schedules"][0]["id"]
    assert api.post(f"/api/schedules/{sid}/pause", token=READER).status == 403


def test_the_routes_are_in_the_openapi_document() -> None:
    api = make_api(scheduled_env())
    paths = api.get("/api/openapi.json").body["paths"]
    assert "get" in paths["/api/schedules"]
    for action in ("pause", "resume", "trigger"):
        assert "post" in paths[f"/api/schedules/{{schedule_id}}/{action}"]
