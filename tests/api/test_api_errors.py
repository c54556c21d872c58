"""Every refusal is ``{"error", "message"}`` with its status; no input yields a 500 or a trace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from api_harness import ADMIN, Api
from apigw import FakeLambdaContext, decode, http_event

from relayflow.api.app import create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.api.metrics import RecordingMetrics
from relayflow.errors import (
    DriverShutdownError,
    InboxFullError,
    NotParkedError,
    RelayflowError,
    RunTerminalError,
    StaleRunError,
)


class RaisingDriver:
    """A driver whose every call raises the given error (to exercise the exception map)."""

    def __init__(self, error: BaseException | None = None, ingest: Any = None) -> None:
        self.error = error
        self.ingest = ingest
        self.admin = self

    def _raise(self, *args: Any, **kwargs: Any) -> Any:
        assert self.error is not None
        raise self.error

    trigger = send_event = send_signal = complete_token = fail_token = _raise
    heartbeat_token = cancel_run = register_manifest = get_manifest = _raise
    list_runs = _raise

    def get_run(self, run_id: str) -> Any:
        if self.error is not None:
            raise self.error
        return None

    def ingest_event(self, *args: Any, **kwargs: Any) -> Any:
        if self.error is not None:
            raise self.error
        return self.ingest


def _call(driver: RaisingDriver, method: str, path: str, **kwargs: Any) -> Any:
    app = create_app(driver, driver, auth=StaticTokenAuth([ADMIN]), metrics=RecordingMetrics())
    event = http_event(method, path, token=ADMIN, **kwargs)
    return decode(app.resolve(event, FakeLambdaContext()))


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (NotParkedError("run r is not parked"), 409, "not_parked"),
        (RunTerminalError("run r is completed"), 409, "run_terminal"),
        (RunTerminalError("run r is completed", code="already_terminal"), 409, "already_terminal"),
        (InboxFullError("inbox full"), 409, "inbox_full"),
        (StaleRunError("lost a race"), 409, "conflict"),
        (DriverShutdownError("shut down"), 503, "unavailable"),
    ],
)
def test_domain_errors_map_to_their_status(error: RelayflowError, status: int, code: str) -> None:
    answer = _call(RaisingDriver(error), "POST", "/api/runs/r/signals", body={"name": "go"})

    assert answer.status == status
    assert answer.body["error"] == code
    assert answer.body["message"]


def test_a_transient_backing_service_failure_answers_503_without_details() -> None:
    error = RelayflowError("Throttling on table relayflow-runs-prod")
    error.transient = True  # type: ignore[attr-defined]

    answer = _call(RaisingDriver(error), "GET", "/api/runs/r")

    assert (answer.status, answer.error) == (503, "unavailable")
    assert "relayflow-runs-prod" not in answer.body["message"]


@pytest.mark.parametrize(
    "error", [RuntimeError("secret detail /var/task/x.py"), RelayflowError("odd", code="weird")]
)
def test_an_internal_failure_answers_500_with_the_request_id_and_no_trace(
    error: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = _call(RaisingDriver(error), "GET", "/api/runs/r")

    assert answer.status == 500
    assert answer.body["error"] == "internal_error"
    assert answer.body["requestId"].startswith("req-")
    assert "Traceback" not in json.dumps(answer.body)
    assert "/var/task" not in json.dumps(answer.body)


def test_all_matches_failing_answers_502() -> None:
    failed = {"ok": False, "reason": "trigger_failed_for_all_matches", "message": "every..."}
    body = {
        "environment": "production",
        "envelope": {"name": "a", "emittedAt": "2025-01-01T00:00:00Z"},
    }

    answer = _call(RaisingDriver(ingest=failed), "POST", "/api/events", body=body)

    assert answer.status == 502
    assert answer.body["ok"] is False
    assert answer.body["reason"] == "trigger_failed_for_all_matches"


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"raw_body": "{not json"}, 400, "invalid_json"),
        ({"raw_body": '{"workflowId": NaN}'}, 400, "invalid_json"),
        ({"raw_body": "[" * 100_000 + "]" * 100_000}, 400, "invalid_json"),
        ({"raw_body": b"\xff\xfe\x00{"}, 400, "invalid_json"),
        ({"raw_body": "not base64!!", "base64_body": True}, 400, "invalid_json"),
        ({"body": {"input": 1}}, 400, "invalid_body"),
        ({"body": {"workflowId": 3}}, 400, "invalid_body"),
        ({"body": {"workflowId": "w", "waitMs": "5"}}, 400, "invalid_body"),
        ({"body": {"workflowId": "w", "waitMs": True}}, 400, "invalid_body"),
        ({"body": {"workflowId": "w", "typo": 1}}, 400, "invalid_body"),
        ({"body": {"workflowId": "w", "environment": "qa"}}, 400, "invalid_body"),
        ({"body": ["workflowId"]}, 400, "invalid_body"),
        ({"body": "just a string"}, 400, "invalid_body"),
        ({"body": None, "raw_body": "null"}, 400, "invalid_body"),
        ({"raw_body": '{"workflowId": "' + "x" * 300_000 + '"}'}, 413, "payload_too_large"),
        (
            {"body": {"workflowId": "w"}, "headers": {"content-type": "text/plain"}},
            415,
            "unsupported_media_type",
        ),
    ],
)
def test_malformed_trigger_requests(
    api: Api, kwargs: dict[str, Any], status: int, code: str
) -> None:
    answer = api.call("POST", "/api/runs", **kwargs)

    assert answer.status == status
    assert answer.body["error"] == code
    assert isinstance(answer.body["message"], str) and answer.body["message"]


BODY_ROUTES = [
    "/api/runs",
    "/api/events",
    "/api/manifests",
    "/api/runs/r/events",
    "/api/runs/r/signals",
    "/api/runs/r/tokens/t/fail",
]
OPTIONAL_BODY_ROUTES = [
    "/api/runs/r/cancel",
    "/api/runs/r/tokens/t",
    "/api/runs/r/tokens/t/heartbeat",
]


@pytest.mark.parametrize("path", BODY_ROUTES + OPTIONAL_BODY_ROUTES)
@pytest.mark.parametrize("raw", [" ", "\n\t", "{", "nul", "'x'"])
def test_every_post_route_answers_invalid_json_for_a_body_that_is_not_json(
    api: Api, path: str, raw: str
) -> None:
    answer = api.call("POST", path, raw_body=raw)

    assert (answer.status, answer.error) == (400, "invalid_json")


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("raw", ["", None])
def test_an_empty_body_is_not_json_where_a_body_is_required(
    api: Api, path: str, raw: str | None
) -> None:
    answer = api.call("POST", path, raw_body=raw)

    assert (answer.status, answer.error) == (400, "invalid_json")
    assert "empty" in answer.body["message"]


@pytest.mark.parametrize("path", OPTIONAL_BODY_ROUTES)
def test_an_empty_body_stays_valid_where_the_body_is_optional(api: Api, path: str) -> None:
    answer = api.call("POST", path, raw_body="")

    # The run does not exist: the body passed and the route itself answered.
    assert (answer.status, answer.error) == (404, "not_found")


def test_an_empty_body_is_checked_after_authentication(api: Api) -> None:
    answer = api.call("POST", "/api/runs", raw_body="", token=None)

    assert answer.status == 401


def test_schema_violations_name_the_field(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "w", "tags": ["a", 5]})

    assert answer.error == "invalid_body"
    assert "tags.1" in answer.body["message"]
    assert answer.body["details"][0]["field"] == "tags.1"


def test_a_missing_required_field_is_named(api: Api) -> None:
    answer = api.post("/api/runs/r/tokens/t/fail", {"error": {"code": "X"}})

    assert answer.error == "invalid_body"
    assert "error.message" in answer.body["message"]


def test_unknown_routes_answer_404_route_not_found(api: Api) -> None:
    for path in ("/api/nothing", "/api/runs/r/unknown", "/nothing", "/api/runs/r/tokens"):
        answer = api.get(path)
        assert (answer.status, answer.error) == (404, "route_not_found"), path


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/api/runs", "GET, POST"),
        ("PUT", "/api/runs/r", "GET"),
        ("GET", "/api/runs/r/cancel", "POST"),
        ("POST", "/api/healthz", "GET"),
        ("PATCH", "/api/manifests/production", "GET"),
    ],
)
def test_wrong_methods_answer_405_with_allow(api: Api, method: str, path: str, allow: str) -> None:
    answer = api.call(method, path)

    assert (answer.status, answer.error) == (405, "method_not_allowed")
    assert answer.headers["allow"] == allow


def test_every_error_body_has_exactly_error_message_and_optional_extras(api: Api) -> None:
    answers = [
        api.get("/api/runs/none"),
        api.get("/api/nowhere"),
        api.call("POST", "/api/runs", raw_body="{"),
        api.post("/api/runs", {"workflowId": 1}),
        api.get("/api/runs", token=None),
    ]

    for answer in answers:
        assert {"error", "message"} <= set(answer.body)
        assert set(answer.body) <= {"error", "message", "requestId", "details"}
        assert answer.headers["content-type"] == "application/json"


def test_an_event_missing_powertools_fields_still_answers(api: Api) -> None:
    event = http_event("GET", "/api/healthz")
    del event["requestContext"]["stage"]
    del event["rawQueryString"]

    answer = decode(api.app.resolve(event, FakeLambdaContext()))

    assert answer.status == 200


def test_a_garbage_event_answers_500_internal_error(api: Api) -> None:
    raw = api.app.resolve({"nonsense": True, "headers": 5}, FakeLambdaContext())

    # Without a method and a path the event reads as GET / (the dashboard's page shell).
    if raw["statusCode"] == 200:
        assert raw["headers"]["Content-Type"].startswith("text/html")
        return
    answer = decode(raw)
    assert answer.status in (404, 500)
    assert answer.body["error"] in ("route_not_found", "internal_error")
