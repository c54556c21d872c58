"""``ctx.step``: run once, journalled attempts, retries, timeouts and at-most-once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import BaseModel
from sdk_harness import Harness, clean_registry, waits_of  # noqa: F401

from relayflow.errors import (
    FatalError,
    HostCrashSignal,
    RetryableError,
    StepFailedError,
    StepInterruptedError,
)
from relayflow.sdk import RetryPolicy, current_step, workflow
from relayflow.sdk.invocation import ExecutorOptions


class Counter:
    """Counts calls and fails the first ``failures`` of them."""

    def __init__(self, failures: int = 0, error: Exception | None = None) -> None:
        self.calls = 0
        self.failures = failures
        self.error = error or RuntimeError("flaky")

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return {"calls": self.calls, "args": list(args)}


def test_a_journalled_step_returns_its_result_without_running() -> None:
    counter = Counter()

    @workflow(id="once")
    def once(data: Any, ctx: Any) -> Any:
        first = ctx.step("a", counter, 1, 2)
        ctx.sleep("1m")
        return first

    result = Harness("once").run()
    assert result["status"] == "completed"
    assert result["output"] == {"calls": 1, "args": [1, 2]}
    assert counter.calls == 1


def test_async_steps_and_async_bodies() -> None:
    async def double(x: int) -> int:
        return x * 2

    @workflow(id="async_body")
    async def body(data: Any, ctx: Any) -> Any:
        sync_thread = await ctx.step("sync", lambda: threading.current_thread().name)
        return {"double": await ctx.step("double", double, 21), "thread": sync_thread}

    result = Harness("async_body").run()
    assert result["output"]["double"] == 42
    assert result["output"]["thread"] != threading.current_thread().name


def test_an_async_step_runs_in_a_sync_body() -> None:
    async def triple(x: int) -> int:
        return x * 3

    @workflow(id="sync_body")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("triple", triple, 3)

    assert Harness("sync_body").run()["output"] == 9


def test_pydantic_results_are_dumped_and_serdes_round_trips() -> None:
    class Order(BaseModel):
        id: str
        total: int

    class OrderSerdes:
        def dumps(self, value: Order) -> Any:
            return value.model_dump(mode="json")

        def loads(self, data: Any) -> Order:
            return Order.model_validate(data)

    seen: list[Any] = []

    @workflow(id="models")
    def body(data: Any, ctx: Any) -> Any:
        plain = ctx.step("plain", lambda: Order(id="o1", total=3))
        typed = ctx.step("typed", lambda: Order(id="o2", total=4), serdes=OrderSerdes())
        ctx.sleep("1s")
        seen.append((plain, typed))
        return typed

    harness = Harness("models")
    result = harness.run()
    assert result["output"] == {"id": "o2", "total": 4}
    assert harness.journal["stepResults"]["plain"]["output"] == {"id": "o1", "total": 3}
    assert seen[-1] == ({"id": "o1", "total": 3}, Order(id="o2", total=4))


def test_a_step_that_fails_for_good_raises_step_failed_error_with_the_journalled_error() -> None:
    caught: list[StepFailedError] = []

    def declined() -> None:
        raise FatalError("card declined", code="CARD_DECLINED", data={"last4": "4242"})

    @workflow(id="declined", retry=RetryPolicy(max=5, initial=1))
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.step("charge", declined)
        except StepFailedError as exc:
            caught.append(exc)
        ctx.sleep("1s")
        return "handled"

    harness = Harness("declined")
    assert harness.run()["output"] == "handled"
    entry = harness.journal["stepResults"]["charge"]
    assert entry["status"] == "err"
    assert len(entry["attempts"]) == 1, "FatalError with a custom code is never retried"
    assert entry["error"]["code"] == "CARD_DECLINED"
    assert entry["error"]["name"] == "FatalError"
    assert [(e.code, e.message, e.data, e.step_id) for e in caught] == [
        ("CARD_DECLINED", "card declined", {"last4": "4242"}, "charge")
    ] * 2


def test_short_retries_run_in_process_and_every_attempt_is_journalled() -> None:
    flaky = Counter(failures=2)

    @workflow(id="flaky")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("flaky", flaky, retry=RetryPolicy(max=3, backoff="fixed", initial=5))

    harness = Harness("flaky")
    result = harness.run()
    assert result["status"] == "completed"
    assert len(harness.bodies) == 1
    attempts = harness.journal["stepResults"]["flaky"]["attempts"]
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "err"), (2, "err"), (3, "ok")]
    assert attempts[0]["error"]["message"] == "flaky"
    assert harness.journal["stepResults"]["flaky"]["attempt"] == 3


def test_long_retry_delays_end_the_invocation_with_a_retry_wait() -> None:
    flaky = Counter(failures=2)

    @workflow(id="slow_retry")
    def body(data: Any, ctx: Any) -> Any:
        policy = RetryPolicy(max=3, backoff="exponential", initial="10s")
        return ctx.step("charge", flaky, retry=policy)

    harness = Harness("slow_retry")
    start = harness.clock.now
    first = harness.call()
    assert first["status"] == "waiting"
    assert first["waitpoints"] == [
        {
            "clientWaitpointId": "retry:charge:2",
            "kind": "DATETIME",
            "meta": {"wakeAt": start + 10_000, "stepId": "charge", "attempt": 2},
            "timeoutMs": 10_000,
        }
    ]
    entry = first["journal"]["stepResults"]["charge"]
    assert (entry["status"], entry["nextAttemptAt"]) == ("retrying", start + 10_000)
    result = harness.run()
    assert result["status"] == "completed"
    assert flaky.calls == 3
    second_wait = harness.bodies[2]["waitpoints"][0]
    assert second_wait["clientWaitpointId"] == "retry:charge:3"
    assert second_wait["meta"]["wakeAt"] == start + 10_000 + 20_000


def test_a_retry_wait_not_yet_due_is_registered_again_unchanged() -> None:
    flaky = Counter(failures=1)

    @workflow(id="again")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", flaky, retry=RetryPolicy(max=2, backoff="fixed", initial="1m"))

    harness = Harness("again")
    first = harness.call()
    harness.clock.advance(1_000)
    second = harness.call()
    assert second["waitpoints"][0]["meta"] == first["waitpoints"][0]["meta"]
    assert flaky.calls == 1


def test_exhausted_retries_fail_the_run_with_the_last_error() -> None:
    @workflow(id="exhausted")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", Counter(failures=9), retry=RetryPolicy(max=2, initial=1))

    harness = Harness("exhausted")
    result = harness.run()
    assert result["status"] == "failed"
    # The run's error is the step's last error: its type, not the StepFailedError wrapping it.
    assert result["error"]["name"] == "RuntimeError"
    assert result["error"]["message"] == "flaky"
    assert len(harness.journal["stepResults"]["s"]["attempts"]) == 2


def test_retryable_error_retry_after_sets_the_delay() -> None:
    flaky = Counter(failures=1, error=RetryableError("busy", retry_after="5m", code="BUSY"))

    @workflow(id="retry_after")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", flaky, retry=RetryPolicy(max=2, initial=1))

    harness = Harness("retry_after")
    first = harness.call()
    assert first["waitpoints"][0]["meta"]["wakeAt"] == harness.clock.now + 300_000
    assert harness.run()["status"] == "completed"


def test_retry_on_leaves_other_errors_unretried() -> None:
    flaky = Counter(failures=1, error=ValueError("no"))

    @workflow(id="retry_on")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", flaky, retry=RetryPolicy(max=3, initial=1, retry_on=(OSError,)))

    assert Harness("retry_on").run()["status"] == "failed"
    assert flaky.calls == 1


def test_the_workflow_retry_policy_is_the_default_and_set_retry_replaces_it() -> None:
    first = Counter(failures=1)
    second = Counter(failures=1)

    @workflow(id="defaults", retry=RetryPolicy(max=2, initial=1))
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("a", first)
        ctx.set_retry(None)
        ctx.step("b", second)

    assert Harness("defaults").run()["status"] == "failed"
    assert (first.calls, second.calls) == (2, 1)


def test_without_any_policy_a_step_gets_one_attempt() -> None:
    flaky = Counter(failures=1)

    @workflow(id="single")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", flaky)

    assert Harness("single").run()["status"] == "failed"
    assert flaky.calls == 1


class HeldCode:
    """A step whose first call ignores its 30 ms timeout until ``release``; later calls answer."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls == 1:
            self.release.wait(10)
        return f"attempt {self.calls}"

    def end(self, step_key: str) -> None:
        from relayflow.sdk.overruns import ABANDONED

        self.release.set()
        assert ABANDONED.wait_clear(step_key, 10)


def held_harness(code: HeldCode, **options: Any) -> Harness:
    """A harness whose in-process waits move its clock; retries over 20 ms park the run."""

    @workflow(id="timeout")
    def body(data: Any, ctx: Any) -> Any:
        policy = RetryPolicy(max=2, backoff="fixed", initial=25)
        return ctx.step("s", code, timeout=30, retry=policy)

    harness = Harness("timeout")
    harness.options = ExecutorOptions(
        in_process_retry_threshold_ms=20,
        sleep=lambda seconds: harness.clock.advance(round(seconds * 1000)),
        **options,
    )
    return harness


def test_a_retry_refused_while_the_timed_out_code_runs_waits_durably_and_is_no_attempt() -> None:
    code = HeldCode()
    harness = held_harness(code)
    start = harness.clock.now
    try:
        first = harness.call()
        assert waits_of(first) == ["retry:s:2"]
        harness.clock.now = start + 25
        harness.resolve("retry:s:2", "DATETIME")

        # The first attempt's code still runs: the retry is not started, nor counted; the run
        # waits again, with the policy's backoff, within the grace (twice the timeout).
        held = harness.call()
        assert waits_of(held) == ["retry:s:2:held1"]
        assert held["waitpoints"][0]["meta"]["wakeAt"] == start + 50
        entry = harness.journal["stepResults"]["s"]
        assert (entry["status"], entry["attempt"], entry["refusedStarts"]) == ("retrying", 1, 1)
        assert [a["error"]["code"] for a in entry["attempts"]] == ["TIMEOUT"]
        assert code.calls == 1
    finally:
        code.end("run_abc:s")
    harness.clock.now = start + 50
    harness.resolve("retry:s:2:held1", "DATETIME")
    done = harness.call()

    assert (done["status"], done["output"]) == ("completed", "attempt 2")
    entry = harness.journal["stepResults"]["s"]
    assert [(a["attempt"], a["status"]) for a in entry["attempts"]] == [(1, "err"), (2, "ok")]
    assert "refusedStarts" not in entry
    assert code.calls == 2


def test_past_the_grace_the_step_fails_with_step_still_running() -> None:
    code = HeldCode()
    # Twice the timeout is 60 ms; the setting caps it at 40 ms.
    harness = held_harness(code, overrun_grace_max_ms=40)
    start = harness.clock.now
    try:
        harness.call()
        harness.clock.now = start + 25
        harness.resolve("retry:s:2", "DATETIME")
        done = harness.call()
    finally:
        code.end("run_abc:s")

    assert done["status"] == "failed"
    assert done["error"]["code"] == "STEP_STILL_RUNNING"
    assert "40 ms" in done["error"]["message"]
    entry = harness.journal["stepResults"]["s"]
    assert (entry["status"], entry["finishedAt"]) == ("err", start + 40)
    assert [a["error"]["code"] for a in entry["attempts"]] == ["TIMEOUT"]
    assert code.calls == 1


def test_an_async_step_timeout_fails_with_code_timeout() -> None:
    import asyncio

    async def never() -> None:
        await asyncio.sleep(5)

    @workflow(id="async_timeout")
    async def body(data: Any, ctx: Any) -> Any:
        return await ctx.step("s", never, timeout=20)

    result = Harness("async_timeout").run()
    assert result["status"] == "failed"
    assert result["error"]["code"] == "TIMEOUT"


def test_at_most_once_journals_started_before_the_attempt_runs() -> None:
    charge = Counter()

    @workflow(id="amo")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("charge", charge, semantics="at_most_once")

    harness = Harness("amo")
    first = harness.call()
    assert charge.calls == 0
    assert waits_of(first) == ["checkpoint:1"]
    entry = first["journal"]["stepResults"]["charge"]
    assert entry["status"] == "started"
    assert entry["attempts"] == [
        {"attempt": 1, "status": "started", "startedAt": harness.clock.now, "invocation": 1}
    ]
    second = harness.call()
    assert second["status"] == "completed"
    assert charge.calls == 1
    assert [a["status"] for a in second["journal"]["stepResults"]["charge"]["attempts"]] == ["ok"]


def test_an_interrupted_at_most_once_attempt_is_never_rerun() -> None:
    charge = Counter()
    caught: list[BaseException] = []

    @workflow(id="amo_crash")
    def body(data: Any, ctx: Any) -> Any:
        try:
            return ctx.step("charge", charge, semantics="at_most_once")
        except StepInterruptedError as exc:
            caught.append(exc)
            raise

    harness = Harness("amo_crash")
    harness.call()
    harness.invocation_count += 1  # the invocation that ran the attempt died unrecorded
    result = harness.call()
    assert charge.calls == 0
    assert result["status"] == "failed"
    assert result["error"]["code"] == "STEP_INTERRUPTED"
    assert isinstance(caught[0], StepInterruptedError)
    attempts = harness.journal["stepResults"]["charge"]["attempts"]
    assert [(a["status"], a["error"]["code"]) for a in attempts] == [("err", "STEP_INTERRUPTED")]


def test_an_interrupted_at_most_once_attempt_is_retried_when_the_policy_allows() -> None:
    charge = Counter()

    @workflow(id="amo_retry")
    def body(data: Any, ctx: Any) -> Any:
        policy = RetryPolicy(max=2, initial=1)
        return ctx.step("charge", charge, semantics="at_most_once", retry=policy)

    harness = Harness("amo_retry")
    harness.call()
    harness.invocation_count += 1
    third = harness.call()
    assert waits_of(third) == ["checkpoint:3"]
    assert charge.calls == 0
    assert harness.call()["status"] == "completed"
    assert charge.calls == 1
    attempts = harness.journal["stepResults"]["charge"]["attempts"]
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "err"), (2, "ok")]


def test_a_host_crash_signal_propagates_out_of_the_host() -> None:
    def crash() -> None:
        raise HostCrashSignal()

    @workflow(id="crash")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", crash)

    @workflow(id="async_crash")
    async def async_body(data: Any, ctx: Any) -> Any:
        return await ctx.step("s", crash)

    for workflow_id in ("crash", "async_crash"):
        with pytest.raises(HostCrashSignal):
            Harness(workflow_id).call()


def test_duplicate_step_ids_fail_the_run_clearly() -> None:
    @workflow(id="dupes")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("a", lambda: 1)
        ctx.step("a", lambda: 2)

    result = Harness("dupes").run()
    assert result["status"] == "failed"
    assert "duplicate id 'a'" in result["error"]["message"]


def test_current_step_exposes_the_attempt_and_idempotency_key() -> None:
    seen: list[Any] = []

    def record() -> None:
        info = current_step()
        seen.append((info.step_id, info.attempt, info.idempotency_key) if info else None)
        if len(seen) == 1:
            raise RuntimeError("again")

    @workflow(id="info")
    def body(data: Any, ctx: Any) -> Any:
        ctx.step("a", record, retry=RetryPolicy(max=2, initial=1))
        ctx.step("b", lambda: seen.append(current_step()), idempotency_key="key-1")

    Harness("info").run()
    assert seen[:2] == [("a", 1, "run_abc:a"), ("a", 2, "run_abc:a")]
    assert seen[2].idempotency_key == "key-1"
    assert current_step() is None


def test_durable_operations_cannot_be_nested_in_a_step() -> None:
    @workflow(id="nested")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("outer", lambda: ctx.step("inner", lambda: 1))

    result = Harness("nested").run()
    assert result["status"] == "failed"
    assert "inside a step" in result["error"]["message"]


def test_step_timestamps_come_from_the_host_clock() -> None:
    harness = Harness("clocked")

    def tick() -> str:
        harness.clock.advance(250)
        return "ok"

    @workflow(id="clocked")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", tick)

    start = harness.clock.now
    harness.run()
    entry = harness.journal["stepResults"]["s"]
    assert (entry["startedAt"], entry["finishedAt"]) == (start, start + 250)


def test_in_process_threshold_is_configurable() -> None:
    flaky = Counter(failures=1)

    @workflow(id="threshold")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", flaky, retry=RetryPolicy(max=2, backoff="fixed", initial=10))

    harness = Harness("threshold", options=ExecutorOptions(in_process_retry_threshold_ms=0))
    assert waits_of(harness.call()) == ["retry:s:2"]


def test_step_mocks_replace_step_functions_by_id() -> None:
    @workflow(id="mocked")
    def body(data: Any, ctx: Any) -> Any:
        a = ctx.step("charge", Counter(failures=9), 5)
        b = ctx.group("g", lambda g: g.step("label", lambda: "real"))
        return [a, b]

    options = ExecutorOptions(step_mocks={"charge": lambda x: x * 10, "g/label": "fake"})
    assert Harness("mocked", options=options).run()["output"] == [50, "fake"]


def test_a_retry_that_would_cross_the_deadline_becomes_a_retry_wait() -> None:
    flaky = Counter(failures=1)

    @workflow(id="near_deadline")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("s", flaky, retry=RetryPolicy(max=2, backoff="fixed", initial=15))

    harness = Harness("near_deadline")
    harness.deadline_in = 10
    assert waits_of(harness.call()) == ["retry:s:2"]


@pytest.mark.parametrize("is_async", [False, True])
def test_a_sync_body_gets_a_sync_ctx_and_an_async_body_an_async_ctx(is_async: bool) -> None:
    from relayflow import SyncWorkflowContext, WorkflowContext

    if is_async:

        @workflow(id="flavour")
        async def abody(data: Any, ctx: Any) -> Any:
            return [type(ctx).__name__, isinstance(ctx, WorkflowContext)]
    else:

        @workflow(id="flavour")
        def body(data: Any, ctx: Any) -> Any:
            return [type(ctx).__name__, isinstance(ctx, SyncWorkflowContext)]

    expected = "WorkflowContext" if is_async else "SyncWorkflowContext"
    assert Harness("flavour").run()["output"] == [expected, True]
