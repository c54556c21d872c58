"""``/api/bulk-actions``: dry runs, jobs and their progress, listing, cancel, scopes, bad
input and ``Idempotency-Key``."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import READER, WRITER, Api

from relayflow.operations.bulk_models import BULK_WORKFLOW_ID
from relayflow.operations.ports import AuditEntry, AuditPage, AuditQuery


def waiting_runs(api: Api, count: int, tag: str) -> list[str]:
    """``count`` runs waiting on a signal, tagged ``tag``."""
    return [
        api.post("/api/runs", {"workflowId": "api.signal", "tags": [tag]}).body["id"]
        for _ in range(count)
    ]


def cancel_by_tag(tag: str, **extra: Any) -> dict[str, Any]:
    return {"action": "cancel", "filter": {"tag": tag}, **extra}


def test_a_dry_run_counts_every_match_and_changes_nothing(api: Api) -> None:
    runs = waiting_runs(api, 7, "nightly")
    waiting_runs(api, 2, "other")
    answer = api.post("/api/bulk-actions", cancel_by_tag("nightly", dryRun=True, pageSize=2))
    assert (answer.status, answer.body) == (200, {"matched": 7})
    assert {api.env.get_run(r).status for r in runs} == {"waiting"}
    assert api.env.list_runs(workflow=BULK_WORKFLOW_ID).runs == []


def test_a_job_cancels_the_matches_and_reports_its_progress(api: Api) -> None:
    runs = waiting_runs(api, 5, "nightly")
    others = waiting_runs(api, 3, "other")
    started = api.post("/api/bulk-actions", cancel_by_tag("nightly", pageSize=2, reason="bad"))
    assert started.status == 201
    job_id = started.body["jobId"]
    assert started.body["action"] == "cancel"
    assert started.body["filter"]["tag"] == "nightly"
    api.env.run_until_idle()
    job = api.get(f"/api/bulk-actions/{job_id}").body
    assert job["status"] == "completed"
    assert (job["matched"], job["done"], job["skipped"], job["failed"]) == (5, 5, 0, 0)
    assert job["pages"] == 3
    assert job["by"] == "static"  # the name StaticTokenAuth gives its tokens
    assert job["completedAt"] is not None
    assert {api.env.get_run(r).status for r in runs} == {"cancelled"}
    assert {api.env.get_run(r).status for r in others} == {"waiting"}
    listed = api.get("/api/bulk-actions").body
    assert [j["jobId"] for j in listed["jobs"]] == [job_id]


def test_jobs_are_listed_newest_first_with_a_cursor(api: Api) -> None:
    first = api.post("/api/bulk-actions", cancel_by_tag("a")).body["jobId"]
    api.env.advance("1s")
    second = api.post("/api/bulk-actions", cancel_by_tag("b")).body["jobId"]
    page = api.get("/api/bulk-actions", query={"limit": "1"}).body
    assert [j["jobId"] for j in page["jobs"]] == [second]
    rest = api.get("/api/bulk-actions", query={"limit": "1", "cursor": page["nextCursor"]}).body
    assert [j["jobId"] for j in rest["jobs"]] == [first]


def test_a_job_cancelled_before_its_first_page_acts_on_nothing(api: Api) -> None:
    runs = waiting_runs(api, 3, "nightly")
    job_id = api.post("/api/bulk-actions", cancel_by_tag("nightly")).body["jobId"]
    cancelled = api.post(f"/api/bulk-actions/{job_id}/cancel", {"reason": "wrong filter"})
    assert (cancelled.status, cancelled.body["status"]) == (200, "cancelled")
    api.env.run_until_idle()
    assert {api.env.get_run(r).status for r in runs} == {"waiting"}
    again = api.post(f"/api/bulk-actions/{job_id}/cancel")
    assert again.status == 409


def test_an_unknown_job_is_404(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.echo"}).body["id"]
    assert api.get("/api/bulk-actions/nope").status == 404
    # A run that is not a bulk job is not one.
    assert api.get(f"/api/bulk-actions/{run}").status == 404


@pytest.mark.parametrize("token", [WRITER, READER])
def test_bulk_actions_need_the_admin_scope(api: Api, token: str) -> None:
    waiting_runs(api, 1, "nightly")
    refused = api.post("/api/bulk-actions", cancel_by_tag("nightly"), token=token)
    assert (refused.status, refused.error) == (403, "forbidden")
    assert api.get("/api/bulk-actions", token=token).status == 403


@pytest.mark.parametrize(
    "body",
    [
        {"action": "delete", "filter": {"tag": "x"}},
        {"action": "cancel", "filter": {}},
        {"action": "cancel", "filter": {"statuses": ["sleeping"]}},
        {"action": "cancel", "filter": {"since": 10, "until": 5}},
        {"action": "cancel", "filter": {"since": "yesterday"}},
        {"action": "cancel", "filter": {"tag": "x"}, "concurrency": 33},
        {"action": "rerun", "filter": {"tag": "x"}},
        {"action": "cancel", "filter": {"tag": "x"}, "options": {"fromStep": "a"}},
        {"action": "pause", "filter": {"tag": "x"}, "options": {"compensate": True}},
    ],
    ids=[
        "unknown-action",
        "empty-filter",
        "unknown-status",
        "since-after-until",
        "bad-instant",
        "concurrency",
        "rerun-without-step",
        "step-without-rerun",
        "compensate-without-cancel",
    ],
)
def test_bad_input_answers_400(api: Api, body: dict[str, Any]) -> None:
    answer = api.post("/api/bulk-actions", body)
    assert answer.status == 400
    assert answer.error in {"invalid_body", "invalid_json"}
    assert api.env.list_runs(workflow=BULK_WORKFLOW_ID).runs == []


def test_the_same_idempotency_key_never_starts_two_jobs(api: Api) -> None:
    waiting_runs(api, 2, "nightly")
    headers = {"Idempotency-Key": "bulk-1"}
    first = api.post("/api/bulk-actions", cancel_by_tag("nightly"), headers=headers)
    again = api.post("/api/bulk-actions", cancel_by_tag("nightly"), headers=headers)
    assert first.status == again.status == 201
    assert again.body["jobId"] == first.body["jobId"]
    other = api.post("/api/bulk-actions", cancel_by_tag("other"), headers=headers)
    assert (other.status, other.error) == (422, "idempotency_key_reused")
    assert len(api.env.list_runs(workflow=BULK_WORKFLOW_ID).runs) == 1


class RecordingAudit:
    """An audit log that keeps what it is given."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    def record(self, entry: AuditEntry) -> None:
        self.entries.append(entry)

    def list(self, query: AuditQuery) -> AuditPage:
        return AuditPage(entries=list(reversed(self.entries)))


def test_each_job_is_recorded_once_in_the_audit_log(api: Api) -> None:
    audit = RecordingAudit()
    api.env.engine.audit = audit
    body = cancel_by_tag("nightly", reason="bad input")
    headers = {"Idempotency-Key": "audited"}
    job_id = api.post("/api/bulk-actions", body, headers=headers).body["jobId"]
    api.post("/api/bulk-actions", body, headers=headers)
    api.post("/api/bulk-actions", {**body, "dryRun": True})
    [entry] = audit.entries
    assert (entry.id, entry.kind, entry.run_id, entry.by) == (job_id, "bulk", job_id, "static")
    assert entry.reason == "bad input"
    assert entry.detail["action"] == "cancel"
    assert entry.detail["filter"]["tag"] == "nightly"


def test_a_bulk_pause_then_a_resume_at_a_bounded_rate(api: Api) -> None:
    runs = waiting_runs(api, 6, "nightly")
    api.post("/api/bulk-actions", {"action": "pause", "filter": {"tag": "nightly"}})
    api.env.run_until_idle()
    assert {api.env.get_run(r).status for r in runs} == {"paused"}
    resume = {"action": "resume", "filter": {"tag": "nightly"}, "ratePerSecond": 2}
    job_id = api.post("/api/bulk-actions", resume).body["jobId"]
    api.env.run_until_idle()
    job = api.get(f"/api/bulk-actions/{job_id}").body
    assert {api.env.get_run(r).status for r in runs} == {"waiting"}
    assert (job["status"], job["pages"], job["done"]) == ("completed", 3, 6)
    # Two runs a second: three pages, a second's sleep after each of the first two.
    assert job["completedAt"] - job["startedAt"] >= 2_000


def test_a_bulk_rerun_starts_one_linked_run_per_match(api: Api) -> None:
    originals = [
        api.post("/api/runs", {"workflowId": "api.careful", "tags": ["again"]}).body["id"]
        for _ in range(3)
    ]
    rerun = {"action": "rerun", "filter": {"tag": "again"}, "options": {"fromStep": "two"}}
    job_id = api.post("/api/bulk-actions", rerun).body["jobId"]
    api.env.run_until_idle()
    job = api.get(f"/api/bulk-actions/{job_id}").body
    assert (job["status"], job["done"]) == ("completed", 3)
    for original in originals:
        record = api.env.runs.get(original)
        assert record is not None and len(record.reruns) == 1
        copy = api.env.get_run(record.reruns[0])
        assert copy.status == "completed"
