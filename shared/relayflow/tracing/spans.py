"""Emits a run's spans after the fact through the OpenTelemetry API, with the ids
:mod:`relayflow.tracing.ids` derives and the times the run's record stores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from relayflow import __version__
from relayflow.tracing.context import context_of, span_context
from relayflow.tracing.ids import SpanRef
from relayflow.tracing.pinned import pinning

TRACER_NAME = "relayflow"
_NS_PER_MS = 1_000_000


def tracing_enabled() -> bool:
    """Whether a tracer provider is installed (without one every span is dropped: nothing
    is worked out for it)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def emit(
    name: str,
    ref: SpanRef,
    parent: SpanRef | None,
    start_ms: int,
    end_ms: int,
    attributes: Mapping[str, AttributeValue],
    *,
    failed: bool = False,
    links: Sequence[SpanRef] = (),
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
) -> None:
    """Emit the ended span ``ref`` (child of ``parent``; None: it starts its trace)."""
    tracer = trace.get_tracer(TRACER_NAME, __version__)
    parent_context = context_of(parent) if parent is not None else otel_context.Context()
    with pinning(ref):
        span = tracer.start_span(
            name,
            context=parent_context,
            kind=kind,
            attributes=attributes,
            links=[trace.Link(span_context(link)) for link in links],
            start_time=start_ms * _NS_PER_MS,
        )
    if failed:
        span.set_status(trace.Status(trace.StatusCode.ERROR))
    span.end(end_time=max(start_ms, end_ms) * _NS_PER_MS)
