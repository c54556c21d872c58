"""The SDK's in-memory exporter as the process's tracer provider, and reading span trees."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from relayflow.tracing.sdk import configure_tracing

_EXPORTER = InMemorySpanExporter()


def _installed() -> None:
    """The global provider is set once per process: the first test installs it."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    configure_tracing()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished during the test."""
    _installed()
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def by_name(finished: Any, name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def one(finished: Any, name: str) -> ReadableSpan:
    found = by_name(finished, name)
    assert len(found) == 1, f"{name}: {[span.name for span in finished]}"
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None
