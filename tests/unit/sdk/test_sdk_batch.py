"""``ctx.parallel`` / ``ctx.map``: child contexts, completion policies, checkpointed branches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sdk_harness import Harness, clean_registry, waits_of  # noqa: F401

from relayflow.errors import StepFailedError
from relayflow.sdk import BatchResult, CompletionPolicy, workflow


def _fail(message: str) -> Any:
    raise ValueError(message)


def _succeeds(value: int) -> Any:
    return lambda c: c.step("s", lambda: value)


def _fails(ctx: Any) -> Any:
    return ctx.step("s", _fail, "no")


def _summary(result: BatchResult[Any]) -> dict[str, Any]:
    return {
        "results": result.results,
        "errors": [None if e is None else e.message for e in result.errors],
        "success": result.success_count,
        "failure": result.failure_count,
        "started": result.started_count,
        "reason": result.completion_reason,
    }


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_parallel_returns_results_and_errors_in_input_order(flavour: str) -> None:
    def ok(ctx: Any, value: int) -> Any:
        return ctx.step("s", lambda: value)

    if flavour == "sync":

        @workflow(id="par")
        def body(data: Any, ctx: Any) -> Any:
            branches = [
                lambda c: ok(c, 1),
                lambda c: c.step("s", _fail, "boom"),
                lambda c: ok(c, 3),
            ]
            return _summary(ctx.parallel(branches))
    else:

        async def aok(ctx: Any, value: int) -> Any:
            return await ctx.step("s", lambda: value)

        async def abad(ctx: Any) -> Any:
            return await ctx.step("s", _fail, "boom")

        @workflow(id="par")
        async def abody(data: Any, ctx: Any) -> Any:
            result = await ctx.parallel([lambda c: aok(c, 1), abad, lambda c: aok(c, 3)])
            return _summary(result)

    harness = Harness("par")
    assert harness.run()["output"] == {
        "results": [1, None, 3],
        "errors": [None, "boom", None],
        "success": 2,
        "failure": 1,
        "started": 3,
        "reason": "ALL_COMPLETED",
    }
    assert {"p0.0/s", "p0.1/s", "p0.2/s"} <= set(harness.journal["stepResults"])


def test_map_runs_fn_with_item_and_index_in_named_child_contexts() -> None:
    @workflow(id="map")
    def body(data: Any, ctx: Any) -> Any:
        result = ctx.map(
            ["a", "b"],
            lambda c, item, index: c.step("up", lambda: f"{index}:{item.upper()}"),
            item_name=lambda item, index: f"item-{item}",
        )
        return result.results

    harness = Harness("map")
    assert harness.run()["output"] == ["0:A", "1:B"]
    assert "m0.item-a/up" in harness.journal["stepResults"]


@pytest.mark.parametrize(
    ("policy", "outcomes", "expected"),
    [
        (CompletionPolicy(min_successful=2), "ooxo", ("MIN_SUCCESSFUL_REACHED", 2, 0, 2)),
        (
            CompletionPolicy(tolerated_failure_count=0),
            "oxoo",
            ("FAILURE_TOLERANCE_EXCEEDED", 1, 1, 2),
        ),
        (
            CompletionPolicy(tolerated_failure_count=1),
            "oxox",
            ("FAILURE_TOLERANCE_EXCEEDED", 2, 2, 4),
        ),
        # 1 failure of 4 = 25% is not > 25%: everything runs.
        (CompletionPolicy(tolerated_failure_percentage=25), "xooo", ("ALL_COMPLETED", 3, 1, 4)),
        (
            CompletionPolicy(tolerated_failure_percentage=25),
            "xxoo",
            ("FAILURE_TOLERANCE_EXCEEDED", 0, 2, 2),
        ),
        # Tolerance is checked before min_successful.
        (
            CompletionPolicy(min_successful=1, tolerated_failure_count=0),
            "ox",
            ("MIN_SUCCESSFUL_REACHED", 1, 0, 1),
        ),
        (
            CompletionPolicy(min_successful=2, tolerated_failure_count=0),
            "oxo",
            ("FAILURE_TOLERANCE_EXCEEDED", 1, 1, 2),
        ),
        (CompletionPolicy(), "xx", ("ALL_COMPLETED", 0, 2, 2)),
    ],
)
def test_completion_policies(
    policy: CompletionPolicy, outcomes: str, expected: tuple[str, int, int, int]
) -> None:
    @workflow(id="policy")
    def body(data: Any, ctx: Any) -> Any:
        branches = [_succeeds(i) if o == "o" else _fails for i, o in enumerate(outcomes)]
        result = ctx.parallel(branches, completion=policy)
        return [
            result.completion_reason,
            result.success_count,
            result.failure_count,
            result.started_count,
        ]

    assert tuple(Harness("policy").run()["output"]) == expected


def test_decide_counts_a_strict_percentage_over_all_branches() -> None:
    policy = CompletionPolicy(tolerated_failure_percentage=50)
    assert policy.decide(0, 2, 4) is None
    assert policy.decide(0, 3, 4) == "FAILURE_TOLERANCE_EXCEEDED"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_max_concurrency_must_be_at_least_one(bad: Any) -> None:
    @workflow(id="mc")
    def body(data: Any, ctx: Any) -> Any:
        ctx.parallel([lambda c: 1], max_concurrency=bad)

    result = Harness("mc").run()
    assert result["status"] == "failed"
    assert "max_concurrency" in result["error"]["message"]


@pytest.mark.parametrize(
    "policy",
    [
        {"min_successful": -1},
        {"tolerated_failure_count": -1},
        {"tolerated_failure_percentage": 101},
    ],
)
def test_invalid_completion_policies_are_refused(policy: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CompletionPolicy(**policy)


def test_async_branches_run_concurrently_up_to_max_concurrency() -> None:
    active = {"now": 0, "peak": 0}

    async def work(value: int) -> int:
        active["now"] += 1
        active["peak"] = max(active["peak"], active["now"])
        await asyncio.sleep(0.01)
        active["now"] -= 1
        return value

    @workflow(id="conc")
    async def body(data: Any, ctx: Any) -> Any:
        result = await ctx.map(
            range(6), lambda c, item, i: c.step("w", work, item), max_concurrency=2
        )
        return result.results

    assert Harness("conc").run()["output"] == [0, 1, 2, 3, 4, 5]
    assert active["peak"] == 2


def test_finished_branches_never_rerun_after_a_suspension_in_another() -> None:
    runs = {"fast": 0, "slow": 0}

    def fast(ctx: Any) -> Any:
        runs["fast"] += 1
        return ctx.step("s", lambda: "fast")

    def slow(ctx: Any) -> Any:
        runs["slow"] += 1
        ctx.sleep("1m")
        return "slow"

    @workflow(id="resume")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.parallel([fast, slow]).results

    harness = Harness("resume")
    first = harness.call()
    assert waits_of(first) == ["sleep:p0.1/0"], "wait ids are namespaced per branch"
    assert harness.run()["output"] == ["fast", "slow"]
    assert runs == {"fast": 1, "slow": 3}
    harness.call()
    assert runs == {"fast": 1, "slow": 3}, "a finished batch replays from its checkpoint"


def test_every_suspended_branch_registers_its_wait() -> None:
    @workflow(id="waits")
    def body(data: Any, ctx: Any) -> Any:
        return ctx.parallel(
            [lambda c: c.wait_for_event("a"), lambda c: c.wait_for_signal("b")]
        ).results

    harness = Harness("waits")
    assert waits_of(harness.call()) == ["event:a:p0.0/0", "signal:b:p0.1/0"]
    harness.resolve("signal:b:p0.1/0", "SIGNAL", "B")
    assert waits_of(harness.call()) == ["event:a:p0.0/0"]
    harness.resolve("event:a:p0.0/0", "EVENT", "A")
    assert harness.call()["output"] == ["A", "B"]


def test_a_completed_batch_drops_the_waits_of_abandoned_branches() -> None:
    @workflow(id="abandon")
    def body(data: Any, ctx: Any) -> Any:
        result = ctx.parallel(
            [lambda c: c.wait_for_event("never"), lambda c: c.step("s", lambda: 1)],
            completion=CompletionPolicy(min_successful=1),
        )
        return [result.results, result.started_count, result.completion_reason]

    result = Harness("abandon").run()
    assert result["status"] == "completed"
    assert result["output"] == [[None, 1], 2, "MIN_SUCCESSFUL_REACHED"]


def test_raise_if_error_raises_the_first_error_in_input_order() -> None:
    @workflow(id="raise")
    def body(data: Any, ctx: Any) -> Any:
        result = ctx.parallel(
            [lambda c: 1, lambda c: c.step("s", _fail, "second"), lambda c: _fail("third")]
        )
        try:
            result.raise_if_error()
        except StepFailedError as exc:
            return exc.message

    assert Harness("raise").run()["output"] == "second"


def test_child_contexts_have_their_own_deterministic_randomness() -> None:
    @workflow(id="rand")
    def body(data: Any, ctx: Any) -> Any:
        values = ctx.parallel([lambda c: c.random(), lambda c: c.random()]).results
        return [values, ctx.random()]

    first = Harness("rand").run()["output"]
    again = Harness("rand").run()["output"]
    assert first == again
    assert first[0][0] != first[0][1]
    assert first[1] == 0.8800948064308614


def test_branch_names_must_be_unique_and_match_the_branches() -> None:
    @workflow(id="names")
    def body(data: Any, ctx: Any) -> Any:
        ctx.parallel([lambda c: 1, lambda c: 2], names=["x", "x"])

    assert "unique" in Harness("names").run()["error"]["message"]


def test_has_failure_says_whether_any_branch_failed() -> None:
    @workflow(id="has_failure")
    def body(data: Any, ctx: Any) -> Any:
        clean = ctx.parallel([_succeeds(1), _succeeds(2)])
        mixed = ctx.parallel([_succeeds(1), _fails])
        return [clean.has_failure, mixed.has_failure]

    assert Harness("has_failure").run()["output"] == [False, True]


class _Totals:
    """A result serdes that keeps only what the body needs: the sum and the failure count."""

    def __init__(self) -> None:
        self.loads_seen: list[Any] = []

    def dumps(self, value: BatchResult[Any]) -> Any:
        return {"sum": sum(r or 0 for r in value.results), "failures": value.failure_count}

    def loads(self, data: Any) -> Any:
        self.loads_seen.append(data)
        return BatchResult(
            results=[data["sum"]],
            errors=[None],
            success_count=1,
            failure_count=data["failures"],
            started_count=1,
            completion_reason="ALL_COMPLETED",
        )


@pytest.mark.parametrize("op", ["parallel", "map"])
def test_result_serdes_carries_the_whole_batch_result_on_the_first_run_and_on_replay(
    op: str,
) -> None:
    totals = _Totals()

    @workflow(id=f"result_serdes_{op}")
    def body(data: Any, ctx: Any) -> Any:
        if op == "parallel":
            result = ctx.parallel([_succeeds(2), _succeeds(3)], result_serdes=totals)
        else:
            result = ctx.map([2, 3], lambda c, item, i: item, result_serdes=totals)
        ctx.sleep("1s")
        return {"results": result.results, "has_failure": result.has_failure}

    harness = Harness(f"result_serdes_{op}")
    first = harness.call()
    [batch_key] = [k for k in harness.journal["stepResults"] if k.startswith("batch:")]
    assert harness.journal["stepResults"][batch_key]["output"] == {
        "result": {"sum": 5, "failures": 0}
    }
    assert first["status"] == "waiting"
    done = harness.run()
    assert done["output"] == {"results": [5], "has_failure": False}
    # loads ran on the first run and again on every replay, the one that returned included.
    assert len(harness.bodies) >= 2
    assert totals.loads_seen == [{"sum": 5, "failures": 0}] * len(harness.bodies)


def _mixed_batch(ctx: Any) -> Any:
    """A parallel whose branches succeed, fail and are abandoned, then a sleep (so the next
    invocation replays the batch from its entry)."""
    result = ctx.parallel(
        [_succeeds(1), _fails, lambda c: c.wait_for_event("never"), _succeeds(4)],
        completion=CompletionPolicy(min_successful=2),
    )
    ctx.sleep("1m")
    return _summary(result)


def test_a_batch_entry_names_its_branches_outcomes_and_replays_from_their_entries() -> None:
    @workflow(id="by-reference")
    def body(data: Any, ctx: Any) -> Any:
        return _mixed_batch(ctx)

    harness = Harness("by-reference")
    harness.call()
    entry = harness.journal["stepResults"]["batch:p0"]
    assert entry["output"]["outcomes"] == "oe-o"
    assert "branches" not in entry["output"], "a map's default names are its positions"
    assert "results" not in entry["output"], "results stay in the branches' own entries"
    first = harness.bodies[-1]
    assert first["status"] == "waiting"
    replayed = harness.run()
    assert replayed["status"] == "completed"
    assert replayed["output"] == {
        "results": [1, None, None, 4],
        "errors": [None, "no", None, None],
        "success": 2,
        "failure": 1,
        "started": 4,
        "reason": "MIN_SUCCESSFUL_REACHED",
    }


def test_a_batch_entry_with_copies_recorded_by_an_earlier_version_still_replays() -> None:
    @workflow(id="with-copies")
    def body(data: Any, ctx: Any) -> Any:
        return _mixed_batch(ctx)

    harness = Harness("with-copies")
    harness.call()
    output = harness.journal["stepResults"]["batch:p0"]["output"]
    codes = output.pop("outcomes")
    steps = harness.journal["stepResults"]
    branches = [steps.get(f"branch:p0.{i}", {}) for i in range(4)]
    # The earlier form: copies of each counted result and error, nothing read from branches.
    output["results"] = [
        b.get("output") if c == "o" else None for b, c in zip(branches, codes, strict=True)
    ]
    output["errors"] = [
        b.get("error") if c == "e" else None for b, c in zip(branches, codes, strict=True)
    ]
    for branch in branches:
        branch["output"] = "not read"
    result = harness.run()
    assert result["output"]["results"] == [1, None, None, 4]
    assert result["output"]["errors"] == [None, "no", None, None]
