"""Waits: ids, metadata, timeouts, tokens, callbacks, conditions and child runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sdk_harness import Harness, clean_registry, waits_of  # noqa: F401

from relayflow.errors import (
    ChildRunError,
    ConditionCheckError,
    FatalError,
    HeartbeatTimeoutError,
    TokenFailedError,
    WaitTimeoutError,
)
from relayflow.sdk import RetryPolicy, workflow
from relayflow.testing import WorkflowTestEnv
from relayflow.token_ids import run_token_id


def test_wait_ids_are_positional_and_shared_by_every_wait_kind() -> None:
    @workflow(id="child")
    def child(data: Any, ctx: Any) -> Any:
        return data

    @workflow(id="ids")
    def body(data: Any, ctx: Any) -> Any:
        ctx.sleep("1s")
        ctx.wait_for_event("order.paid")
        ctx.wait_for_signal("approve")
        handle = ctx.wait_for_token()
        named = ctx.wait_for_token(token_id="explicit")
        ctx.invoke(child, {"n": 1})
        handle.wait()
        named.wait()
        ctx.sleep("1s")

    harness = Harness("ids")
    harness.run(lambda wait: {"payload": None})
    seen = [waits_of(b)[0] for b in harness.bodies if b["status"] == "waiting"]
    assert seen == [
        "sleep:0",
        "event:order.paid:1",
        "signal:approve:2",
        "invoke:child:4",
        "token:tok_3",
        "token:explicit",
        "sleep:5",
    ]


def test_sleep_registers_its_duration_and_resumes_after_the_wake_time() -> None:
    @workflow(id="nap")
    def body(data: Any, ctx: Any) -> Any:
        before = ctx.now()
        ctx.sleep("10m")
        return [before.isoformat(), ctx.now().isoformat()]

    harness = Harness("nap")
    first = harness.call()
    assert first["waitpoints"] == [
        {
            "clientWaitpointId": "sleep:0",
            "kind": "DATETIME",
            "meta": {"durationMs": 600_000},
            "timeoutMs": 600_000,
        }
    ]
    start = harness.clock.now
    result = harness.run()
    assert result["output"] == [
        datetime.fromtimestamp(start / 1000, tz=UTC).isoformat(),
        datetime.fromtimestamp((start + 600_000) / 1000, tz=UTC).isoformat(),
    ]


def test_sleep_until_sends_an_absolute_wake_time() -> None:
    wake = datetime(2030, 1, 1, tzinfo=UTC)

    @workflow(id="until")
    def body(data: Any, ctx: Any) -> Any:
        ctx.sleep_until(wake)
        return "woke"

    harness = Harness("until")
    first = harness.call()
    assert first["waitpoints"][0]["meta"] == {"wakeAt": int(wake.timestamp() * 1000)}
    assert harness.run()["output"] == "woke"
    assert harness.clock.now == int(wake.timestamp() * 1000)


def test_event_waits_carry_match_lookback_timeout_and_name() -> None:
    @workflow(id="event")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_event(
            "shipment.created",
            match={"orderId": "o1"},
            timeout="2d",
            lookback="1h",
            name="shipment",
        )

    harness = Harness("event")
    wait = harness.call()["waitpoints"][0]
    assert wait == {
        "clientWaitpointId": "event:shipment.created:0",
        "kind": "EVENT",
        "meta": {
            "eventType": "shipment.created",
            "onTimeout": "null",
            "match": {"orderId": "o1"},
            "lookback": 3_600_000,
            "name": "shipment",
        },
        "timeoutMs": 172_800_000,
    }
    harness.resolve(wait["clientWaitpointId"], "EVENT", {"tracking": "T1"}, matchedEventId="e1")
    assert harness.call()["output"] == {"tracking": "T1"}


def test_signal_waits_return_the_payload() -> None:
    @workflow(id="signal")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_signal("approve", timeout="1h", on_timeout="raise")

    harness = Harness("signal")
    wait = harness.call()["waitpoints"][0]
    assert wait["meta"] == {"signalName": "approve", "onTimeout": "raise"}
    assert wait["timeoutMs"] == 3_600_000
    harness.resolve("signal:approve:0", "SIGNAL", {"by": "ana"})
    assert harness.call()["output"] == {"by": "ana"}


@pytest.mark.parametrize(
    ("on_timeout", "status", "outcome"),
    [("null", "completed", {"got": None}), ("raise", "completed", {"raised": "WAIT_TIMEOUT"})],
)
def test_a_timed_out_wait_returns_none_or_raises(
    on_timeout: str, status: str, outcome: dict[str, Any]
) -> None:
    @workflow(id="timeout")
    def body(data: Any, ctx: Any) -> Any:
        try:
            return {"got": ctx.wait_for_event("never", timeout="1h", on_timeout=on_timeout)}
        except WaitTimeoutError as exc:
            return {"raised": exc.code}

    harness = Harness("timeout")
    harness.call()
    harness.resolve("event:never:0", "EVENT", None, source="timeout", timedOut=True)
    result = harness.call()
    assert (result["status"], result["output"]) == (status, outcome)


def test_an_injection_without_payload_is_not_a_timeout() -> None:
    @workflow(id="empty")
    def body(data: Any, ctx: Any) -> Any:
        return {"got": ctx.wait_for_event("ping", timeout="1h", on_timeout="raise")}

    harness = Harness("empty")
    harness.call()
    harness.resolve("event:ping:0", "EVENT", None)
    assert harness.call()["output"] == {"got": None}


def test_bad_on_timeout_is_a_user_error() -> None:
    @workflow(id="bad")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_event("x", on_timeout="throw")

    result = Harness("bad").run()
    assert result["status"] == "failed"
    assert "on_timeout" in result["error"]["message"]


def test_tokens_expose_their_id_and_callback_url_and_return_the_payload() -> None:
    seen: dict[str, Any] = {}

    @workflow(id="token")
    def body(data: Any, ctx: Any) -> Any:
        handle = ctx.wait_for_token(name="approval", timeout="1h", heartbeat_timeout="5m")
        seen.update(token_id=handle.token_id, url=handle.url)
        return handle.wait()

    harness = Harness("token", run_id="run_9")
    created = harness.clock.now
    harness.call()
    harness.clock.advance(60_000)
    wait = harness.call()["waitpoints"][0]
    # A generated id names its run (base64url of "run_9"); the wait keeps the local id.
    assert seen == {"token_id": "rft1.cnVuXzk.tok_0", "url": "/api/tokens/rft1.cnVuXzk.tok_0"}
    assert wait["clientWaitpointId"] == "token:tok_0"
    assert wait["kind"] == "MANUAL"
    assert wait["meta"] == {
        "tokenId": "tok_0",
        "onTimeout": "raise",
        "createdAt": created,
        "heartbeatTimeoutMs": 300_000,
        "name": "approval",
    }
    assert wait["timeoutMs"] == 3_600_000 - 60_000, "timeouts run from the token's creation"
    harness.resolve("token:tok_0", "MANUAL", {"ok": True})
    assert harness.call()["output"] == {"ok": True}


def test_an_authored_token_id_stays_run_scoped_and_the_generated_format_is_reserved() -> None:
    seen: dict[str, Any] = {}

    @workflow(id="token_named")
    def body(data: Any, ctx: Any) -> Any:
        handle = ctx.wait_for_token(token_id="approval")
        seen.update(token_id=handle.token_id, url=handle.url)
        return handle.wait()

    @workflow(id="token_reserved")
    def reserved(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_token(token_id="rft1.abc.tok_0").token_id

    harness = Harness("token_named", run_id="run_9")
    assert harness.call()["waitpoints"][0]["clientWaitpointId"] == "token:approval"
    assert seen == {"token_id": "approval", "url": "/api/runs/run_9/tokens/approval"}
    refused = Harness("token_reserved").run()
    assert refused["status"] == "failed"
    assert "reserved" in refused["error"]["message"]


def test_token_and_callback_payloads_load_through_their_serdes() -> None:
    loads: list[Any] = []

    class Money:
        def dumps(self, value: Any) -> Any:
            return {"cents": value[0]}

        def loads(self, data: Any) -> Any:
            loads.append(data)
            return ("EUR", data["cents"])

    @workflow(id="token_serdes")
    def body(data: Any, ctx: Any) -> Any:
        token = ctx.wait_for_token(serdes=Money()).wait()
        called = ctx.wait_for_callback(lambda token_id: None, serdes=Money())
        return {"token": list(token), "callback": list(called)}

    harness = Harness("token_serdes")
    harness.call()
    harness.resolve("token:tok_0", "MANUAL", {"cents": 5})
    harness.call()
    harness.resolve("token:tok_1", "MANUAL", {"cents": 7})
    assert harness.call()["output"] == {"token": ["EUR", 5], "callback": ["EUR", 7]}
    # Applied on every replay of the resolved waits, not only when they resolved.
    assert loads == [{"cents": 5}, {"cents": 5}, {"cents": 7}]


@pytest.mark.parametrize(
    ("resolution", "expected"),
    [
        ({"error": {"code": "REJECTED", "message": "no"}}, ("TokenFailedError", "REJECTED")),
        (
            {"error": {"code": "HEARTBEAT_TIMEOUT", "message": "late"}, "timedOut": True},
            ("HeartbeatTimeoutError", "HEARTBEAT_TIMEOUT"),
        ),
        ({"timedOut": True, "source": "timeout"}, ("WaitTimeoutError", "WAIT_TIMEOUT")),
    ],
)
def test_token_failures_and_timeouts_raise_typed_errors(
    resolution: dict[str, Any], expected: tuple[str, str]
) -> None:
    @workflow(id="token_err")
    def body(data: Any, ctx: Any) -> Any:
        handle = ctx.wait_for_token(timeout="1h", heartbeat_timeout="1m")
        try:
            return handle.wait()
        except (TokenFailedError, HeartbeatTimeoutError, WaitTimeoutError) as exc:
            return [type(exc).__name__, exc.code]

    harness = Harness("token_err")
    harness.call()
    harness.resolve("token:tok_0", "MANUAL", None, **resolution)
    assert tuple(harness.call()["output"]) == expected


def test_wait_for_callback_submits_the_token_as_a_retried_step_then_waits() -> None:
    submitted: list[str] = []

    def submit(token_id: str) -> None:
        submitted.append(token_id)
        if len(submitted) == 1:
            raise RuntimeError("queue down")

    @workflow(id="callback")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_callback(submit, timeout="1h", retry=RetryPolicy(max=2, initial=1))

    harness = Harness("callback", run_id="run_cb")
    first = harness.call()
    # ``submit`` hands out the run-locating id; the wait keeps the local one.
    assert submitted == [run_token_id("run_cb", "tok_0")] * 2
    assert waits_of(first) == ["token:tok_0"]
    assert first["waitpoints"][0]["meta"]["onTimeout"] == "raise"
    harness.resolve("token:tok_0", "MANUAL", {"approved": True})
    assert harness.call()["output"] == {"approved": True}
    assert len(submitted) == 2, "the submit step is journalled"


def test_wait_for_condition_polls_with_checkpointed_state() -> None:
    checks: list[int] = []

    def check(state: int) -> tuple[bool, int]:
        checks.append(state)
        return state + 1 >= 3, state + 1

    @workflow(id="poll")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.wait_for_condition(check, 0, delay="10s", backoff_rate=2.0, name="ready")

    harness = Harness("poll")
    first = harness.call()
    assert first["waitpoints"] == [
        {
            "clientWaitpointId": "condition:ready:1",
            "kind": "DATETIME",
            "meta": {"durationMs": 10_000},
            "timeoutMs": 10_000,
        }
    ]
    assert first["journal"]["stepResults"]["condition:ready"]["output"] == {"state": 1, "polls": 1}
    result = harness.run()
    assert result["output"] == 3
    assert checks == [0, 1, 2], "each poll runs once, from the checkpointed state"
    assert harness.bodies[-2]["waitpoints"][0]["meta"] == {"durationMs": 20_000}


def test_a_failing_condition_check_fails_the_wait_without_retry() -> None:
    calls: list[int] = []

    def check(state: Any) -> Any:
        calls.append(1)
        raise KeyError("status")

    @workflow(id="poll_err", retry=RetryPolicy(max=5, initial=1))
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.wait_for_condition(check, {})
        except ConditionCheckError as exc:
            return exc.code

    assert Harness("poll_err").run()["output"] == "CONDITION_CHECK_FAILED"
    assert calls == [1]


def test_wait_for_condition_gives_up_after_max_attempts() -> None:
    @workflow(id="poll_max")
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.wait_for_condition(lambda s: (False, s), None, delay=5, max_attempts=2)
        except WaitTimeoutError as exc:
            return exc.message

    assert Harness("poll_max").run()["output"] == "condition '0' not met after 2 attempts"


def test_invoke_registers_a_run_wait_and_returns_the_child_output() -> None:
    @workflow(id="child")
    def child(data: Any, ctx: Any) -> Any:
        return data

    @workflow(id="parent")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.invoke(child, {"n": 1}, tags=["x"], idempotency_key="k")

    harness = Harness("parent")
    wait = harness.call()["waitpoints"][0]
    assert wait == {
        "clientWaitpointId": "invoke:child:0",
        "kind": "RUN",
        "meta": {
            "childWorkflowId": "child",
            "childInput": {"n": 1},
            "detach": False,
            "tags": ["x"],
            "idempotencyKey": "k",
        },
    }
    harness.resolve("invoke:child:0", "RUN", {"child": "done"}, source="replay")
    assert harness.call()["output"] == {"child": "done"}


def test_a_child_that_did_not_complete_raises_child_run_error() -> None:
    @workflow(id="parent_err")
    def body(data: Any, ctx: Any) -> Any:
        try:
            return ctx.invoke("some.child", None)
        except ChildRunError as exc:
            return [exc.code, exc.message]

    harness = Harness("parent_err")
    harness.call()
    error = {"code": "CHILD_RUN_ENDED", "message": "child run ended with status failed"}
    harness.resolve("invoke:some.child:0", "RUN", None, error=error)
    assert harness.call()["output"] == ["CHILD_RUN_ENDED", "child run ended with status failed"]


_CHILD = {"childRunId": "r1/invoke:some.child:0", "childStatus": "failed"}
_WRAPPED = "child run r1/invoke:some.child:0 ended with status failed: card declined"
_DECLINED = {"category": "USER_ERROR", "code": "DECLINED", "message": "card declined"}
_DECLINED_FACTS = {"childCode": "DECLINED", "childMessage": "card declined"}


@pytest.mark.parametrize(
    ("wire", "message", "data"),
    [
        # relayflow's orchestrator: the child's own error, plus the child run in data.
        ({**_DECLINED, "data": _CHILD}, _WRAPPED, {**_CHILD, **_DECLINED_FACTS}),
        # A reference orchestrator: the child's own error and nothing more.
        (_DECLINED, "card declined", _DECLINED_FACTS),
        # Journalled before the wire carried the child's code: the wrapper, the child's
        # error as the cause. The body sees the same error as then.
        (
            {
                "category": "USER_ERROR",
                "code": "CHILD_RUN_ENDED",
                "message": _WRAPPED,
                "cause": _DECLINED,
                "data": _CHILD,
            },
            _WRAPPED,
            {**_CHILD, **_DECLINED_FACTS},
        ),
    ],
    ids=["relayflow", "reference", "journalled-wrapped"],
)
def test_child_run_error_carries_the_childs_own_code_and_message(
    wire: dict[str, Any], message: str, data: dict[str, Any]
) -> None:
    @workflow(id="parent_codes")
    def body(data: Any, ctx: Any) -> Any:
        try:
            return ctx.invoke("some.child", None)
        except ChildRunError as exc:
            return [exc.code, exc.message, exc.child_code, exc.child_message, exc.data]

    harness = Harness("parent_codes")
    harness.call()
    harness.resolve("invoke:some.child:0", "RUN", None, error=wire, source="replay")

    output = harness.call()["output"]

    assert output == ["CHILD_RUN_ENDED", message, "DECLINED", "card declined", data]


def test_child_run_error_keeps_the_childs_code_when_a_group_replays_it() -> None:
    @workflow(id="grouped.child")
    def child(data: Any, ctx: Any) -> Any:
        raise FatalError("card declined", code="DECLINED")

    @workflow(id="grouped.parent")
    def parent(data: Any, ctx: Any) -> Any:
        try:
            ctx.group("pay", lambda group: group.invoke(child, None))
        except ChildRunError as exc:
            seen = [exc.code, exc.child_code, exc.child_message]
            ctx.sleep("1m")  # the next invocation replays the group's checkpointed error
            return seen

    env = WorkflowTestEnv([child, parent])
    run = env.trigger("grouped.parent", None)
    env.advance("1m")

    assert env.get_run(run.id).output == ["CHILD_RUN_ENDED", "DECLINED", "card declined"]


def test_a_detached_invoke_returns_none() -> None:
    @workflow(id="detach")
    async def body(data: Any, ctx: Any) -> Any:
        return {"child": await ctx.invoke("other", 1, detach=True)}

    harness = Harness("detach")
    assert harness.call()["waitpoints"][0]["meta"]["detach"] is True
    harness.resolve("invoke:other:0", "RUN", None)
    assert harness.call()["output"] == {"child": None}


def test_async_waits_are_awaitable() -> None:
    @workflow(id="async_waits")
    async def body(data: Any, ctx: Any) -> Any:
        await ctx.sleep(5)
        event = await ctx.wait_for_event("e")
        handle = await ctx.wait_for_token(token_id="t1")
        polled = await ctx.wait_for_condition(lambda s: (True, s + 1), 1)
        return [event, await handle.wait(), polled]

    harness = Harness("async_waits")
    result = harness.run(lambda wait: {"payload": wait["kind"]})
    assert result["output"] == ["EVENT", "MANUAL", 2]
