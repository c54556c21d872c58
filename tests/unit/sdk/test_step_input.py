"""A failed step attempt keeps the arguments it was given; a successful one keeps none."""

from __future__ import annotations

from typing import Any

from sdk_harness import Harness, clean_registry  # noqa: F401

from relayflow.protocol import MAX_INPUT_CHARS
from relayflow.sdk import RetryPolicy, workflow
from relayflow.sdk.steps import failed_input

_calls = {"n": 0}


def _flaky(order: dict[str, Any], amount: int) -> str:
    _calls["n"] += 1
    if _calls["n"] == 1:
        raise ValueError("gateway down")
    return f"charged {amount}"


def test_only_the_failed_attempt_keeps_its_arguments() -> None:
    _calls["n"] = 0

    @workflow(id="inputs", retry=RetryPolicy(max=2, initial="1ms"))
    def body(data: Any, ctx: Any) -> Any:
        return ctx.step("charge", _flaky, {"id": "o-1"}, 42)

    result = Harness("inputs").run()
    assert result["output"] == "charged 42"
    failed, succeeded = result["journal"]["stepResults"]["charge"]["attempts"]
    assert failed["status"] == "err" and failed["input"] == [{"id": "o-1"}, 42]
    assert succeeded["status"] == "ok" and succeeded.get("input") is None


def test_arguments_that_are_not_json_are_kept_as_their_repr_and_large_ones_are_cut() -> None:
    class Card:
        def __repr__(self) -> str:
            return "Card(****4242)"

    assert failed_input(()) is None
    assert failed_input((Card(),)) == "(Card(****4242),)"
    cut = failed_input(("x" * (MAX_INPUT_CHARS * 2),))
    assert isinstance(cut, str) and len(cut) < MAX_INPUT_CHARS + 40
    assert cut.endswith(f"({MAX_INPUT_CHARS * 2 + 4:,} characters)")
