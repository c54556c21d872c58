"""``POST /api/runs`` flow-control options: refused with a 400 naming the field when they are
malformed, and carried out when they are well formed (a delayed run, a debounced trigger
joining its burst's run). The OpenAPI document describes exactly what 400 refuses."""

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
    ("debounce", {"key": "input.customerId", "delay": 500, "mode": "leading", "maxWait": "1m"}),
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
        "/api/runs",
        {
            "workflowId": "api.echo",
            "input": {"customerId": "c1"},
            "idempotencyKey": "k1",
            name: value,
        },
    )


@pytest.mark.parametrize(("name", "value"), GOOD)
def test_a_well_formed_option_is_accepted(api: Api, name: str, value: Any) -> None:
    answer = _trigger(api, name, value)
    assert answer.status == 201, answer.body
    delayed = (name == "delay" and value != 0) or (
        name == "debounce" and value.get("mode") != "leading"
    )
    assert answer.body["status"] == ("delayed" if delayed else "completed")


def test_a_delayed_run_answers_its_start_and_can_be_cancelled(api: Api) -> None:
    answer = _trigger(api, "delay", "10m")
    run = answer.body
    assert run["status"] == "delayed"
    cancelled = api.post(f"/api/runs/{run['id']}/cancel", {})
    assert cancelled.body["status"] == "cancelled"


def test_a_debounced_trigger_answers_200_with_the_run_it_joined(api: Api) -> None:
    body = {"workflowId": "api.echo", "debounce": {"key": "customerId", "delay": "30s"}}
    first = api.post("/api/runs", {**body, "input": {"customerId": "c1", "n": 1}})
    joined = api.post("/api/runs", {**body, "input": {"customerId": "c1", "n": 2}})
    assert (first.status, joined.status) == (201, 200)
    assert joined.body["id"] == first.body["id"]
    other = api.post("/api/runs", {**body, "input": {"customerId": "c2", "n": 3}})
    assert other.status == 201 and other.body["id"] != first.body["id"]


def test_a_debounce_key_missing_from_the_input_answers_400(api: Api) -> None:
    answer = api.post(
        "/api/runs",
        {"workflowId": "api.echo", "input": {}, "debounce": {"key": "customerId", "delay": "1s"}},
    )
    assert answer.status == 400
    assert answer.body["error"] == "concurrency_key_missing"
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
    body = {"workflowId": "api.echo", "input": {"customerId": "c1"}, name: value}
    allowed = _body_schema(api).is_valid(body)
    answer = api.post("/api/runs", body)
    assert answer.status == (201 if allowed else 400)
