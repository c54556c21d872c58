"""``relayflow runs bulk|bulk-status|bulk-list`` against a scripted API."""

from __future__ import annotations

import io

import pytest
from cli_fake_api import FakeApi, Recorded

from relayflow.cli import main

JOB = {
    "jobId": "run_1",
    "status": "running",
    "action": "cancel",
    "filter": {"tag": "nightly"},
    "by": "ops",
    "reason": None,
    "concurrency": 8,
    "pages": 1,
    "matched": 100,
    "done": 98,
    "skipped": 1,
    "failed": 1,
    "reasons": [
        {"runId": "run_a", "outcome": "skipped", "code": "already_terminal", "message": "ended"},
        {"runId": "run_b", "outcome": "failed", "code": "unavailable", "message": "throttled"},
    ],
    "startedAt": 1,
    "completedAt": None,
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def bulk_route(req: Recorded) -> tuple[int, object]:
    if req.body.get("dryRun"):
        return 200, {"matched": 120}
    return 201, JOB


def test_a_dry_run_prints_the_count_and_starts_nothing(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/bulk-actions", bulk_route)
    code, out, _ = cli(
        fake_api, "runs", "bulk", "cancel", "--tag", "nightly", "--status", "waiting",
        "--status", "running", "--since", "1700000000000", "--dry-run",
    )  # fmt: skip
    assert code == 0
    assert "120 runs match" in out
    sent = [r.body for r in fake_api.requests]
    assert sent == [
        {
            "action": "cancel",
            "filter": {
                "tag": "nightly",
                "statuses": ["waiting", "running"],
                "since": 1700000000000,
            },
            "concurrency": 8,
            "dryRun": True,
        }
    ]


def test_a_refused_confirmation_starts_nothing(
    fake_api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_api.on("POST", "/api/bulk-actions", bulk_route)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, err = cli(fake_api, "runs", "bulk", "cancel", "--workflow", "orders")
    assert code == 1
    assert "120 runs match now" in out and "nothing was done" in err
    assert len(fake_api.requests) == 1


def test_a_confirmed_job_is_started_with_its_options(
    fake_api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_api.on("POST", "/api/bulk-actions", bulk_route)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, _ = cli(
        fake_api, "runs", "bulk", "redrive", "--status", "failed", "--retry", '{"max": 5}',
        "--concurrency", "4", "--reason", "fixed the bug",
    )  # fmt: skip
    assert code == 0
    assert "bulk job run_1 started" in out
    started = fake_api.requests[-1].body
    assert started["options"] == {"retry": {"max": 5}}
    assert (started["concurrency"], started["reason"]) == (4, "fixed the bug")
    assert "dryRun" not in started


def test_yes_skips_the_question(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/bulk-actions", bulk_route)
    code, _, _ = cli(fake_api, "runs", "bulk", "rerun", "--tag", "t", "--from-step", "s", "--yes")
    assert code == 0
    assert fake_api.requests[-1].body["options"] == {"fromStep": "s"}


def test_a_filter_is_required(fake_api: FakeApi) -> None:
    code, _, err = cli(fake_api, "runs", "bulk", "cancel", "--yes")
    assert code == 2 and "give a filter" in err
    assert fake_api.requests == []


def test_status_prints_the_progress_and_the_reasons(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/bulk-actions/run_1", (200, JOB))
    code, out, _ = cli(fake_api, "runs", "bulk-status", "run_1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "run_1  cancel  running: matched 100, done 98, skipped 1, failed 1"
    assert lines[1:] == [
        "  skipped run_a: already_terminal ended",
        "  failed run_b: unavailable throttled",
    ]


def test_status_follows_until_the_job_ends(fake_api: FakeApi) -> None:
    ended = {**JOB, "status": "completed", "done": 99, "failed": 0, "reasons": []}
    fake_api.on("GET", "/api/bulk-actions/run_1", [(200, JOB), (200, ended)])
    code, out, _ = cli(fake_api, "runs", "bulk-status", "run_1", "--follow", "--interval", "0")
    assert code == 0
    assert out.splitlines()[-1].endswith("completed: matched 100, done 99, skipped 1, failed 0")
    assert len(fake_api.requests) == 2


def test_list_prints_a_table(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/bulk-actions", (200, {"jobs": [JOB], "nextCursor": "c1"}))
    code, out, _ = cli(fake_api, "runs", "bulk-list", "--limit", "1")
    assert code == 0
    header, row, more = out.splitlines()
    assert header.split() == [
        "JOB", "ACTION", "STATUS", "MATCHED", "DONE", "SKIPPED", "FAILED", "BY",
    ]  # fmt: skip
    assert row.split() == ["run_1", "cancel", "running", "100", "98", "1", "1", "ops"]
    assert more == "more: --cursor c1"
    assert fake_api.last("GET", "/api/bulk-actions").query == {"limit": ["1"]}
