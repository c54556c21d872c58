"""``relayflow audit`` against a scripted API: its filters become the query, the entries a
table, and a next page a command to run."""

from __future__ import annotations

import io
import json

from cli_fake_api import FakeApi

from relayflow.cli import main

PAGE = {
    "entries": [
        {
            "id": "k-2",
            "kind": "redrive",
            "at": 1_796_472_000_000,
            "by": "ops-token",
            "environment": "production",
            "workflowId": "billing.charge",
            "runId": "run_a",
            "reason": "card service back",
            "detail": {},
        },
        {
            "id": "k-1",
            "kind": "pause_workflow",
            "at": 1_796_471_000_000,
            "by": "cli",
            "environment": "production",
            "workflowId": "billing.charge",
            "runId": None,
            "reason": None,
            "detail": {},
        },
    ],
    "nextCursor": "eyJrIjoiMDE3OTY0NzEwMDAwMDAjay0xIn0",
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_filters_are_the_query_and_the_entries_a_table(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/audit", (200, PAGE))
    code, out, _ = cli(
        fake_api,
        "audit",
        "--env",
        "production",
        "--kind",
        "redrive",
        "--workflow",
        "billing.charge",
        "--run",
        "run_a",
        "--since",
        "2026-12-01T00:00:00Z",
        "--limit",
        "2",
    )

    assert code == 0
    assert fake_api.last("GET", "/api/audit").query == {
        "environment": ["production"],
        "kind": ["redrive"],
        "workflowId": ["billing.charge"],
        "runId": ["run_a"],
        "since": ["2026-12-01T00:00:00Z"],
        "limit": ["2"],
    }
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["AT", "(UTC)", "KIND", "BY"]
    assert lines[1].split() == [
        "2026-12-05",
        "12:00:00",
        "redrive",
        "ops-token",
        "production",
        "billing.charge",
        "run_a",
        "card",
        "service",
        "back",
    ]
    assert lines[2].split() == [
        "2026-12-05",
        "11:43:20",
        "pause_workflow",
        "cli",
        "production",
        "billing.charge",
        "-",
    ]
    assert lines[-1] == (
        "more: relayflow audit --env production --kind redrive --workflow billing.charge "
        "--run run_a --since 2026-12-01T00:00:00Z --limit 2 --cursor " + PAGE["nextCursor"]
    )


def test_json_prints_the_apis_answer(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/audit", (200, PAGE))
    code, out, _ = cli(fake_api, "audit", "--json")

    assert code == 0
    assert json.loads(out) == PAGE
    assert fake_api.last("GET", "/api/audit").query == {"limit": ["20"]}


def test_an_empty_log_says_so(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/audit", (200, {"entries": [], "nextCursor": None}))
    code, out, _ = cli(fake_api, "audit", "--cursor", "abc")

    assert (code, out) == (0, "no actions recorded\n")
    assert fake_api.last("GET", "/api/audit").query == {"limit": ["20"], "cursor": ["abc"]}


def test_a_refused_cursor_shows_the_apis_message(fake_api: FakeApi) -> None:
    refusal = {"error": "invalid_query", "message": "cursor is not one the audit log gave"}
    fake_api.on("GET", "/api/audit", (400, refusal))
    code, _, err = cli(fake_api, "audit", "--cursor", "junk")

    assert code != 0
    assert "cursor is not one the audit log gave" in err
