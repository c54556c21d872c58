"""Emits a run's spans after the fact through the OpenTelemetry API, with the ids
:mod:`relayflow.tracing.ids` derives and the times the run's record stores."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from relayflow import __version__
from relayflow.tracing.context import context_of, span_context
from relayflow.tracing.ids import SpanRef
from relayflow.tracing.pinned import pinning

TRACER_NAME = "relayflow"
_NS_PER_MS = 1_000_000


def _always(trace_id: int) -> bool:
    return True


#: Whether the configured sampler keeps a trace relayflow starts (by its id alone, so that
#: every process decides alike for every span of a run); set by relayflow.tracing.sdk.
_keeps_trace: list[Callable[[int], bool]] = [_always]


def sample_runs_with(keeps: Callable[[int], bool]) -> None:
    """Decide by ``keeps(trace_id)`` whether the spans of a run's own trace are recorded."""
    _keeps_trace[0] = keeps


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
    if parent is not None and parent.sampled:
        # The parent is one of the run's own spans (or a sampled caller's): the run's trace
        # is sampled as a whole, as its root span is.
        parent = replace(parent, sampled=_keeps_trace[0](parent.trace_id))
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
