"""The API continues a caller's trace, as deployed: ``POST /api/runs`` and ``POST
/api/events`` with a ``traceparent`` start runs in the caller's trace, the step runs in the
worker function (signed Lambda dispatch, the trace in its payload) under its attempt's span,
and the run detail gives the trace id and the viewer's link."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from aws_http import AUTH, serve_api
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from relayflow.tracing.ids import RunTrace, parse_traceparent
from tests.tracing.spans import one, parent_id, spans

__all__ = ["spans"]

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
VIEWER = "https://jaeger.example/trace/{traceId}"
SEEN: list[trace.SpanContext] = []


def look_around() -> str:
    SEEN.append(trace.get_current_span().get_span_context())
    return "looked"


@pytest.fixture(scope="module")
def traced_workflows() -> None:
    from relayflow.sdk.registry import workflow

    @workflow(id="api.traces.look")
    async def look(data: Any, ctx: Any) -> Any:
        return await ctx.step("look", look_around)


def test_a_run_started_with_a_traceparent_continues_the_callers_trace(
    traced_workflows: None, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    SEEN.clear()
    monkeypatch.setenv("RELAYFLOW_TRACE_VIEWER_URL", VIEWER)
    caller = parse_traceparent(CALLER)
    assert caller is not None
    with serve_api() as api:
        started = requests.post(
            f"{api.url}/api/runs",
            json={"workflowId": "api.traces.look"},
            headers={**AUTH, "traceparent": CALLER},
            timeout=30,
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        run = api.get(f"/api/runs/{run_id}").json()
        plain = api.post("/api/runs", {"workflowId": "api.traces.look"}).json()

    assert run["status"] == "completed", run
    assert run["traceId"] == CALLER.split("-")[1]
    assert run["traceUrl"] == f"https://jaeger.example/trace/{run['traceId']}"
    ids = RunTrace.of(run_id, CALLER)
    in_callers_trace = [
        span for span in spans.get_finished_spans() if span.context.trace_id == caller.trace_id
    ]
    root = one(in_callers_trace, "run api.traces.look")
    assert (root.context.trace_id, parent_id(root)) == (caller.trace_id, caller.span_id)
    # The step ran in the worker function under its attempt's span of the caller's trace.
    assert (SEEN[0].trace_id, SEEN[0].span_id) == (
        caller.trace_id,
        ids.step_attempt("look", 1).span_id,
    )
    # Without a traceparent, the run's trace is its own, derived from its id.
    assert plain["traceId"] == RunTrace.of(plain["id"]).trace_id_hex
    assert plain["traceId"] != run["traceId"]


def test_a_bad_traceparent_is_ignored_and_the_run_traced_on_its_own(
    traced_workflows: None, spans: InMemorySpanExporter
) -> None:
    with serve_api() as api:
        started = requests.post(
            f"{api.url}/api/runs",
            json={"workflowId": "api.traces.look"},
            headers={**AUTH, "traceparent": "00-not-a-trace-01"},
            timeout=30,
        )
    assert started.status_code == 201, started.text
    body = started.json()
    assert body["traceId"] == RunTrace.of(body["id"]).trace_id_hex
    assert "traceUrl" not in body or body["traceUrl"] is None
