"""A failed step attempt records its exception's type and the user's part of its traceback,
bounded in frames and bytes, on the run's error and on every failed attempt of the timeline."""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from sdk_harness import clean_registry  # noqa: F401

import relayflow
from relayflow.errors import StepFailedError
from relayflow.protocol import MAX_STACK_BYTES, FailedResponse, SerializedError
from relayflow.sdk import RetryPolicy, tracebacks, workflow
from relayflow.sdk.tracebacks import ENTRY_STACK_BUDGET, MAX_FRAMES, STACK_DROPPED
from relayflow.testing import WorkflowTestEnv

THIS_FILE = str(Path(__file__).resolve())
RELAYFLOW_DIR = str(Path(relayflow.__file__).resolve().parent)


def load_order(order: dict[str, Any]) -> Any:
    return order["id"]


LOOKUP_LINE = inspect.getsourcelines(load_order)[1] + 1


def frames_of(stack: str) -> list[str]:
    return [line for line in stack.splitlines() if line.startswith('  File "')]


def failed_run(env: WorkflowTestEnv, workflow_id: str, data: Any = None) -> Any:
    run = env.trigger(workflow_id, data)
    env.run_until_idle()
    detail = env.get_run(run.id)
    assert detail.status == "failed", detail
    return detail


def test_a_step_raising_key_error_fails_the_run_with_its_type_and_traceback() -> None:
    @workflow(id="tb.keyerror")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("load", load_order, {})

    env = WorkflowTestEnv(workflows=[body])
    error = failed_run(env, "tb.keyerror").error

    assert (error.name, error.code, error.message) == ("KeyError", "UNKNOWN", "'id'")
    assert error.stack.startswith("Traceback (most recent call last):\n")
    assert f'File "{THIS_FILE}", line {LOOKUP_LINE}, in load_order' in error.stack
    assert error.stack.rstrip().endswith("KeyError: 'id'")
    assert RELAYFLOW_DIR not in error.stack
    assert len(error.stack.encode()) <= MAX_STACK_BYTES


def test_library_and_standard_library_frames_are_left_out() -> None:
    def parse(text: str) -> Any:
        json.loads(text)  # the standard library raises, several frames down

    def validate(value: Any) -> Any:
        return TypeAdapter(int).validate_python(value)  # an installed package raises

    @workflow(id="tb.libraries")
    def body(data: Any, ctx: Any) -> Any:
        with contextlib.suppress(StepFailedError):
            ctx.step("parse", parse, "{")
        return ctx.step("validate", validate, "x")

    env = WorkflowTestEnv(workflows=[body])
    detail = failed_run(env, "tb.libraries")
    stacks = [e.error.stack for e in detail.timeline if e.type == "step"]

    assert [e.error.name for e in detail.timeline] == ["JSONDecodeError", "ValidationError"]
    for stack in stacks:
        files = [line.split('"')[1] for line in frames_of(stack)]
        assert files and all(path == THIS_FILE for path in files), stack
        assert "site-packages" not in stack
        assert str(Path(json.__file__).parent) not in stack
    assert "in parse" in stacks[0] and "in validate" in stacks[1]


def recurse(depth: int) -> Any:
    if depth == 0:
        raise RecursionError("deep enough")
    return recurse_again(depth - 1)


def recurse_again(depth: int) -> Any:
    return recurse(depth)


@pytest.fixture
def deep_stack() -> Iterator[int]:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4000))
    yield 1500
    sys.setrecursionlimit(limit)


def test_a_deep_recursion_keeps_at_most_50_frames_cut_in_the_middle(deep_stack: int) -> None:
    @workflow(id="tb.deep")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("recurse", recurse, data)

    env = WorkflowTestEnv(workflows=[body])
    error = failed_run(env, "tb.deep", deep_stack).error

    assert error.name == "RecursionError"
    assert len(frames_of(error.stack)) == MAX_FRAMES
    assert len(error.stack.encode()) <= MAX_STACK_BYTES
    # recurse and recurse_again alternate: two frames a level, and the last call
    assert f"... {2 * deep_stack + 1 - MAX_FRAMES} frames omitted ..." in error.stack
    assert error.stack.rstrip().endswith("RecursionError: deep enough")


def test_a_huge_message_is_cut_and_the_frames_stay() -> None:
    def shout() -> Any:
        raise ValueError("é" * 100_000)

    @workflow(id="tb.huge")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("shout", shout)

    env = WorkflowTestEnv(workflows=[body])
    error = failed_run(env, "tb.huge").error

    assert len(error.stack.encode()) <= MAX_STACK_BYTES
    assert "in shout" in error.stack
    assert "characters omitted" in error.stack


def test_a_retried_attempt_that_later_succeeds_keeps_its_failed_attempts_tracebacks() -> None:
    calls: list[int] = []

    def flaky() -> Any:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError(f"refused {len(calls)}")
        return "ok"

    @workflow(id="tb.retried")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("call", flaky, retry=RetryPolicy(max=3, initial="1m"))

    env = WorkflowTestEnv(workflows=[body])
    run = env.trigger("tb.retried")
    env.advance("1m")
    env.advance("2m")
    detail = env.get_run(run.id)

    assert detail.status == "completed"
    attempts = [(e.attempt, e.outcome, e.error) for e in detail.timeline if e.type == "step"]
    assert [(a, o) for a, o, _ in attempts] == [(1, "err"), (2, "err"), (3, "ok")]
    for number, _, error in attempts[:2]:
        assert error.name == "ConnectionError"
        assert "in flaky" in error.stack
        assert f"ConnectionError: refused {number}" in error.stack
    assert attempts[2][2] is None


def test_a_step_keeps_the_tracebacks_of_its_latest_attempts_within_a_budget(
    deep_stack: int,
) -> None:
    @workflow(id="tb.many")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("recurse", recurse, data, retry=RetryPolicy(max=12, initial=1))

    env = WorkflowTestEnv(workflows=[body])
    detail = failed_run(env, "tb.many", deep_stack)
    stacks = [e.error.stack for e in detail.timeline if e.type == "step"]

    assert len(stacks) == 12
    assert sum(len(s.encode()) for s in stacks) <= ENTRY_STACK_BUDGET
    assert stacks[0] == STACK_DROPPED
    assert "frames omitted" in stacks[-1]
    assert detail.error.stack == stacks[-1]


def test_a_step_failure_raised_again_after_a_replay_keeps_the_steps_type_and_traceback() -> None:
    @workflow(id="tb.replayed")
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.step("load", load_order, {})
        except StepFailedError as failure:
            ctx.sleep("1m")  # the next invocation raises the journalled failure
            raise failure from None
        return None

    env = WorkflowTestEnv(workflows=[body])
    run = env.trigger("tb.replayed")
    env.advance("1m")
    detail = env.get_run(run.id)

    assert detail.status == "failed"
    assert detail.error.name == "KeyError"
    assert f"line {LOOKUP_LINE}, in load_order" in detail.error.stack


def test_a_stack_from_another_host_is_cut_to_the_cap_when_read() -> None:
    stack = "Error: boom\n" + "    at f (/srv/app.js:1:1)\n" * 10_000
    answer = {"status": "failed", "journal": {}, "error": {"message": "boom", "stack": stack}}

    error = TypeAdapter(FailedResponse).validate_python(answer).error
    assert isinstance(error, SerializedError) and error.stack is not None
    assert len(error.stack.encode()) <= MAX_STACK_BYTES
    assert error.stack.startswith("Error: boom\n")
    assert f"middle omitted: the traceback had {len(stack)} bytes" in error.stack


def test_a_failed_attempt_formats_its_traceback_once(monkeypatch: pytest.MonkeyPatch) -> None:
    formatted: list[BaseException] = []
    original = tracebacks.format_user_traceback

    def counting(error: BaseException) -> str | None:
        formatted.append(error)
        return original(error)

    monkeypatch.setattr(tracebacks, "format_user_traceback", counting)
    shared = ValueError("the same object each time")

    def fails() -> Any:
        raise shared

    @workflow(id="tb.once")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("fails", fails, retry=RetryPolicy(max=2, initial=1))

    env = WorkflowTestEnv(workflows=[body])
    detail = failed_run(env, "tb.once")

    # The attempt, the entry and the failure the body sees share one formatting per raise;
    # raised again, the object has a new traceback and is formatted again.
    assert formatted == [shared, shared]
    assert [e.error.stack for e in detail.timeline][1] == detail.error.stack


async def fetch_order(order: dict[str, Any]) -> Any:
    return order["id"]


def test_an_async_step_of_a_def_body_shows_its_own_error_only() -> None:
    """The step's coroutine runs on a loop of its own: its traceback carries no exception of
    relayflow's looking for a running loop ("During handling of the above exception")."""

    @workflow(id="tb.async_step")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("fetch", fetch_order, {}, retry=RetryPolicy(max=1))

    env = WorkflowTestEnv(workflows=[body])
    error = failed_run(env, "tb.async_step").error

    assert error.name == "KeyError"
    assert "no running event loop" not in error.stack
    assert "During handling of the above exception" not in error.stack
    assert error.stack.rstrip().endswith("KeyError: 'id'")
