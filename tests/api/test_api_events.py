"""Event ingest and manifests over the in-memory driver (reference §7.1-7.2 bodies and codes)."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import INGESTER, PUBLISHER, READER, Api

from relayflow.api import metrics as m
from relayflow.events.filters import compile_filter
from relayflow.events.manifest import build_manifest


def _manifest() -> dict[str, Any]:
    big = compile_filter(
        "order.placed",
        {
            "target": {"id": "api.echo"},
            "where": {"gte": [{"path": "data.total"}, {"lit": 100}]},
            "input": {"object": {"order": {"path": "data.id"}}},
        },
    )
    return build_manifest(
        environment="development",
        workflows=["api.echo"],
        event_filters=[big],
        built_at=1,
    )


def _event(total: int, event_id: str = "evt-1") -> dict[str, Any]:
    return {
        "environment": "development",
        "envelope": {
            "name": "order.placed",
            "data": {"id": "o-1", "total": total},
            "metadata": {"eventId": event_id},
            "emittedAt": "2025-01-01T00:00:00Z",
        },
    }


def test_register_and_read_back_a_manifest(api: Api) -> None:
    manifest = _manifest()

    registered = api.post("/api/manifests", {"environment": "development", "manifest": manifest})
    again = api.post("/api/manifests", {"environment": "development", "manifest": manifest})
    read = api.get("/api/manifests/development")

    assert registered.status == 200
    assert registered.body == {"ok": True, "versionId": manifest["versionId"]}
    assert again.body == registered.body
    assert read.status == 200
    assert read.body["environment"] == "development"
    assert read.body["versionId"] == manifest["versionId"]
    assert read.body["manifest"]["eventFilters"] == manifest["eventFilters"]


def test_manifests_are_scoped_per_environment(api: Api) -> None:
    api.post("/api/manifests", {"environment": "development", "manifest": _manifest()})

    missing = api.get("/api/manifests/production")

    assert missing.status == 404
    assert missing.error == "not_found"
    assert missing.body["details"] == {"environment": "production"}


def test_an_unknown_environment_answers_400_invalid_environment(api: Api) -> None:
    answer = api.get("/api/manifests/staging")

    assert (answer.status, answer.error) == (400, "invalid_environment")


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"environment": "staging", "manifest": {}},
        {"environment": "development", "manifest": "nope"},
        {"environment": "development", "manifest": {"versionId": ""}},
    ],
)
def test_invalid_manifest_bodies_answer_400_invalid_body(api: Api, body: Any) -> None:
    answer = api.post("/api/manifests", body)

    assert answer.status == 400
    assert answer.error == "invalid_body"
    assert answer.body["message"]


def test_an_event_starts_a_run_per_matching_filter(api: Api) -> None:
    api.post("/api/manifests", {"environment": "development", "manifest": _manifest()})

    answer = api.post("/api/events", _event(250))

    assert answer.status == 200
    assert answer.body["ok"] is True
    assert answer.body["eventId"] == "evt-1"
    [match] = answer.body["matches"]
    assert match["status"] == "queued"
    assert match["targetWorkflowId"] == "api.echo"
    run = api.get("/api/runs/" + match["runId"]).body
    assert run["status"] == "completed"
    assert run["output"] == {"echo": {"order": "o-1"}}
    assert run["triggeredBy"]["kind"] == "event"
    assert api.metrics.counts[m.EVENTS_RECEIVED] == 1
    assert api.metrics.counts[m.EVENTS_MATCHED] == 1
    assert api.metrics.counts[m.RUNS_TRIGGERED] == 1


def test_an_event_with_a_traceparent_starts_runs_in_the_callers_trace(api: Api) -> None:
    api.post("/api/manifests", {"environment": "development", "manifest": _manifest()})
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    answer = api.post("/api/events", _event(250), headers={"traceparent": caller})
    untraced = api.post("/api/events", _event(250, "evt-2"))

    traced_run = api.get("/api/runs/" + answer.body["matches"][0]["runId"]).body
    assert traced_run["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    own_run = api.get("/api/runs/" + untraced.body["matches"][0]["runId"]).body
    assert own_run["traceId"] not in (None, traced_run["traceId"])


def test_the_same_event_twice_starts_one_run(api: Api) -> None:
    api.post("/api/manifests", {"environment": "development", "manifest": _manifest()})

    first = api.post("/api/events", _event(250)).body["matches"][0]["runId"]
    second = api.post("/api/events", _event(250)).body["matches"][0]["runId"]

    assert first == second
    assert len(api.get("/api/runs").body["runs"]) == 1


def test_an_event_no_filter_matches_starts_nothing(api: Api) -> None:
    api.post("/api/manifests", {"environment": "development", "manifest": _manifest()})

    answer = api.post("/api/events", _event(5))

    assert answer.body == {"ok": True, "eventId": "evt-1", "matches": []}


def test_an_event_without_a_manifest_answers_200_not_registered(api: Api) -> None:
    answer = api.post("/api/events", _event(250))

    assert answer.status == 200
    assert answer.body["ok"] is False
    assert answer.body["reason"] == "manifest_not_registered"
    assert api.metrics.counts[m.EVENTS_REJECTED] == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1], '"environment" must be one of production, preview, development'),
        ("text", "expected JSON object"),
        ({"environment": "qa"}, '"environment" must be one of production, preview, development'),
        ({"environment": "preview", "envelope": 3}, '"envelope" must be an object'),
        (
            {"environment": "preview", "envelope": {"name": "", "emittedAt": "x"}},
            '"envelope.name" must be a non-empty string',
        ),
        (
            {"environment": "preview", "envelope": {"name": "a"}},
            '"envelope.emittedAt" must be an ISO timestamp string',
        ),
        (
            {"environment": "preview", "envelope": {"name": "a", "emittedAt": "t", "metadata": 1}},
            '"envelope.metadata" must be an object when supplied',
        ),
        (
            {
                "environment": "preview",
                "envelope": {"name": "a", "emittedAt": "t"},
                "idempotencyKey": 5,
            },
            '"idempotencyKey" must be a string when supplied',
        ),
    ],
)
def test_event_bodies_are_validated_in_the_reference_order(
    api: Api, body: Any, message: str
) -> None:
    answer = api.post("/api/events", body)

    assert answer.status == 400
    assert answer.error == "invalid_body"
    assert answer.body["message"] == message
    assert api.metrics.counts[m.EVENTS_REJECTED] == 1


def test_an_event_over_256_kib_answers_413(api: Api) -> None:
    event = _event(250)
    event["envelope"]["data"]["blob"] = "x" * (256 * 1024)

    answer = api.post("/api/events", event)

    assert (answer.status, answer.error) == (413, "payload_too_large")


def test_an_empty_event_body_answers_400_invalid_json(api: Api) -> None:
    answer = api.call("POST", "/api/events", raw_body="")

    assert (answer.status, answer.error) == (400, "invalid_json")


@pytest.mark.parametrize(
    ("token", "path", "allowed"),
    [
        (INGESTER, "/api/events", True),
        (READER, "/api/events", False),
        (PUBLISHER, "/api/manifests", True),
        (INGESTER, "/api/manifests", False),
    ],
)
def test_event_and_manifest_writes_need_their_scope(
    api: Api, token: str, path: str, allowed: bool
) -> None:
    body = (
        _event(1) if path == "/api/events" else {"environment": "preview", "manifest": _manifest()}
    )

    answer = api.post(path, body, token=token)

    assert (answer.status != 403) is allowed
    if not allowed:
        assert answer.error == "forbidden"
