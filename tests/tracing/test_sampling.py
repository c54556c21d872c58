"""A run is sampled whole, as its run span is: every process decides alike from the trace
id; a run continuing a caller's trace follows the caller's decision."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv
from relayflow.tracing.context import continuing
from relayflow.tracing.ids import RunTrace
from tests.tracing.spans import recording

SAMPLED_CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
DROPPED_CALLER = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


@workflow(id="traces.sampled")
def sampled(data: Any, ctx: Any) -> str:
    ctx.step("first", lambda: 1)
    ctx.sleep("1s")
    return "done"


def _names(spans: Any, trace_id: int) -> set[str]:
    return {span.name for span in spans if span.context.trace_id == trace_id}


def test_a_run_the_sampler_drops_is_dropped_whole_unless_its_caller_sampled_it(
    clean_registry: None,
) -> None:
    with recording(ParentBased(ALWAYS_OFF)) as exporter:
        env = WorkflowTestEnv(workflows=[sampled])
        own = env.trigger("traces.sampled")
        with continuing({"traceparent": SAMPLED_CALLER}):
            kept = env.trigger("traces.sampled")
        with continuing({"Traceparent": DROPPED_CALLER}):
            dropped = env.trigger("traces.sampled")
        env.advance("2s")
        env.run_until_idle()
        finished = exporter.get_finished_spans()

    assert {env.get_run(run.id).status for run in (own, kept, dropped)} == {"completed"}
    assert _names(finished, RunTrace.of(own.id).trace_id) == set()
    assert _names(finished, RunTrace.of(dropped.id, DROPPED_CALLER).trace_id) == set()
    assert _names(finished, RunTrace.of(kept.id, SAMPLED_CALLER).trace_id) == {
        "trigger traces.sampled",
        "invoke traces.sampled",
        "step first",
        "wait sleep",
        "run traces.sampled",
    }
