"""``relayflow concurrency show|release`` and the status line of ``runs get``, against a
scripted API."""

from __future__ import annotations

import io

from cli_fake_api import FakeApi

from relayflow.cli import main

BASE = "/api/workflows/crm.sync/concurrency"
KEY = {
    "workflowId": "crm.sync",
    "key": "acme",
    "limit": 1,
    "strategy": "queue",
    "inUse": 1,
    "holders": [{"runId": "run_a", "since": "2026-03-02T08:00:00Z"}],
    "queue": [
        {"runId": "run_b", "priority": 5, "position": 1, "queuedAt": "2026-03-02T08:00:01Z"},
        {"runId": "run_c", "priority": 0, "position": 2, "queuedAt": "2026-03-02T08:00:02Z"},
    ],
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_show_prints_the_keys_occupancy_holders_and_queue(fake_api: FakeApi) -> None:
    fake_api.on("GET", BASE, (200, KEY))
    code, out, _ = cli(fake_api, "concurrency", "show", "crm.sync", "--key", "acme")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "crm.sync  key acme: 1 of 1 in use (queue)"
    assert lines[2].split() == ["run_a", "2026-03-02T08:00:00Z"]
    assert [line.split()[:3] for line in lines[4:]] == [["1", "run_b", "5"], ["2", "run_c", "0"]]
    assert fake_api.last("GET", BASE).query == {"environment": ["development"], "key": ["acme"]}


def test_release_posts_the_run_and_prints_who_started(fake_api: FakeApi) -> None:
    answer = {
        "workflowId": "crm.sync",
        "key": "acme",
        "runId": "run_a",
        "released": True,
        "started": ["run_b"],
    }
    fake_api.on("POST", f"{BASE}/release", (200, answer))
    code, out, _ = cli(fake_api, "concurrency", "release", "crm.sync", "run_a", "--key", "acme")
    assert (code, out) == (0, "run_a  released; started: run_b\n")
    assert fake_api.last("POST", f"{BASE}/release").body == {"runId": "run_a", "key": "acme"}


def test_a_refused_release_shows_the_apis_message(fake_api: FakeApi) -> None:
    refusal = {"error": "run_active", "message": "run 'run_a' is waiting: cancel it instead"}
    fake_api.on("POST", f"{BASE}/release", (409, refusal))
    code, _, err = cli(fake_api, "concurrency", "release", "crm.sync", "run_a")
    assert code != 0
    assert "cancel it instead" in err
    assert fake_api.last("POST", f"{BASE}/release").body == {"runId": "run_a"}


def test_runs_get_shows_why_a_run_waits(fake_api: FakeApi) -> None:
    run = {
        "id": "run_b",
        "workflowId": "crm.sync",
        "status": "queued",
        "statusDetail": "queued (concurrency key acme: 1 of 1 in use)",
        "startedAt": 1_700_000_000_000,
    }
    fake_api.on("GET", "/api/runs/run_b", (200, run))
    fake_api.on("GET", "/api/runs/run_b/timeline", (200, {"runId": "run_b", "entries": []}))
    code, out, _ = cli(fake_api, "runs", "get", "run_b")
    assert code == 0
    assert "status    queued (concurrency key acme: 1 of 1 in use)" in out.splitlines()
