"""``relayflow schedules list|pause|resume|trigger`` against a scripted API."""

from __future__ import annotations

import io

from cli_fake_api import FakeApi

from relayflow.cli import main

SCHEDULE = {
    "id": "sch_0123456789abcdef",
    "workflowId": "reports.daily",
    "environment": "production",
    "name": "morning",
    "kind": "cron",
    "declaration": {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "name": "morning"},
    "timezone": "Europe/Berlin",
    "overlap": "skip",
    "paused": False,
    "fired": False,
    "schedulerName": "rfs-p-reports.daily.morning-0a1b2c3d4e5f",
    "nextFireTimes": ["2026-03-02T08:00:00Z", "2026-03-03T08:00:00Z"],
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_list_prints_each_schedule_with_its_next_firing(fake_api: FakeApi) -> None:
    fake_api.on(
        "GET", "/api/schedules", (200, {"environment": "production", "schedules": [SCHEDULE]})
    )
    code, out, _ = cli(fake_api, "schedules", "list", "--env", "production")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["SCHEDULE", "WORKFLOW", "NAME"]
    assert row.split() == [
        "sch_0123456789abcdef",
        "reports.daily",
        "morning",
        "cron",
        "0",
        "9",
        "*",
        "*",
        "MON-FRI",
        "Europe/Berlin",
        "skip",
        "active",
        "2026-03-02T08:00:00Z",
    ]
    assert fake_api.last("GET", "/api/schedules").query == {"environment": ["production"]}


def test_pause_resume_and_trigger(fake_api: FakeApi) -> None:
    base = "/api/schedules/sch_0123456789abcdef"
    fake_api.on("POST", f"{base}/pause", (200, {**SCHEDULE, "paused": True}))
    fake_api.on("POST", f"{base}/resume", (200, SCHEDULE))
    fake_api.on(
        "POST",
        f"{base}/trigger",
        (
            200,
            {
                "status": "started",
                "scheduleId": SCHEDULE["id"],
                "runId": "idem-x",
                "scheduledTime": "t",
            },
        ),
    )
    assert cli(fake_api, "schedules", "pause", SCHEDULE["id"])[1].split() == [
        SCHEDULE["id"],
        "paused",
    ]
    assert cli(fake_api, "schedules", "resume", SCHEDULE["id"])[1].split() == [
        SCHEDULE["id"],
        "active",
    ]
    code, out, _ = cli(fake_api, "schedules", "trigger", SCHEDULE["id"], "--env", "preview")
    assert (code, out.split()) == (0, [SCHEDULE["id"], "started", "idem-x"])
    assert fake_api.last("POST", f"{base}/trigger").query == {"environment": ["preview"]}


def test_an_unknown_schedule_is_refused(fake_api: FakeApi) -> None:
    fake_api.on(
        "POST",
        "/api/schedules/sch_nope/pause",
        (404, {"error": "not_found", "message": "no schedule 'sch_nope'"}),
    )
    code, _, err = cli(fake_api, "schedules", "pause", "sch_nope")
    assert code == 1
    assert "not_found" in err
