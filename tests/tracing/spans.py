"""The SDK's in-memory exporter as the process's tracer provider for one test, and reading
span trees."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.util._once import Once

from relayflow.tracing.ids import sample_runs_with
from relayflow.tracing.sdk import configure_tracing


def forget_the_provider() -> None:
    # The API sets its global provider once per process; tests after this one must run
    # untraced, as a process without a provider does (what OpenTelemetry's own tests do).
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    sample_runs_with(lambda trace_id: True)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished during the test."""
    with recording() as exporter:
        yield exporter


@contextmanager
def recording(sampler: Sampler | None = None) -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider for the block (with ``sampler``, else the SDK's
    default), exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    forget_the_provider()
    trace.set_tracer_provider(provider)
    assert configure_tracing() is provider
    try:
        yield exporter
    finally:
        provider.shutdown()
        forget_the_provider()


def by_name(finished: Any, name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def one(finished: Any, name: str) -> ReadableSpan:
    found = by_name(finished, name)
    assert len(found) == 1, f"{name}: {[span.name for span in finished]}"
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None
