"""Configures the OpenTelemetry SDK for relayflow's processes (the ``relayflow[otel]``
extra), from the standard ``OTEL_*`` variables.

A run's spans are emitted after the fact with ids derived from the run (see
:mod:`relayflow.tracing.ids`): the SDK's id generator must hand out those ids. relayflow
installs :class:`PinnedIdGenerator` on the tracer provider it builds, or on the one already
installed (the AWS Distro for OpenTelemetry layer's, or your own), keeping that provider's
generator for every other span.
"""

from __future__ import annotations

import logging
import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision

from relayflow.tracing.ids import sample_runs_with
from relayflow.tracing.pinned import pinned

_log = logging.getLogger("relayflow.tracing")
#: The variables that ask relayflow to build a tracer provider when none is installed.
_EXPORT_VARIABLES = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


class PinnedIdGenerator(IdGenerator):
    """Gives a span the ids relayflow pinned for it, and ``fallback``'s to every other."""

    def __init__(self, fallback: IdGenerator | None = None) -> None:
        self.fallback = fallback or RandomIdGenerator()

    def generate_span_id(self) -> int:
        ref = pinned()
        return ref.span_id if ref is not None else self.fallback.generate_span_id()

    def generate_trace_id(self) -> int:
        ref = pinned()
        return ref.trace_id if ref is not None else self.fallback.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        # Derived from run ids: unique, but not the W3C "random" trace ids.
        return False


def install_pinned_ids(provider: TracerProvider) -> None:
    """Make ``provider`` hand out pinned ids (tracers it already made keep their generator:
    call this before relayflow's first span), and sample each run's spans as its root."""
    current: IdGenerator = provider.id_generator
    if not isinstance(current, PinnedIdGenerator):
        # The SDK types the attribute as its default generator; any IdGenerator works.
        provider.id_generator = PinnedIdGenerator(current)  # type: ignore[assignment]
    sampler = provider.sampler

    def keeps(trace_id: int) -> bool:
        # The decision the sampler makes for the run's root span, which has no parent.
        decision = sampler.should_sample(None, trace_id, "run").decision
        return decision is Decision.RECORD_AND_SAMPLE

    sample_runs_with(keeps)


def configure_tracing() -> TracerProvider | None:
    """Prepare this process to export runs' spans; the provider used, or None when tracing
    is off.

    A tracer provider already installed is used as it is (with pinned ids). Otherwise one
    is built when ``OTEL_TRACES_EXPORTER`` or an OTLP endpoint is set (and
    ``OTEL_SDK_DISABLED`` is not ``true``): sampler, resource and exporter settings are the
    SDK's own ``OTEL_*`` variables.
    """
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        install_pinned_ids(current)
        return current
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not any(os.environ.get(name) for name in _EXPORT_VARIABLES):
        return None
    names = [
        name.strip().lower()
        for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if name.strip()
    ]
    provider = TracerProvider(id_generator=PinnedIdGenerator())
    for name in names:
        exporter = _exporter(name)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _exporter(name: str) -> SpanExporter | None:
    if name == "none":
        return None
    if name == "console":
        return ConsoleSpanExporter()
    if name == "otlp":
        protocol = os.environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        )
        if protocol not in (None, "", "http/protobuf"):
            _log.warning(
                "OTLP protocol %r is not supported; exporting over http/protobuf", protocol
            )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    _log.warning("unknown OTEL_TRACES_EXPORTER %r: ignored", name)
    return None
