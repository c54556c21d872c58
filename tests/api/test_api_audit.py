"""``GET /api/audit`` over HTTP (in-memory driver, virtual clock): camelCase entries newest
first, the filters, paging by cursor, and 400 for a bad cursor, limit or instant."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import INGESTER, READER, Api

from relayflow.operations.audit import DAY_MS
from relayflow.operations.ports import AuditEntry


def record(api: Api, entry_id: str, ago_ms: int, **fields: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "kind": "pause",
        "by": "ops-token",
        "environment": "production",
        "workflow_id": "api.ship",
        "run_id": "run-1",
    }
    values.update(fields)
    entry = AuditEntry(id=entry_id, at=api.env.now() - ago_ms, **values)
    audit = api.env.engine.audit
    assert audit is not None
    audit.record(entry)
    return entry


@pytest.fixture
def logged(api: Api) -> Api:
    record(api, "k-old", 2 * DAY_MS, kind="cancel", reason="wrong input")
    record(api, "k-mid", DAY_MS, kind="rerun", run_id="run-2", detail={"fromStep": "charge"})
    record(api, "k-new", 1000, kind="pause_workflow", run_id=None, environment="preview")
    record(api, "job-1", 500, kind="bulk", workflow_id=None, run_id=None, by="bulk:job-1")
    return api


def test_entries_come_newest_first_in_camel_case(logged: Api) -> None:
    answer = logged.get("/api/audit", token=READER)

    assert answer.status == 200, answer.body
    assert [e["id"] for e in answer.body["entries"]] == ["job-1", "k-new", "k-mid", "k-old"]
    assert answer.body["nextCursor"] is None
    mid = answer.body["entries"][2]
    assert mid == {
        "id": "k-mid",
        "kind": "rerun",
        "at": logged.env.now() - DAY_MS,
        "by": "ops-token",
        "environment": "production",
        "workflowId": "api.ship",
        "runId": "run-2",
        "reason": None,
        "detail": {"fromStep": "charge"},
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"environment": "preview"}, ["k-new"]),
        ({"kind": "rerun"}, ["k-mid"]),
        ({"workflowId": "api.ship"}, ["k-new", "k-mid", "k-old"]),
        ({"runId": "run-1"}, ["k-old"]),
        ({"since": "2023-11-13T22:13:20Z"}, ["job-1", "k-new", "k-mid"]),
        ({"until": str(1_700_000_000_000 - 900)}, ["k-new", "k-mid", "k-old"]),
    ],
)
def test_filters(logged: Api, query: dict[str, str], expected: list[str]) -> None:
    answer = logged.get("/api/audit", query=query)

    assert answer.status == 200, answer.body
    assert [e["id"] for e in answer.body["entries"]] == expected


def test_pages_follow_the_cursor(logged: Api) -> None:
    seen: list[str] = []
    query: dict[str, str] = {"limit": "3", "workflowId": "api.ship"}
    first = logged.get("/api/audit", query=query)
    seen += [e["id"] for e in first.body["entries"]]
    assert first.body["nextCursor"] is None  # three matches fill the page exactly

    query["limit"] = "1"
    cursor: str | None = None
    paged: list[str] = []
    for _ in range(5):
        answer = logged.get("/api/audit", query={**query, **({"cursor": cursor} if cursor else {})})
        assert answer.status == 200, answer.body
        paged += [e["id"] for e in answer.body["entries"]]
        cursor = answer.body["nextCursor"]
        if cursor is None:
            break

    assert paged == seen == ["k-new", "k-mid", "k-old"]


@pytest.mark.parametrize(
    "query",
    [
        {"cursor": "not-a-cursor"},
        {"cursor": "eyJrIjoxfQ"},
        {"limit": "0"},
        {"limit": "1001"},
        {"since": "yesterday"},
        {"kind": "delete"},
        {"environment": "staging"},
    ],
)
def test_a_bad_query_answers_400(logged: Api, query: dict[str, str]) -> None:
    answer = logged.get("/api/audit", query=query)

    assert answer.status == 400, answer.body
    assert answer.body["error"] == "invalid_query"
    assert answer.body["message"]


def test_reading_the_audit_log_needs_runs_read(logged: Api) -> None:
    assert logged.get("/api/audit", token=None).status == 401
    refused = logged.get("/api/audit", token=INGESTER)
    assert refused.status == 403
    assert refused.body["error"] == "forbidden"


def test_without_an_audit_log_the_page_is_empty_and_the_query_still_checked(api: Api) -> None:
    api.env.engine.audit = None

    empty = api.get("/api/audit", query={"kind": "pause"})
    refused = api.get("/api/audit", query={"cursor": "not-a-cursor"})

    assert (empty.status, empty.body) == (200, {"entries": [], "nextCursor": None})
    assert (refused.status, refused.body["error"]) == (400, "invalid_query")


def _start(api: Api, workflow_id: str) -> str:
    answer = api.post("/api/runs", {"workflowId": workflow_id, "environment": "production"})
    assert answer.status == 201, answer.body
    return str(answer.body["id"])


def test_the_engines_actions_are_listed_once_per_action_id(api: Api) -> None:
    run_id = _start(api, "api.signal")
    admin = api.env.admin
    admin.pause_run(run_id, by="ops-token", action_id="k-pause", reason="investigating")
    admin.pause_run(run_id, by="ops-token", action_id="k-pause", reason="a retry")
    api.env.advance("1s")
    admin.resume_run(run_id, by="cli", action_id="k-resume")
    api.env.advance("1s")
    admin.cancel_run(run_id, by="ops-token", action_id="k-cancel", reason="not needed")

    answer = api.get("/api/audit", query={"runId": run_id})

    assert answer.status == 200, answer.body
    listed = [(e["id"], e["kind"], e["by"], e["reason"]) for e in answer.body["entries"]]
    assert listed == [
        ("k-cancel", "cancel", "ops-token", "not needed"),
        ("k-resume", "resume", "cli", None),
        ("k-pause", "pause", "ops-token", "investigating"),
    ]
    assert {e["workflowId"] for e in answer.body["entries"]} == {"api.signal"}
    assert {e["environment"] for e in answer.body["entries"]} == {"production"}
