"""Replay guarantees: metadata ids, determinism, non-determinism detection, deadlines."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest
from sdk_harness import Harness, clean_registry, waits_of  # noqa: F401

from relayflow.errors import NonDeterminismError, ServiceNotFoundError
from relayflow.sdk import workflow
from relayflow.sdk.invocation import ExecutorOptions


def test_metadata_updates_carry_ids_so_replays_neither_drop_nor_double_them() -> None:
    @workflow(id="meta")
    def body(data: Any, ctx: Any) -> Any:
        ctx.metadata.set("stage", "start")
        ctx.step("inside", lambda: ctx.metadata.increment("inside"))
        ctx.sleep("1s")
        ctx.metadata.append("log", "after-sleep")
        ctx.metadata.increment("n", 2)
        ctx.metadata.remove("stage")
        return "ok"

    harness = Harness("meta")
    harness.run()
    first, second = harness.bodies[0], harness.bodies[-1]
    assert [u["id"] for u in first["metadataUpdates"]] == ["m::0", "m:inside:1:0"]
    assert [u["id"] for u in second["metadataUpdates"]] == [
        "m::0",
        "m:inside:1:0",
        "m::1",
        "m::2",
        "m::3",
    ]
    assert second["journal"]["stepResults"]["inside"]["metadataUpdates"][0]["op"] == "increment"
    assert harness.metadata == {"inside": 1, "log": ["after-sleep"], "n": 2}


def test_metadata_in_child_contexts_is_namespaced() -> None:
    @workflow(id="meta_group")
    def body(data: Any, ctx: Any) -> Any:
        ctx.group("g", lambda g: g.metadata.set("k", "v"))

    body_ = Harness("meta_group").run()
    assert [u["id"] for u in body_["metadataUpdates"]] == ["m:g:0"]


def test_now_random_and_uuid4_reproduce_the_reference_sequences() -> None:
    @workflow(id="det")
    def body(data: Any, ctx: Any) -> Any:
        started = ctx.now()
        draws = [ctx.random(), ctx.random()]
        ctx.sleep("1s")
        return {
            "started": started.isoformat(),
            "draws": draws,
            "third": ctx.random(),
            "uuid": ctx.uuid4(),
        }

    harness = Harness("det")
    result = harness.run()["output"]
    assert result["draws"] == [0.8800948064308614, 0.09343931032344699]
    assert result["third"] == 0.35103047359734774
    assert (
        result["started"] == datetime.fromtimestamp(harness.started_at / 1000, tz=UTC).isoformat()
    )
    assert len(result["uuid"]) == 36 and result["uuid"][14] == "4"


def test_the_first_uuid_matches_the_reference_vector() -> None:
    @workflow(id="uuid")
    async def body(data: Any, ctx: Any) -> Any:
        return ctx.uuid4()

    assert Harness("uuid").run()["output"] == "e11759f6-b545-41a9-834f-e60dbf586f12"


def test_a_wait_of_another_kind_at_a_journalled_position_is_non_determinism() -> None:
    @workflow(id="changed")
    def body(data: Any, ctx: Any) -> Any:
        # Swallowing the error does not help: the run still fails.
        with contextlib.suppress(NonDeterminismError):
            ctx.wait_for_event("order.paid")
        return "ok"

    harness = Harness("changed")
    harness.journal = {
        "waitpointsResolved": {"sleep:0": {"kind": "DATETIME", "resolvedAt": 1, "source": "replay"}}
    }
    result = harness.call()
    assert result["status"] == "failed"
    assert result["error"]["code"] == "NON_DETERMINISM"
    assert "'sleep:0'" in result["error"]["message"]
    assert "'event:order.paid:0'" in result["error"]["message"]


def test_a_journal_entry_of_another_kind_is_non_determinism() -> None:
    @workflow(id="kind")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("group:g", lambda: 1)

    harness = Harness("kind")
    harness.journal = {"stepResults": {"group:g": {"status": "ok", "kind": "group", "output": 1}}}
    result = harness.call()
    assert result["status"] == "failed"
    assert result["error"]["name"] == "NonDeterminismError"
    assert "'group'" in result["error"]["message"] and "'step'" in result["error"]["message"]


def test_a_journalled_step_the_body_no_longer_reaches_is_non_determinism() -> None:
    @workflow(id="lost")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("kept", lambda: 1)
        return "finished early"

    harness = Harness("lost")
    harness.journal = {
        "stepResults": {
            "kept": {"status": "ok", "output": 1},
            "removed": {"status": "ok", "output": 2},
        }
    }
    result = harness.call()
    assert result["status"] == "failed"
    assert result["error"]["code"] == "NON_DETERMINISM"
    assert "'removed'" in result["error"]["message"] and "'kept'" in result["error"]["message"]


def test_a_deadline_stops_new_work_with_a_checkpoint_wait() -> None:
    harness = Harness("deadline", options=ExecutorOptions(deadline_margin_ms=100))
    calls: list[int] = []

    def work(i: int) -> int:
        calls.append(i)
        harness.clock.advance(400)
        return i

    @workflow(id="deadline")
    def body(data: Any, ctx: Any) -> Any:
        return sum(ctx.step(f"s{i}", work, i) for i in range(4))

    harness.deadline_in = 1_000
    first = harness.call()
    assert first["status"] == "waiting"
    assert first["waitpoints"] == [
        {
            "clientWaitpointId": "checkpoint:1",
            "kind": "DATETIME",
            "meta": {"wakeAt": harness.clock.now, "reason": "deadline"},
        }
    ]
    assert calls == [0, 1, 2]
    assert set(first["journal"]["stepResults"]) == {"s0", "s1", "s2"}
    assert harness.run()["output"] == 6
    assert calls == [0, 1, 2, 3]


def test_long_invocations_checkpoint_every_interval() -> None:
    harness = Harness("interval", options=ExecutorOptions(checkpoint_interval_ms=1_000))

    def work() -> None:
        harness.clock.advance(600)

    @workflow(id="interval")
    def body(data: Any, ctx: Any) -> Any:
        for i in range(3):
            ctx.step(f"s{i}", work)
        return "done"

    first = harness.call()
    assert waits_of(first) == ["checkpoint:1"]
    assert first["waitpoints"][0]["meta"]["reason"] == "interval"
    assert set(first["journal"]["stepResults"]) == {"s0", "s1"}
    assert harness.run()["output"] == "done"


def test_long_invocations_checkpoint_every_so_many_steps() -> None:
    harness = Harness("many", options=ExecutorOptions(checkpoint_max_work=3))

    @workflow(id="many")
    def body(data: Any, ctx: Any) -> Any:
        return sum(ctx.step(f"s{i}", lambda i=i: i) for i in range(7))

    first = harness.call()
    assert waits_of(first) == ["checkpoint:1"]
    assert first["waitpoints"][0]["meta"]["reason"] == "size"
    assert set(first["journal"]["stepResults"]) == {"s0", "s1", "s2"}
    assert harness.run()["output"] == 21


def test_ctx_exposes_the_run_workflow_environment_and_services() -> None:
    @workflow(id="facts")
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.services.resolve("missing")
        except ServiceNotFoundError as exc:
            missing = exc.code
        return {
            "run": [ctx.run.id, ctx.run.number, ctx.run.attempt, list(ctx.run.tags)],
            "trigger": ctx.run.triggered_by,
            "workflow": [ctx.workflow.id, ctx.workflow.version],
            "environment": ctx.environment.name,
            "greeting": ctx.services.resolve("greet")("ana"),
            "has": [ctx.services.has("greet"), ctx.services.has("missing")],
            "missing": missing,
        }

    harness = Harness("facts", services={"greet": lambda name: f"hi {name}"})
    assert harness.run()["output"] == {
        "run": ["run_abc", 1, 1, ["t1"]],
        "trigger": {"kind": "api"},
        "workflow": ["facts", "v1"],
        "environment": "development",
        "greeting": "hi ana",
        "has": [True, False],
        "missing": "SERVICE_NOT_FOUND",
    }


def test_an_unknown_service_inside_a_step_fails_the_run() -> None:
    @workflow(id="svc")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("use", lambda: ctx.services.resolve("nobody"))

    result = Harness("svc").run()
    assert result["status"] == "failed"
    assert result["error"]["code"] == "SERVICE_NOT_FOUND"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_streams_emit_chunks_once_and_are_skipped_on_replay(flavour: str) -> None:
    reads: list[int] = []

    def source() -> Any:
        for i in range(2):
            reads.append(i)
            yield {"i": i}

    if flavour == "sync":

        @workflow(id="stream")
        def body(data: Any, ctx: Any) -> Any:
            ctx.stream("progress", source)
            ctx.stream.text("log", ["a", 1])
            ctx.stream.bytes("blob", [b"\x00\x01"])
            ctx.sleep("1s")
            return "ok"
    else:

        async def agen() -> Any:
            for i in range(2):
                reads.append(i)
                yield {"i": i}

        @workflow(id="stream")
        async def abody(data: Any, ctx: Any) -> Any:
            await ctx.stream("progress", agen)
            await ctx.stream.text("log", ["a", 1])
            await ctx.stream.bytes("blob", [b"\x00\x01"])
            await ctx.sleep("1s")
            return "ok"

    harness = Harness("stream")
    harness.run()
    chunks = harness.bodies[0]["streamChunks"]
    assert [(c["streamId"], c["seq"], c.get("chunk"), c["final"]) for c in chunks] == [
        ("progress", 1, {"i": 0}, False),
        ("progress", 2, {"i": 1}, False),
        ("progress", 3, None, True),
        ("log", 1, "a", False),
        ("log", 2, "1", False),
        ("log", 3, None, True),
        ("blob", 1, "AAE=", False),
        ("blob", 2, None, True),
    ]
    assert [c["encoding"] for c in chunks if c["streamId"] == "blob"] == ["base64", "base64"]
    assert {c["encoding"] for c in chunks if c["streamId"] == "log"} == {"text"}
    assert harness.journal["streamsCompleted"]["progress"] == {"chunkCount": 3}
    assert harness.bodies[-1]["streamChunks"] == []
    assert reads == [0, 1]


def test_a_failing_stream_source_is_journalled_and_not_read_again() -> None:
    reads: list[int] = []

    def source() -> Any:
        reads.append(1)
        yield "x"
        raise OSError("feed closed")

    @workflow(id="stream_err")
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.stream("s", source)
        except Exception as exc:
            caught = type(exc).__name__
        ctx.sleep("1s")
        return caught

    harness = Harness("stream_err")
    assert harness.run()["output"] == "StepFailedError"
    assert reads == [1]
    assert harness.journal["streamsCompleted"]["s"]["error"]["message"] == "feed closed"
