"""``POST /api/runs`` flow-control options: refused with a 400 naming the field when they are
malformed, and with 422 ``flow_control_not_enforced`` (storing no run) while the orchestrator
does not enforce them yet. The OpenAPI document describes exactly what 400 refuses."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import Api
from jsonschema import Draft202012Validator

GOOD: list[tuple[str, Any]] = [
    ("delay", "10m"),
    ("delay", 1500),
    ("delay", 0),
    ("ttl", "1h"),
    ("priority", 1000),
    ("priority", -1000),
    ("priority", 7.0),
    ("concurrencyKey", "acme"),
    ("debounce", {"key": "customerId", "delay": "5s"}),
    ("debounce", {"key": "event.data.id", "delay": 500, "mode": "leading", "maxWait": "1m"}),
]
BAD: list[tuple[str, Any, str]] = [
    ("delay", "10 minutes", "'delay': value error, must be at least 0 ms"),
    ("delay", -1, "'delay': value error, must be at least 0 ms"),
    ("delay", "1.5s", "'delay': value error, must be at least 0 ms"),
    ("ttl", "0s", "'ttl': value error, must be at least 1 ms"),
    ("ttl", 0, "'ttl': value error, must be at least 1 ms"),
    ("priority", 1001, "priority"),
    ("priority", "5", "priority"),
    ("priority", 1.5, "priority"),
    ("concurrencyKey", "", "concurrencyKey"),
    ("concurrencyKey", "k" * 257, "concurrencyKey"),
    ("debounce", {"key": "k"}, "debounce.delay': field required"),
    ("debounce", {"key": "", "delay": "1s"}, "debounce.key"),
    ("debounce", {"key": "a[", "delay": "1s"}, "key must be a path"),
    ("debounce", {"key": "k", "delay": "0s"}, "'debounce.delay': value error, must be at least 1"),
    ("debounce", {"key": "k", "delay": "5s", "maxWait": "1s"}, "maxWait must not be shorter"),
    ("debounce", {"key": "k", "delay": "5s", "mode": "middle"}, "debounce.mode"),
    ("debounce", {"key": "k", "delay": "5s", "wait": 1}, "debounce.wait"),
]

#: Refusals JSON Schema cannot state (the path grammar, maxWait against delay): the document
#: says them in the fields' descriptions.
BEYOND_SCHEMA = {"key must be a path", "maxWait must not be shorter"}


def _trigger(api: Api, name: str, value: Any) -> Any:
    return api.post(
        "/api/runs", {"workflowId": "api.echo", "input": 1, "idempotencyKey": "k1", name: value}
    )


@pytest.mark.parametrize(("name", "value"), GOOD)
def test_a_well_formed_option_is_refused_as_not_enforced_and_stores_no_run(
    api: Api, name: str, value: Any
) -> None:
    answer = _trigger(api, name, value)
    assert answer.status == 422
    assert answer.body["error"] == "flow_control_not_enforced"
    assert name in answer.body["message"]
    assert api.get("/api/runs").body["runs"] == []


def test_the_default_priority_is_no_option(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.echo", "input": 1, "priority": 0})
    assert answer.status == 201


@pytest.mark.parametrize(("name", "value", "says"), BAD)
def test_a_malformed_option_answers_400_naming_it(
    api: Api, name: str, value: Any, says: str
) -> None:
    answer = _trigger(api, name, value)
    assert answer.status == 400
    assert says in answer.body["message"]


def _body_schema(api: Api) -> Draft202012Validator:
    doc = api.get("/api/openapi.json", token=None).body
    schema = doc["paths"]["/api/runs"]["post"]["requestBody"]["content"]["application/json"]
    root = {**schema["schema"], "components": doc["components"]}
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


@pytest.mark.parametrize(
    ("name", "value"),
    [(n, v) for n, v in GOOD] + [(n, v) for n, v, says in BAD if says not in BEYOND_SCHEMA],
)
def test_options_are_refused_exactly_when_the_document_forbids_them(
    api: Api, name: str, value: Any
) -> None:
    body = {"workflowId": "api.echo", "input": 1, name: value}
    allowed = _body_schema(api).is_valid(body)
    answer = api.post("/api/runs", body)
    assert answer.status == (422 if allowed else 400)


def test_the_document_declares_the_not_enforced_answer(api: Api) -> None:
    doc = api.get("/api/openapi.json", token=None).body
    refused = doc["paths"]["/api/runs"]["post"]["responses"]["422"]
    assert "flow_control_not_enforced" in refused["description"]
