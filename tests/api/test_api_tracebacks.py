"""A failed step's type and traceback over HTTP, as deployed: the step runs in the worker
function (signed Lambda dispatch), the run lives in DynamoDB on moto, and the run detail and
the timeline carry the error's ``name`` and ``stack`` as the OpenAPI document says."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from aws_http import serve_api
from jsonschema import Draft202012Validator

THIS_FILE = str(Path(__file__).resolve())


def load_order(order: dict[str, Any]) -> Any:
    return order["id"]


LOOKUP_LINE = inspect.getsourcelines(load_order)[1] + 1
CALLS: list[int] = []


def flaky_charge() -> Any:
    CALLS.append(1)
    if len(CALLS) == 1:
        raise ConnectionError("gateway refused")
    return "charged"


@pytest.fixture(scope="module")
def failing_workflows() -> None:
    from relayflow.sdk import RetryPolicy
    from relayflow.sdk.registry import workflow

    @workflow(id="api.tb.keyerror")
    async def keyerror(data: Any, ctx: Any) -> Any:
        return await ctx.step("load", load_order, {})

    @workflow(id="api.tb.retried")
    async def retried(data: Any, ctx: Any) -> Any:
        return await ctx.step("charge", flaky_charge, retry=RetryPolicy(max=2, initial=1))


def _schema(doc: dict[str, Any], name: str) -> Draft202012Validator:
    root = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
    return Draft202012Validator(root)


def test_the_run_detail_and_timeline_show_the_steps_type_and_traceback(
    failing_workflows: None,
) -> None:
    with serve_api() as api:
        started = api.post("/api/runs", {"workflowId": "api.tb.keyerror"})
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        run = api.get(f"/api/runs/{run_id}").json()
        timeline = api.get(f"/api/runs/{run_id}/timeline").json()
        doc = api.get("/api/openapi.json").json()

    assert run["status"] == "failed"
    error = run["error"]
    assert (error["name"], error["code"], error["message"]) == ("KeyError", "UNKNOWN", "'id'")
    assert f'File "{THIS_FILE}", line {LOOKUP_LINE}, in load_order' in error["stack"]
    assert error["stack"].rstrip().endswith("KeyError: 'id'")
    assert "site-packages" not in error["stack"]
    assert "relayflow" not in error["stack"].replace(THIS_FILE, "")
    (attempt,) = [e for e in timeline["entries"] if e["type"] == "step"]
    assert (attempt["id"], attempt["outcome"]) == ("load", "err")
    assert attempt["error"]["name"] == "KeyError"
    assert attempt["error"]["stack"] == error["stack"]
    run_error_schema = doc["components"]["schemas"]["RunErrorView"]["properties"]
    assert {"name", "stack"} <= set(run_error_schema)
    _schema(doc, "RunView").validate(run)
    _schema(doc, "TimelineView").validate(timeline)


def test_a_retried_attempt_that_succeeded_keeps_its_traceback_in_the_timeline(
    failing_workflows: None,
) -> None:
    CALLS.clear()
    with serve_api() as api:
        started = api.post("/api/runs", {"workflowId": "api.tb.retried"})
        assert started.status_code == 201, started.text
        assert started.json()["status"] == "completed", started.text
        timeline = api.get(f"/api/runs/{started.json()['id']}/timeline").json()

    steps = [e for e in timeline["entries"] if e["type"] == "step"]
    assert [(e["attempt"], e["outcome"]) for e in steps] == [(1, "err"), (2, "ok")]
    failed = steps[0]["error"]
    assert failed["name"] == "ConnectionError"
    assert "in flaky_charge" in failed["stack"]
    assert failed["stack"].rstrip().endswith("ConnectionError: gateway refused")
    assert steps[1].get("error") is None
