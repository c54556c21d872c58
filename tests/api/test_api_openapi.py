"""The OpenAPI document: 3.1, every route listed, every response has a schema, answers match."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from api_harness import Api

_METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture
def doc(api: Api) -> dict[str, Any]:
    answer = api.get("/api/openapi.json", token=None)
    assert answer.status == 200
    return answer.body  # type: ignore[no-any-return]


def _routes(api: Api) -> set[tuple[str, str]]:
    routes = api.app.routes()
    return {(r.method.lower(), r.openapi_path) for r in routes if r.include_in_schema}


def test_it_is_openapi_3_1(doc: dict[str, Any]) -> None:
    assert doc["openapi"].startswith("3.1")
    assert doc["info"]["title"] == "relayflow API"
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_it_passes_the_openapi_validator_when_installed(doc: dict[str, Any]) -> None:
    validator = pytest.importorskip("openapi_spec_validator")

    validator.validate(doc)


def test_it_lists_every_route(api: Api, doc: dict[str, Any]) -> None:
    listed = {(m, p) for p, ops in doc["paths"].items() for m in ops if m in _METHODS}

    assert listed == _routes(api)
    assert len(listed) == 45


def test_every_response_declares_a_json_schema(doc: dict[str, Any]) -> None:
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            # Validation problems answer 400; a 422 only ever means a reused Idempotency-Key.
            refused = op["responses"].get("422", {"description": "idempotency_key_reused"})
            assert refused["description"].startswith("idempotency_key_reused"), (method, path)
            for status, response in op["responses"].items():
                schema = response["content"]["application/json"]["schema"]
                assert schema, (method, path, status)
                if int(status) >= 400:
                    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}


def test_every_ref_resolves(doc: dict[str, Any]) -> None:
    text = str(doc)
    for name in set(re.findall(r"#/components/schemas/(\w+)", text)):
        assert name in doc["components"]["schemas"], name


def test_secured_operations_name_their_scope(doc: dict[str, Any]) -> None:
    public = {("get", "/api/healthz"), ("get", "/api/openapi.json")}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if (method, path) in public:
                assert not op.get("security")
            elif path == "/api/runs/{run_id}/checkpoints":
                assert op["security"] == [{"checkpointCapability": []}]
            else:
                [requirement] = op["security"]
                assert requirement["bearerAuth"][0] in {
                    "runs:read",
                    "runs:write",
                    "runs:admin",
                    "events:write",
                    "manifests:write",
                }


def _operation(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    for template, ops in doc["paths"].items():
        pattern = "^" + re.sub(r"\{\w+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and method in ops:
            return ops[method]  # type: ignore[no-any-return]
    raise AssertionError(f"no operation for {method} {path}")


def _check(doc: dict[str, Any], method: str, path: str, status: int, body: Any) -> None:
    op = _operation(doc, method.lower(), path)
    declared = op["responses"].get(str(status))
    assert declared is not None, f"{method} {path} answered undeclared {status}"
    schema = dict(declared["content"]["application/json"]["schema"])
    schema["components"] = doc["components"]
    jsonschema.validate(body, schema)


def test_answers_match_their_declared_schemas(api: Api, doc: dict[str, Any]) -> None:
    manifest_body = {"environment": "preview", "manifest": {"workflows": []}}
    requests: list[tuple[str, str, Any]] = [
        ("POST", "/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}, "tags": ["x"]}),
        ("POST", "/api/runs", {"workflowId": "api.approval", "idempotencyKey": "k"}),
        ("POST", "/api/runs", {"workflowId": "api.approval", "idempotencyKey": "k"}),
        ("POST", "/api/runs", {"workflowId": "api.fails"}),
        ("POST", "/api/runs", {"workflowId": 1}),
        ("GET", "/api/runs", None),
        ("GET", "/api/audit", None),
        ("GET", "/api/runs/idem-api.approval-k", None),
        ("GET", "/api/runs/idem-api.approval-k/timeline", None),
        ("GET", "/api/runs/nope", None),
        ("POST", "/api/runs/idem-api.approval-k/tokens/approve-1/heartbeat", None),
        ("POST", "/api/runs/idem-api.approval-k/signals", {"name": "s"}),
        ("POST", "/api/runs/idem-api.approval-k/events", {"eventType": "e"}),
        ("POST", "/api/runs/idem-api.approval-k/tokens/approve-1", {"payload": 1}),
        (
            "POST",
            "/api/runs/idem-api.approval-k/tokens/approve-1/fail",
            {"error": {"message": "m"}},
        ),
        ("POST", "/__voyant/tokens/approve-1", {"payload": 1}),
        ("POST", "/api/runs/idem-api.approval-k/pause", {"reason": "r"}),
        ("GET", "/api/runs/idem-api.approval-k/timeline", None),
        ("POST", "/api/runs/idem-api.approval-k/resume", {}),
        ("POST", "/api/runs/idem-api.approval-k/cancel", {}),
        ("POST", "/api/runs/idem-api.approval-k/redrive", {}),
        ("POST", "/api/manifests", manifest_body),
        ("GET", "/api/manifests/preview", None),
        ("GET", "/api/manifests/production", None),
        ("POST", "/api/events", {"environment": "production", "envelope": {}}),
        (
            "POST",
            "/api/events",
            {"environment": "production", "envelope": {"name": "a", "emittedAt": "t"}},
        ),
        ("GET", "/api/healthz", None),
    ]
    statuses = set()
    for method, path, body in requests:
        answer = api.call(method, path, body=body)
        statuses.add(answer.status)
        _check(doc, method, path, answer.status, answer.body)
    assert {200, 201, 400, 404, 409} <= statuses
