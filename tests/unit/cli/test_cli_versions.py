"""Code versions in the CLI against a scripted API: ``runs upgrade`` and the request it
sends, the version line of ``runs get``, the VERSION column and ``--version`` filter of
``runs list``, and the ``versions`` table."""

from __future__ import annotations

import io
import json

from cli_fake_api import FakeApi

from relayflow.cli import main

STRANDED = {
    "id": "run_1",
    "workflowId": "orders.fulfil",
    "status": "running",
    "startedAt": 1_700_000_000_000,
    "tags": [],
    "codeVersion": {"build": "b-1", "function": "orders-host:7"},
    "versioning": "pinned",
    "versionWait": {
        "since": 1_700_000_060_000,
        "reason": "run run_1 is pinned to build b-1 of orders.fulfil; this host is b-2",
        "attempts": 3,
    },
}
UPGRADED = {
    **STRANDED,
    "status": "completed",
    "codeVersion": {"build": "b-2", "function": "orders-host:8"},
    "versionWait": None,
    "completedAt": 1_700_000_120_000,
}
NO_TIMELINE: dict[str, list[object]] = {"entries": []}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_runs_upgrade_posts_the_action_and_prints_the_moved_run(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs/run_1/upgrade", (200, UPGRADED))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, NO_TIMELINE))

    code, out, _ = cli(fake_api, "runs", "upgrade", "run_1", "--reason", "b-1 retired")

    assert code == 0
    assert fake_api.last("POST", "/api/runs/run_1/upgrade").body == {"reason": "b-1 retired"}
    assert "version   build b-2, function orders-host:8 (pinned)" in out.splitlines()


def test_runs_get_shows_the_version_and_why_the_run_waits_for_it(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, STRANDED))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, NO_TIMELINE))

    code, out, _ = cli(fake_api, "runs", "get", "run_1")

    assert code == 0
    lines = out.splitlines()
    at = lines.index("version   build b-1, function orders-host:7 (pinned)")
    assert "(3 tries): run run_1 is pinned to build b-1" in lines[at + 1]
    assert lines[at + 2].strip() == "move it: relayflow runs upgrade run_1"


def test_runs_list_filters_by_version_and_shows_the_build(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs", (200, {"runs": [STRANDED], "nextCursor": "c2"}))

    code, out, _ = cli(fake_api, "runs", "list", "--version", "b-1", "--limit", "1")

    assert code == 0
    assert fake_api.last("GET", "/api/runs").query == {"codeVersion": ["b-1"], "limit": ["1"]}
    header, row = out.splitlines()[:2]
    assert header.split()[-1] == "VERSION"
    assert row.split()[-2:] == ["b-1", "(waiting)"]
    assert "--version b-1" in out.splitlines()[-1]


def test_versions_prints_the_live_runs_per_build(fake_api: FakeApi) -> None:
    answer = {
        "versions": [
            {
                "workflowId": "orders.fulfil",
                "environment": "production",
                "build": "b-2",
                "function": "orders-host:8",
                "runs": 40,
                "waitingForVersion": 0,
            },
            {
                "workflowId": "orders.fulfil",
                "environment": "production",
                "build": "b-1",
                "function": None,
                "runs": 3,
                "waitingForVersion": 2,
            },
        ],
        "runsRead": 43,
        "truncated": True,
    }
    fake_api.on("GET", "/api/versions", (200, answer))

    code, out, _ = cli(fake_api, "versions", "--env", "production")
    json_code, json_out, _ = cli(fake_api, "--json", "versions")

    assert code == 0 and json_code == 0
    assert fake_api.last("GET", "/api/versions").query == {}
    lines = out.splitlines()
    assert lines[0].split() == ["WORKFLOW", "ENV", "BUILD", "FUNCTION", "LIVE", "RUNS", "WAITING"]
    assert lines[1].split() == ["orders.fulfil", "production", "b-2", "orders-host:8", "40", "0"]
    assert lines[2].split() == ["orders.fulfil", "production", "b-1", "-", "3", "2"]
    assert "counted the newest 43 live runs only" in out
    assert "relayflow runs upgrade RUN" in out
    assert json.loads(json_out) == answer


def test_runs_bulk_upgrade_counts_the_runs_on_a_build(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/bulk-actions", (200, {"matched": 3}))

    code, out, _ = cli(fake_api, "runs", "bulk", "upgrade", "--version", "b-1", "--dry-run")

    assert code == 0
    assert fake_api.last("POST", "/api/bulk-actions").body == {
        "action": "upgrade",
        "filter": {"codeVersion": "b-1"},
        "concurrency": 8,
        "dryRun": True,
    }
    assert out.strip() == "3 runs match; nothing was changed (dry run)"
