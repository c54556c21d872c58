"""A run's trace and span ids: the same in every process, distinct per step and attempt, a
caller's trace kept, malformed ``traceparent`` values refused, viewer links."""

from __future__ import annotations

import pytest

from relayflow.tracing.ids import RunTrace, parse_traceparent, step_attempt_span, trace_url

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


def test_ids_derive_from_the_run_step_and_attempt_alone() -> None:
    first, again = RunTrace.of("run_1"), RunTrace.of("run_1")
    assert first == again
    assert first.step_attempt("charge", 1) == again.step_attempt("charge", 1)
    spans = {
        first.root.span_id,
        first.trigger.span_id,
        first.invocation(1).span_id,
        first.invocation(2).span_id,
        first.step_attempt("charge", 1).span_id,
        first.step_attempt("charge", 2).span_id,
        first.wait("sleep:0").span_id,
        first.child("run_1/invoke:x:1").span_id,
    }
    assert len(spans) == 8
    assert RunTrace.of("run_2").trace_id != first.trace_id


def test_a_run_continuing_a_caller_keeps_its_trace_and_sampling() -> None:
    ids = RunTrace.of("run_1", CALLER)
    assert ids.trace_id_hex == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert ids.caller is not None and ids.caller.span_id == 0x00F067AA0BA902B7
    assert ids.root.sampled is False
    assert ids.root.span_id == RunTrace.of("run_1").root.span_id
    parsed = parse_traceparent(ids.invocation(3).traceparent)
    assert parsed == ids.invocation(3)


def test_a_step_attempt_is_found_from_the_invocations_traceparent() -> None:
    ids = RunTrace.of("run_1", CALLER)
    found = step_attempt_span(ids.invocation(2).traceparent, "run_1", "charge", 2)
    assert found == ids.step_attempt("charge", 2)
    assert step_attempt_span(None, "run_1", "charge", 2) is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-not-a-trace-01",
    ],
)
def test_a_malformed_traceparent_is_no_caller(value: str) -> None:
    assert parse_traceparent(value) is None
    assert RunTrace.of("run_1", value) == RunTrace.of("run_1")


def test_viewer_links_take_the_trace_id_in_either_notation() -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_url("https://jaeger.example/trace/{traceId}", trace_id) == (
        f"https://jaeger.example/trace/{trace_id}"
    )
    assert trace_url("https://xray.example/#traces/{xrayTraceId}", trace_id) == (
        "https://xray.example/#traces/1-4bf92f35-77b34da6a3ce929d0e0e4736"
    )
    assert trace_url(None, trace_id) is None
