"""Mistakes in ``@workflow`` are refused when the module is imported, saying what to write."""

from __future__ import annotations

import math
from typing import Any

import pytest
from sdk_harness import clean_registry  # noqa: F401

from relayflow import RetryPolicy, WorkflowContext, workflow
from relayflow.errors import ValidationError
from relayflow.sdk import parse_duration, registered_workflows
from relayflow.testing import WorkflowTestEnv


def test_a_positional_id_says_to_write_it_as_a_keyword() -> None:
    with pytest.raises(TypeError, match=r"write @workflow\(id='x'\), not @workflow\('x'\)"):
        workflow("x")  # type: ignore[call-overload]
    assert registered_workflows() == []


def test_a_retry_dict_says_how_to_write_the_policy() -> None:
    with pytest.raises(TypeError, match=r"write retry=RetryPolicy\(max=3\)"):
        workflow(id="t", retry={"max": 3})  # type: ignore[arg-type]


def test_a_retry_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="retry must be a RetryPolicy, got int 3"):
        workflow(id="t", retry=3)  # type: ignore[arg-type]


def test_a_retry_policy_is_kept() -> None:
    policy = RetryPolicy(max=5)

    @workflow(id="t.retry", retry=policy)
    def body(data: Any, ctx: Any) -> None:
        return None

    assert body.config.retry is policy


def test_a_string_of_tags_is_not_split_into_letters() -> None:
    with pytest.raises(TypeError, match=r"write tags=\['abc'\], not tags='abc'"):
        workflow(id="t", tags="abc")
    with pytest.raises(TypeError, match="each tag must be a non-empty string, got 3"):
        workflow(id="t", tags=["a", 3])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("def f(ctx): ...", "def f(ctx)"),
        ("async def f(): ...", "async def f()"),
        ("def f(a, b, c): ...", "def f(a, b, c)"),
    ],
)
def test_a_body_that_cannot_take_input_and_ctx_is_refused(source: str, shown: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match="write ") as info:
        workflow(id="t.sig")(namespace["f"])
    assert f"it is {shown}" in str(info.value)
    assert "(input, ctx)" in str(info.value)
    assert registered_workflows() == []


def test_bodies_with_defaults_or_varargs_are_accepted() -> None:
    @workflow(id="t.ok1")
    def one(data: Any, ctx: Any, extra: int = 1) -> None:
        return None

    @workflow(id="t.ok2")
    async def two(*args: Any) -> None:
        return None

    assert [w.id for w in registered_workflows()] == ["t.ok1", "t.ok2"]


@pytest.mark.parametrize("value", ["10 minutes", "1.5s", "5M"])
def test_a_bad_duration_lists_the_accepted_forms(value: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(value)
    message = str(info.value)
    assert f"invalid duration: {value!r}" in message
    assert '"500ms", "30s", "10m", "2h", "1d", "1w"' in message
    assert "int of milliseconds" in message and "timedelta" in message


def test_a_bad_timeout_names_the_option() -> None:
    with pytest.raises(ValueError, match="invalid duration for timeout: 'soon'; write"):
        workflow(id="t", timeout="soon")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_step_returning_a_non_finite_number_fails_naming_the_step(bad: float) -> None:
    @workflow(id="t.nan")
    async def body(data: Any, ctx: WorkflowContext) -> Any:
        return await ctx.step("price", lambda: {"amount": bad}, retry=RetryPolicy(max=1))

    env = WorkflowTestEnv()
    run = env.trigger("t.nan")
    assert run.status == "failed"
    assert run.error is not None
    assert "step 'price' returned a value that is not JSON" in run.error.message
    assert "$.amount" in run.error.message
    assert run.output is None


def test_a_step_returning_a_non_json_value_fails_naming_the_step() -> None:
    @workflow(id="t.obj")
    async def body(data: Any, ctx: WorkflowContext) -> Any:
        return await ctx.step("load", lambda: object(), retry=RetryPolicy(max=1))

    run = WorkflowTestEnv().trigger("t.obj")
    assert run.status == "failed"
    assert run.error is not None
    assert "step 'load' returned a value that is not JSON" in run.error.message


@pytest.mark.parametrize(
    ("value", "where"),
    [({"a": math.nan}, "$.a"), ([1, math.inf], "$[1]"), ({"s": {1, 2}}, "$.s"), ({1: "x"}, "$")],
)
def test_an_input_that_is_not_json_is_refused(value: Any, where: str) -> None:
    @workflow(id="t.input")
    def body(data: Any, ctx: Any) -> Any:
        return data

    with pytest.raises(ValidationError, match="run input is not JSON") as info:
        WorkflowTestEnv().trigger("t.input", value)
    assert where in str(info.value)
