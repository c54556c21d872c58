"""Values that are not JSON are refused where they enter a run, before anything converts them:
a step's output, a workflow's output, a child run's input. Nothing is stored as something else."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from sdk_harness import clean_registry  # noqa: F401

from relayflow import RetryPolicy, StepFailedError, workflow
from relayflow.errors import NotJsonError, ValidationError
from relayflow.sdk.serdes import dump_value
from relayflow.testing import WorkflowTestEnv

CALLS: list[str] = []


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Parcel:
    weight: int
    label: str


class Quote(BaseModel):
    total: float
    currency: str


def run_step_returning(value: Any, *, is_async: bool = False, serdes: Any = None) -> Any:
    """Runs a one-step workflow whose step returns ``value``; the finished run."""
    CALLS.clear()
    policy = RetryPolicy(max=3, initial=1)

    def produce() -> Any:
        CALLS.append("produce")
        return value

    if is_async:

        @workflow(id="values.step")
        async def body(data: Any, ctx: Any) -> Any:
            return await ctx.step("produce", produce, retry=policy, serdes=serdes)

    else:

        @workflow(id="values.step")
        def body(data: Any, ctx: Any) -> Any:
            return ctx.step("produce", produce, retry=policy, serdes=serdes)

    env = WorkflowTestEnv(workflows=[body])
    return env.trigger("values.step")


NOT_JSON = [
    pytest.param({"items": [1, 2, 3, {"key": {1, 2}}]}, "$.items[3].key", "set", id="set"),
    pytest.param({"tags": frozenset({"a"})}, "$.tags", "frozenset", id="frozenset"),
    pytest.param({"totals": {(1, 2): 3}}, "$.totals", "(1, 2)", id="tuple-key"),
    pytest.param({"totals": {1: 3}}, "$.totals", "the key 1", id="int-key"),
    pytest.param({"blob": b"abc"}, "$.blob", "bytes", id="bytes"),
    pytest.param([uuid.UUID(int=1)], "$[0]", "UUID", id="uuid"),
    pytest.param({"price": decimal.Decimal("1.10")}, "$.price", "Decimal", id="decimal"),
    pytest.param({"at": datetime.datetime(2026, 1, 1)}, "$.at", "datetime", id="datetime"),
    pytest.param({"path": pathlib.PurePosixPath("/tmp")}, "$.path", "PurePosixPath", id="path"),
    pytest.param({"colour": Colour.RED}, "$.colour", "Colour", id="enum"),
    pytest.param({"a b": {"c": object()}}, '$["a b"].c', "object", id="quoted-key"),
]


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
@pytest.mark.parametrize(("value", "path", "named"), NOT_JSON)
def test_a_step_returning_a_value_that_is_not_json_fails_once_with_not_json(
    value: Any, path: str, named: str, is_async: bool
) -> None:
    run = run_step_returning(value, is_async=is_async)

    assert run.status == "failed"
    assert run.error is not None and run.error.code == "NOT_JSON"
    assert "step 'produce'" in run.error.message
    assert f"{path} " in run.error.message and named in run.error.message
    assert run.output is None
    # Not retried: the same code would return the same kind of value.
    assert CALLS == ["produce"]
    [attempt] = [e for e in run.timeline if e.type == "step"]
    assert attempt.error is not None and attempt.error.code == "NOT_JSON"


def test_tuples_stay_arrays_and_models_and_dataclasses_are_dumped() -> None:
    value = {
        "pair": (1, "two"),
        "parcel": Parcel(weight=3, label="box"),
        "quotes": [Quote(total=9.5, currency="EUR")],
        "name": "plain",
    }
    run = run_step_returning(value)

    assert run.status == "completed"
    assert run.output == {
        "pair": [1, "two"],
        "parcel": {"weight": 3, "label": "box"},
        "quotes": [{"total": 9.5, "currency": "EUR"}],
        "name": "plain",
    }


class SetSerdes:
    def dumps(self, value: Any) -> Any:
        return sorted(value)

    def loads(self, data: Any) -> Any:
        return set(data)


class BytesSerdes:
    def dumps(self, value: Any) -> Any:
        return base64.b64encode(value).decode("ascii")

    def loads(self, data: Any) -> Any:
        return base64.b64decode(data)


@pytest.mark.parametrize(
    ("value", "serdes"), [({3, 1, 2}, SetSerdes()), (b"\x00\xff", BytesSerdes())]
)
def test_a_serdes_takes_over_what_json_cannot_hold(value: Any, serdes: Any) -> None:
    seen: list[Any] = []

    @workflow(id="values.serdes")
    def body(data: Any, ctx: Any) -> Any:
        got = ctx.step("produce", lambda: value, serdes=serdes)
        seen.append(got)
        return "done"

    run = WorkflowTestEnv(workflows=[body]).trigger("values.serdes")

    assert run.status == "completed"
    assert seen == [value]


def test_a_serdes_whose_dumps_is_not_json_is_refused_too() -> None:
    class Lazy:
        def dumps(self, value: Any) -> Any:
            return value

        def loads(self, data: Any) -> Any:
            return data

    run = run_step_returning({"ids": {1}}, serdes=Lazy())

    assert run.error is not None and run.error.code == "NOT_JSON"
    assert "$.ids " in run.error.message


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
def test_a_workflow_output_that_is_not_json_fails_the_run_naming_the_path(is_async: bool) -> None:
    if is_async:

        @workflow(id="values.output")
        async def body(data: Any, ctx: Any) -> Any:
            return {"summary": {"seen": {"a", "b"}}}

    else:

        @workflow(id="values.output")
        def body(data: Any, ctx: Any) -> Any:
            return {"summary": {"seen": {"a", "b"}}}

    run = WorkflowTestEnv(workflows=[body]).trigger("values.output")

    assert run.status == "failed"
    assert run.error is not None and run.error.code == "NOT_JSON"
    assert "the workflow returned a value that is not JSON" in run.error.message
    assert "$.summary.seen " in run.error.message


@workflow(id="values.child")
def child(data: Any, ctx: Any) -> Any:
    return data


def test_a_child_run_input_that_is_not_json_fails_before_the_child_starts() -> None:
    @workflow(id="values.parent")
    def parent(data: Any, ctx: Any) -> Any:
        try:
            ctx.invoke(child, {"keys": {("a", 1): True}})
        except NotJsonError as exc:
            return {
                "code": exc.code,
                "message": str(exc),
                "is_type_error": isinstance(exc, TypeError),
            }
        return "started"

    env = WorkflowTestEnv(workflows=[parent, child])
    run = env.trigger("values.parent")

    assert run.status == "completed"
    assert run.output["code"] == "NOT_JSON"
    assert run.output["is_type_error"] is True
    assert "child run of 'values.child'" in run.output["message"]
    assert "$.keys " in run.output["message"]
    assert [r.workflow_id for r in env.list_runs().runs] == ["values.parent"]


def test_a_child_run_input_with_tuples_is_given_as_arrays() -> None:
    @workflow(id="values.parent")
    def parent(data: Any, ctx: Any) -> Any:
        return ctx.invoke(child, {"pair": (1, 2)})

    env = WorkflowTestEnv(workflows=[parent, child])
    run = env.trigger("values.parent")
    env.run_until_idle()

    assert env.get_run(run.id).output == {"pair": [1, 2]}


def test_a_failed_step_is_raised_in_the_body_with_code_not_json() -> None:
    @workflow(id="values.caught")
    def body(data: Any, ctx: Any) -> Any:
        try:
            ctx.step("produce", lambda: {1, 2})
        except StepFailedError as exc:
            return exc.code
        return "stored"

    run = WorkflowTestEnv(workflows=[body]).trigger("values.caught")

    assert run.output == "NOT_JSON"


@pytest.mark.parametrize(
    ("value", "path"), [({"pair": {(1, 2): 1}}, "$.pair"), ({"at": uuid.UUID(int=1)}, "$.at")]
)
def test_a_trigger_input_that_is_not_json_is_refused_naming_the_path(value: Any, path: str) -> None:
    with pytest.raises(ValidationError, match="run input is not JSON") as info:
        WorkflowTestEnv(workflows=[child]).trigger("values.child", value)
    assert f"{path} " in str(info.value)


def test_a_trigger_input_with_tuples_is_stored_as_arrays() -> None:
    env = WorkflowTestEnv(workflows=[child])
    run = env.trigger("values.child", {"pair": (1, 2)})

    assert run.output == {"pair": [1, 2]}


def test_dump_value_raises_a_type_error_with_code_not_json() -> None:
    with pytest.raises(TypeError) as info:
        dump_value({"ids": {1}}, None)
    assert isinstance(info.value, NotJsonError)
    assert info.value.data == {"path": "$.ids"}
