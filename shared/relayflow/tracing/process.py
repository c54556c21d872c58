"""Tracing in relayflow's deployed functions: configured once per container when the
``relayflow[otel]`` extra is installed, flushed before each invocation returns (a frozen
Lambda sandbox exports nothing)."""

from __future__ import annotations

import logging
import os

from opentelemetry import trace

_log = logging.getLogger("relayflow.tracing")
_FLUSH_MS = 2_000


def configure_from_environment() -> None:
    """Configure the SDK from the ``OTEL_*`` variables (see
    :func:`relayflow.tracing.sdk.configure_tracing`); without the SDK, tracing stays off."""
    try:
        from relayflow.tracing.sdk import configure_tracing
    except ImportError:
        if os.environ.get("OTEL_TRACES_EXPORTER") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            _log.warning("OTEL_* variables are set but relayflow[otel] is not installed")
        return
    configure_tracing()


def flush_spans() -> None:
    """Export the spans still buffered by the installed tracer provider, if it buffers."""
    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is None:
        return
    try:
        flush(_FLUSH_MS)
    except Exception:  # exporting never fails an invocation
        _log.exception("spans could not be flushed")
