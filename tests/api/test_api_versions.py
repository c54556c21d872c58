"""Code versions over HTTP: a run's build, function, versioning and version wait in its
detail and listing, the listing filtered by build, the live runs per build
(``GET /api/versions``) and ``POST /api/runs/{id}/upgrade`` moving a run to the current
version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from api_harness import READER, WRITER, Api, make_api

from relayflow.testing import WorkflowTestEnv
from relayflow.worker.builds import BUILD_ID_ENV

pytestmark = pytest.mark.usefixtures("clean_registry")

LEDGER: list[str] = []


def _define() -> list[Any]:
    from relayflow.sdk.registry import workflow

    def note(name: str) -> int:
        LEDGER.append(name)
        return 1

    @workflow(id="ver.pinned")
    async def pinned(data: Any, ctx: Any) -> Any:
        first = await ctx.step("first", note, "first")
        await ctx.sleep("1m")
        return first + await ctx.step("second", note, "second")

    @workflow(id="ver.signal", versioning="upgrade")
    async def signal(data: Any, ctx: Any) -> Any:
        return await ctx.wait_for_signal("go")

    return [pinned, signal]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    LEDGER.clear()
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    yield make_api(WorkflowTestEnv(workflows=_define()))


def _stranded_run(api: Api, monkeypatch: pytest.MonkeyPatch) -> str:
    """A pinned run on build-1 that waits for it while build-2 answers."""
    run = api.post("/api/runs", {"workflowId": "ver.pinned"}).body
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    api.env.advance("2m")
    api.env.run_until_idle()
    return str(run["id"])


def test_a_run_shows_its_code_version_versioning_and_version_wait(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _stranded_run(api, monkeypatch)

    run = api.get(f"/api/runs/{run_id}", token=READER).body
    listed = api.get("/api/runs", query={"workflowId": "ver.pinned"}, token=READER).body

    assert run["codeVersion"]["build"] == "build-1"
    assert run["versioning"] == "pinned"
    assert "build-1" in run["versionWait"]["reason"]
    assert run["versionWait"]["attempts"] >= 1 and run["versionWait"]["since"] > 0
    [row] = listed["runs"]
    assert row["codeVersion"]["build"] == "build-1" and row["versionWait"] is not None


def test_the_listing_filters_by_build(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    old = api.post("/api/runs", {"workflowId": "ver.signal"}).body["id"]
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    new = api.post("/api/runs", {"workflowId": "ver.signal"}).body["id"]

    on_one = api.get("/api/runs", query={"codeVersion": "build-1"}, token=READER).body["runs"]
    on_two = api.get("/api/runs", query={"codeVersion": "build-2"}, token=READER).body["runs"]
    on_none = api.get("/api/runs", query={"codeVersion": "build-9"}, token=READER).body["runs"]

    assert [r["id"] for r in on_one] == [old]
    assert [r["id"] for r in on_two] == [new]
    assert on_none == []
    assert api.get("/api/runs", query={"codeVersion": ""}).status == 400


def test_versions_counts_the_live_runs_per_build_and_workflow(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranded = _stranded_run(api, monkeypatch)
    for _ in range(2):
        api.post("/api/runs", {"workflowId": "ver.signal"})
    ended = api.post("/api/runs", {"workflowId": "ver.signal"}).body["id"]
    api.post(f"/api/runs/{ended}/signals", {"name": "go", "payload": 1})

    answer = api.get("/api/versions", token=READER)
    only_pinned = api.get("/api/versions", query={"workflowId": "ver.pinned"}).body

    assert answer.status == 200
    rows = [
        (v["workflowId"], v["build"], v["runs"], v["waitingForVersion"])
        for v in answer.body["versions"]
    ]
    assert rows == [("ver.signal", "build-2", 2, 0), ("ver.pinned", "build-1", 1, 1)]
    assert answer.body["runsRead"] == 3 and answer.body["truncated"] is False
    assert [v["workflowId"] for v in only_pinned["versions"]] == ["ver.pinned"]
    assert api.get(f"/api/runs/{stranded}").body["status"] == "running"
    assert api.get("/api/versions", token=WRITER).status == 403


def test_upgrade_moves_a_run_waiting_for_its_build_once_per_idempotency_key(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _stranded_run(api, monkeypatch)
    key = {"Idempotency-Key": "up-1"}

    moved = api.post(f"/api/runs/{run_id}/upgrade", {"reason": "build-1 retired"}, headers=key)
    again = api.post(f"/api/runs/{run_id}/upgrade", {"reason": "build-1 retired"}, headers=key)
    api.env.run_until_idle()
    done = api.get(f"/api/runs/{run_id}").body
    ended = api.post(f"/api/runs/{run_id}/upgrade")

    assert moved.status == 200, moved.body
    assert again.status == 200 and again.headers.get("idempotent-replayed") == "true"
    assert done["status"] == "completed" and done["output"] == 2
    assert done["codeVersion"]["build"] == "build-2" and done["versionWait"] is None
    assert LEDGER == ["first", "second"]
    [action] = done["actions"]
    assert (action["id"], action["kind"], action["reason"]) == (
        "up-1",
        "upgrade",
        "build-1 retired",
    )
    assert action["detail"]["from"]["build"] == "build-1"
    entries = api.get(f"/api/runs/{run_id}/timeline").body["entries"]
    assert [e["kind"] for e in entries if e["type"] == "action"] == ["upgrade"]
    assert ended.status == 409 and ended.body["error"] == "already_terminal"


def test_upgrade_of_a_run_on_no_particular_version_changes_nothing(api: Api) -> None:
    run_id = api.post("/api/runs", {"workflowId": "ver.signal"}).body["id"]

    answer = api.post(f"/api/runs/{run_id}/upgrade", token=WRITER)

    assert answer.status == 200
    assert answer.body["status"] == "waiting"
    assert answer.body["codeVersion"]["build"] == "build-1"
    assert answer.body["actions"][0]["detail"] == {"from": None, "versionWait": None}


def test_upgrade_needs_runs_write_and_an_existing_run(api: Api) -> None:
    run_id = api.post("/api/runs", {"workflowId": "ver.signal"}).body["id"]

    assert api.post(f"/api/runs/{run_id}/upgrade", token=READER).status == 403
    missing = api.post("/api/runs/nope/upgrade")
    assert missing.status == 404 and missing.body["error"] == "not_found"


def test_a_bulk_upgrade_moves_every_run_on_a_build_after_a_dry_run(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranded = [api.post("/api/runs", {"workflowId": "ver.pinned"}).body["id"] for _ in range(3)]
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    current = api.post("/api/runs", {"workflowId": "ver.pinned"}).body["id"]
    api.env.advance("2m")
    api.env.run_until_idle()
    body = {"action": "upgrade", "filter": {"codeVersion": "build-1"}, "reason": "retire 1"}

    counted = api.post("/api/bulk-actions", {**body, "dryRun": True})
    refused = api.post("/api/bulk-actions", body, token=WRITER)
    started = api.post("/api/bulk-actions", {**body, "pageSize": 2})
    api.env.run_until_idle()

    assert (counted.status, counted.body) == (200, {"matched": 3})
    assert refused.status == 403
    assert started.status == 201 and started.body["filter"]["codeVersion"] == "build-1"
    job = api.get(f"/api/bulk-actions/{started.body['jobId']}").body
    assert (job["status"], job["matched"], job["done"], job["failed"]) == ("completed", 3, 3, 0)
    for run_id in stranded:
        run = api.get(f"/api/runs/{run_id}").body
        assert run["status"] == "completed" and run["codeVersion"]["build"] == "build-2"
        assert [(a["kind"], a["by"]) for a in run["actions"]] == [
            ("upgrade", f"bulk:{started.body['jobId']}")
        ]
    assert api.get(f"/api/runs/{current}").body["actions"] == []
