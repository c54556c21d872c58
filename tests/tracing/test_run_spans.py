"""A run's spans on the AWS driver (moto): one trace across every park and resume, a span
per trigger, invocation, step attempt, wait and child run, and the run's span at its end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from relayflow.sdk.registry import workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.tracing.ids import RunTrace
from tests.aws.moto_driver import moto_driver
from tests.moto_support import moto_backend, use_fake_credentials
from tests.tracing.spans import by_name, one, parent_id, spans

__all__ = ["spans"]


@pytest.fixture
def on_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield


class Flaky:
    """Fails its first call; records the span current while each call runs."""

    def __init__(self) -> None:
        self.calls = 0
        self.current: list[trace.SpanContext] = []

    def charge(self, amount: int) -> int:
        self.calls += 1
        self.current.append(trace.get_current_span().get_span_context())
        if self.calls == 1:
            raise ConnectionError("card network down")
        return amount


@workflow(id="traces.child")
def child(data: Any, ctx: Any) -> str:
    return ctx.step("ship", lambda: f"shipped {data}")


@workflow(id="traces.parent")
def parent(data: Any, ctx: Any) -> Any:
    flaky: Flaky = ctx.services.resolve("flaky")
    charged = ctx.step("charge", flaky.charge, 5, retry=RetryPolicy(max=3, initial="2s"))
    ctx.sleep("1m")
    return [charged, ctx.invoke("traces.child", "box")]


def test_a_run_with_a_retry_a_sleep_and_a_child_is_one_span_tree(
    on_moto: None, clean_registry: None, spans: InMemorySpanExporter
) -> None:
    flaky = Flaky()
    env = moto_driver(workflows=[parent, child], services={"flaky": flaky})
    run = env.trigger("traces.parent")
    assert run.status != "completed"  # parked: the retry's backoff, then the sleep
    env.advance("2m")
    env.run_until_idle()
    run = env.get_run(run.id)
    assert run.status == "completed", run.error
    finished = spans.get_finished_spans()
    ids = RunTrace.of(run.id)
    runs = [span for span in finished if span.name.startswith("run ")]
    parent_span = one(runs, "run traces.parent")
    assert parent_span.context.trace_id == ids.trace_id
    assert parent_span.context.span_id == ids.root.span_id
    assert parent_span.parent is None
    assert parent_span.start_time == run.started_at * 1_000_000
    own = [span for span in finished if span.context.trace_id == ids.trace_id]
    # Every span of the run is in its trace, whichever drive (and park) emitted it.
    assert {span.name for span in own} == {
        "trigger traces.parent",
        "invoke traces.parent",
        "step charge",
        "wait retry",
        "wait sleep",
        "child run",
        "run traces.parent",
    }
    assert parent_id(one(own, "trigger traces.parent")) == ids.root.span_id
    invocations = by_name(own, "invoke traces.parent")
    assert len(invocations) >= 3  # parked at least at the retry, the sleep and the child
    assert {parent_id(span) for span in invocations} == {ids.root.span_id}
    invocation_ids = {span.context.span_id for span in invocations}

    attempts = sorted(
        by_name(own, "step charge"), key=lambda s: s.attributes["relayflow.step.attempt"]
    )
    assert [a.attributes["relayflow.step.attempt"] for a in attempts] == [1, 2]
    assert [a.attributes["relayflow.step.retry"] for a in attempts] == [0, 1]
    assert [a.attributes["relayflow.step.outcome"] for a in attempts] == ["error", "ok"]
    assert attempts[0].attributes["error.type"] == "ConnectionError"
    assert attempts[0].status.status_code is trace.StatusCode.ERROR
    assert all(parent_id(a) in invocation_ids for a in attempts)
    assert parent_id(attempts[0]) != parent_id(attempts[1])  # the retry resumed the run
    # The step's code ran under its attempt's span: its own spans join the run's trace.
    assert [(c.trace_id, c.span_id) for c in flaky.current] == [
        (ids.trace_id, ids.step_attempt("charge", 1).span_id),
        (ids.trace_id, ids.step_attempt("charge", 2).span_id),
    ]

    backoff = one(own, "wait retry")
    assert backoff.attributes["relayflow.wait.kind"] == "retry"
    assert backoff.start_time == attempts[0].end_time
    assert backoff.end_time <= attempts[1].start_time
    sleep = one(own, "wait sleep")
    assert sleep.attributes["relayflow.wait.kind"] == "sleep"
    assert sleep.attributes["relayflow.wait.outcome"] == "fired"
    assert parent_id(sleep) == ids.root.span_id
    assert (sleep.end_time - sleep.start_time) // 1_000_000 >= 60_000

    child_span = one(own, "child run")
    child_run_id = child_span.attributes["relayflow.child.run_id"]
    assert isinstance(child_run_id, str)
    child_ids = RunTrace.of(child_run_id)
    assert [link.context.span_id for link in child_span.links] == [child_ids.root.span_id]
    assert [link.context.trace_id for link in child_span.links] == [child_ids.trace_id]
    assert child_span.attributes["relayflow.wait.outcome"] == "completed"
    child_root = one(runs, "run traces.child")
    assert child_root.context.trace_id == child_ids.trace_id
    assert child_root.attributes["relayflow.parent.run_id"] == run.id
    assert parent_span.attributes["relayflow.run.status"] == "completed"
    assert {span.attributes["relayflow.invocation.outcome"] for span in invocations} == {
        "waiting",
        "completed",
    }
    # Nothing of a value goes into a span.
    assert not any("shipped" in str(dict(span.attributes or {})) for span in finished)
