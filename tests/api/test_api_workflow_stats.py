"""A workflow's statistics over HTTP: runs that ended by status, success rate, duration
percentiles and the hourly series from the rollup, the waiting runs now, ranges given
relative or absolute, and the 4xx of bad ranges."""

from __future__ import annotations

from typing import Any

from api_harness import INGESTER, READER, Api

from relayflow.stats import DURATION_BUCKETS
from relayflow.stats.rollup import HOUR_MS


def _run(api: Api, workflow_id: str, **extra: Any) -> dict[str, Any]:
    answer = api.post(
        "/api/runs", {"workflowId": workflow_id, "environment": "production", **extra}
    )
    assert answer.status == 201, answer.body
    body: dict[str, Any] = answer.body
    return body


def _stats(api: Api, workflow_id: str, **query: str) -> Any:
    return api.get(
        f"/api/workflows/{workflow_id}/stats",
        query={"environment": "production", **query},
        token=READER,
    )


def test_the_figures_count_the_runs_that_ended_by_status_with_their_series(api: Api) -> None:
    for _ in range(3):
        assert _run(api, "api.echo")["status"] == "completed"
    ended = [_run(api, "api.fails") for _ in range(2)]
    assert {run["status"] for run in ended} == {"failed"}
    api.env.advance("1h")
    assert _run(api, "api.echo")["status"] == "completed"
    _run(api, "api.echo", **{"delay": "10m"})

    answer = _stats(api, "api.echo")
    assert answer.status == 200, answer.body
    body = answer.body
    assert (body["workflowId"], body["environment"], body["runs"]) == ("api.echo", "production", 4)
    assert body["byStatus"]["completed"] == 4 and body["successRate"] == 1.0
    # Inline runs end in the millisecond they start (virtual time): all in the first bucket.
    assert body["durationMs"]["p50"] == DURATION_BUCKETS.midpoint(0)
    assert body["durationMs"]["mean"] == 0
    assert body["until"] - body["since"] == 24 * HOUR_MS
    hours = body["hours"]
    assert len(hours) == 25, "every hour of the range, from the one holding its start"
    busy = [(h["hour"] % HOUR_MS, h["runs"]) for h in hours if h["runs"]]
    assert busy == [(0, 3), (0, 1)]
    waiting = {group["status"]: group for group in body["waiting"]}
    assert waiting["delayed"]["count"] == 1 and waiting["queued"]["count"] == 0
    assert waiting["delayed"]["runs"][0]["status"] == "delayed"

    failing = _stats(api, "api.fails").body
    assert (failing["runs"], failing["byStatus"]["failed"], failing["successRate"]) == (2, 2, 0)
    elsewhere = api.get("/api/workflows/api.echo/stats", query={"environment": "preview"}).body
    assert (elsewhere["runs"], elsewhere["successRate"], elsewhere["durationMs"]["p95"]) == (
        0,
        None,
        None,
    )


def test_a_range_counts_only_the_hours_it_covers(api: Api) -> None:
    _run(api, "api.echo")
    api.env.advance("3h")
    _run(api, "api.echo")
    recent = _stats(api, "api.echo", **{"from": "1h"}).body
    assert recent["runs"] == 1
    start = api.env.now() - 5 * HOUR_MS
    absolute = _stats(api, "api.echo", **{"from": str(start), "to": str(start + 2 * HOUR_MS)})
    assert absolute.status == 200 and absolute.body["runs"] == 1
    assert absolute.body["since"] == start


def test_the_paused_runs_of_the_workflow_are_listed_with_their_count(api: Api) -> None:
    waiting = _run(api, "api.signal")
    assert api.post(f"/api/runs/{waiting['id']}/pause").status == 200
    _run(api, "api.echo")
    groups = {g["status"]: g for g in _stats(api, "api.signal").body["waiting"]}
    assert groups["paused"]["count"] == 1 and not groups["paused"]["capped"]
    assert [run["id"] for run in groups["paused"]["runs"]] == [waiting["id"]]
    assert _stats(api, "api.echo").body["waiting"][2]["count"] == 0


def test_bad_ranges_answer_400_and_the_route_needs_the_read_scope(api: Api) -> None:
    later = api.env.now()
    refusals = [
        ({"from": str(later), "to": str(later - 1)}, "invalid_range"),
        ({"from": "40d"}, "invalid_range"),
        ({"from": "yesterday"}, "invalid_query"),
        ({"to": "2026-02-30T10:00:00Z"}, "invalid_query"),
    ]
    for query, code in refusals:
        answer = _stats(api, "api.echo", **query)
        assert (answer.status, answer.body["error"]) == (400, code), query
        assert answer.body["message"]
    bad_environment = api.get("/api/workflows/api.echo/stats", query={"environment": "moon"})
    assert bad_environment.status == 400
    refused = api.get("/api/workflows/api.echo/stats", token=INGESTER)
    assert refused.status == 403
