"""How relayflow's processes turn tracing on from the ``OTEL_*`` variables: off without
them, a provider of its own with them, and an installed provider kept (ids pinned)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from relayflow.tracing.sdk import PinnedIdGenerator, configure_tracing
from relayflow.tracing.spans import tracing_enabled
from tests.tracing.spans import forget_the_provider

OTEL_VARIABLES = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
)


@pytest.fixture
def no_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    forget_the_provider()
    try:
        yield
    finally:
        installed = trace.get_tracer_provider()
        if isinstance(installed, TracerProvider):
            installed.shutdown()
        forget_the_provider()


def test_without_otel_variables_tracing_stays_off(no_provider: None) -> None:
    assert configure_tracing() is None
    assert not tracing_enabled()


def test_otel_sdk_disabled_wins_over_an_exporter(
    no_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert configure_tracing() is None


def test_an_exporter_variable_builds_a_provider_with_the_standard_sampler(
    no_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    provider = configure_tracing()
    assert provider is trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert isinstance(provider.id_generator, PinnedIdGenerator)
    assert isinstance(provider.sampler, ParentBased)
    assert tracing_enabled()


def test_an_installed_provider_is_kept_and_given_pinned_ids(no_provider: None) -> None:
    provider = TracerProvider(sampler=TraceIdRatioBased(0.5))
    trace.set_tracer_provider(provider)
    assert configure_tracing() is provider
    assert isinstance(provider.id_generator, PinnedIdGenerator)
    generated = provider.id_generator.generate_span_id()  # unpinned: the provider's own
    assert generated != provider.id_generator.generate_span_id()
