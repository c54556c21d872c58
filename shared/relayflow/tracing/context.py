"""Trace context across process boundaries: the span a step's code runs under, and the
caller's span a trigger request carries."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from relayflow.tracing.ids import SpanRef

_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "relayflow_caller_traceparent", default=None
)


def span_context(ref: SpanRef, *, remote: bool = True) -> trace.SpanContext:
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if ref.sampled else trace.TraceFlags.DEFAULT)
    return trace.SpanContext(ref.trace_id, ref.span_id, is_remote=remote, trace_flags=flags)


def context_of(ref: SpanRef) -> otel_context.Context:
    """An OpenTelemetry context whose current span is ``ref`` (emitted elsewhere)."""
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context(ref)))


@contextmanager
def running_under(ref: SpanRef | None) -> Iterator[None]:
    """Make ``ref`` the current span for the block (the step attempt whose code runs), so the
    spans the code starts (an instrumented HTTP client's) join the run's trace."""
    if ref is None:
        yield
        return
    token = otel_context.attach(context_of(ref))
    try:
        yield
    finally:
        otel_context.detach(token)


def caller_traceparent(headers: Mapping[str, str]) -> str | None:
    """The W3C ``traceparent`` of the caller's span a request's headers carry, read by the
    configured propagators (``OTEL_PROPAGATORS``; W3C trace context by default)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    found = trace.get_current_span(propagate.extract(lowered)).get_span_context()
    if not found.is_valid:
        return None
    ref = SpanRef(found.trace_id, found.span_id, found.trace_flags.sampled)
    return ref.traceparent


@contextmanager
def continuing(headers: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, runs this thread triggers continue the trace of the caller whose
    request carried ``headers`` (when they carry one)."""
    token = _CALLER.set(caller_traceparent(headers))
    try:
        yield
    finally:
        _CALLER.reset(token)


def caller_trace() -> str | None:
    """The ``traceparent`` a run triggered here continues (see :func:`continuing`)."""
    return _CALLER.get()
