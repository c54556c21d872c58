"""The run's trace reaches an HTTP step host: the ``traceparent`` header names the
invocation's span, and the step's code runs under its attempt's span (so the spans the code
starts, an instrumented HTTP client's, join the run's trace)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from relayflow.dispatch.http_dispatcher import HttpDispatcher
from relayflow.ports import DispatcherResolver
from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv
from relayflow.tracing.ids import RunTrace
from relayflow.worker.hosts import make_wsgi_app
from tests.tracing.spans import by_name, one, parent_id, spans

__all__ = ["spans"]

SECRET = "host-signing-secret"


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


class HeaderLog:
    """A WSGI app in front of ``app`` keeping each request's ``traceparent`` header."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.traceparents: list[str | None] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.traceparents.append(environ.get("HTTP_TRACEPARENT"))
        return self.app(environ, start_response)


@pytest.fixture
def host() -> Iterator[tuple[str, HeaderLog]]:
    app = HeaderLog(make_wsgi_app(secret=SECRET))
    server: WSGIServer = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/step", app
    finally:
        server.shutdown()
        server.server_close()


SEEN: list[trace.SpanContext] = []


def call_the_bank() -> str:
    # What an instrumented HTTP client does: start a span under the current one.
    with trace.get_tracer("bank-client").start_as_current_span("POST /payments") as span:
        SEEN.append(span.get_span_context())
    return "paid"


@workflow(id="traces.over_http")
def over_http(data: Any, ctx: Any) -> str:
    paid: str = ctx.step("pay", call_the_bank)
    ctx.sleep("1s")
    return paid


def test_an_http_host_gets_the_traceparent_and_runs_step_code_in_the_runs_trace(
    clean_registry: None, spans: InMemorySpanExporter, host: tuple[str, HeaderLog]
) -> None:
    SEEN.clear()
    url, headers = host
    # Signed requests are checked against the host's wall clock.
    env = WorkflowTestEnv(workflows=[over_http], start_ms=int(time.time() * 1000))
    env.engine.dispatchers = DispatcherResolver(
        default=env.dispatcher, by_workflow={"traces.over_http": HttpDispatcher(url, secret=SECRET)}
    )
    run = env.trigger("traces.over_http")
    env.advance("2s")
    env.run_until_idle()
    assert env.get_run(run.id).status == "completed", env.get_run(run.id).error

    ids = RunTrace.of(run.id)
    assert headers.traceparents == [
        ids.invocation(1).traceparent,
        ids.invocation(2).traceparent,
    ]
    finished = spans.get_finished_spans()
    client_span = one(finished, "POST /payments")
    attempt = one(finished, "step pay")
    assert client_span.context.trace_id == ids.trace_id
    assert parent_id(client_span) == attempt.context.span_id
    assert attempt.context.span_id == ids.step_attempt("pay", 1).span_id
    assert parent_id(attempt) == ids.invocation(1).span_id
    assert [span.context.span_id for span in by_name(finished, "invoke traces.over_http")] == [
        ids.invocation(1).span_id,
        ids.invocation(2).span_id,
    ]
    assert [context.span_id for context in SEEN] == [client_span.context.span_id]
