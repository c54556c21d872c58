"""``ctx.patched()`` on every driver and durability mode, sync and async bodies: a run of an
``upgrade`` workflow recorded on the old body keeps its history when it resumes on the
patched body, a new run takes the new branch and keeps it on every replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relayflow import workflow
from relayflow.testing import DriverHarness, crash

pytestmark = pytest.mark.usefixtures("clean_registry")

MakeEnv = Callable[..., DriverHarness]
WORKFLOW = "patches.order"
FLAVOURS = ("sync", "async")


def _old_body(flavour: str, ledger: list[str]) -> Any:
    """charge, sleep, ship: the code runs were recorded on."""

    def charge() -> int:
        ledger.append("charge")
        return 10

    def ship() -> int:
        ledger.append("ship")
        return 1

    if flavour == "sync":

        @workflow(id=WORKFLOW, versioning="upgrade")
        def old(data: Any, ctx: Any) -> Any:
            amount = ctx.step("charge", charge)
            ctx.sleep("1m")
            return amount + ctx.step("ship", ship)

        return old

    @workflow(id=WORKFLOW, versioning="upgrade")
    async def old_async(data: Any, ctx: Any) -> Any:
        amount = await ctx.step("charge", charge)
        await ctx.sleep("1m")
        return amount + await ctx.step("ship", ship)

    return old_async


def _patched_body(flavour: str, ledger: list[str], seen: list[bool]) -> Any:
    """The new code charges with fees behind a patch, and sleeps once more before shipping
    (the patch is asked again on each replay)."""

    def charge() -> int:
        ledger.append("charge")
        return 10

    def charge_with_fees() -> int:
        ledger.append("charge_with_fees")
        return 12

    def ship() -> int:
        ledger.append("ship")
        return 1

    if flavour == "sync":

        @workflow(id=WORKFLOW, versioning="upgrade")
        def new(data: Any, ctx: Any) -> Any:
            fees = ctx.patched("fees")
            seen.append(fees)
            amount = (
                ctx.step("charge_fees", charge_with_fees) if fees else ctx.step("charge", charge)
            )
            ctx.sleep("1m")
            if fees:
                ctx.sleep("1m")
            return amount + ctx.step("ship", ship)

        return new

    @workflow(id=WORKFLOW, versioning="upgrade")
    async def new_async(data: Any, ctx: Any) -> Any:
        fees = ctx.patched("fees")
        seen.append(fees)
        if fees:
            amount = await ctx.step("charge_fees", charge_with_fees)
        else:
            amount = await ctx.step("charge", charge)
        await ctx.sleep("1m")
        if fees:
            await ctx.sleep("1m")
        return amount + await ctx.step("ship", ship)

    return new_async


def _finish(env: DriverHarness, run_id: str) -> Any:
    for _ in range(4):
        env.advance("2m")
        env.run_until_idle()
    return env.get_run(run_id)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_run_recorded_before_the_patch_keeps_its_branch_on_the_new_code(
    make_env: MakeEnv, flavour: str
) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_old_body(flavour, ledger)])
    run = env.trigger(WORKFLOW, {})
    assert run.status == "waiting" and ledger == ["charge"]

    seen: list[bool] = []
    _patched_body(flavour, ledger, seen)
    done = _finish(env, run.id)

    assert done.status == "completed", done.error
    assert done.output == 11
    assert ledger == ["charge", "ship"], "the recorded charge is kept, never charged again"
    assert seen and not any(seen), "every replay of the old history takes the old branch"
    history = env.admin.history(run.id)
    assert all(entry.patches is None for entry in history.journal.step_results.values())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_new_run_takes_the_patched_branch_on_every_replay(
    make_env: MakeEnv, flavour: str
) -> None:
    ledger: list[str] = []
    seen: list[bool] = []
    env = make_env(workflows=[_patched_body(flavour, ledger, seen)])
    run = env.trigger(WORKFLOW, {})
    assert run.status == "waiting"

    done = _finish(env, run.id)

    assert done.status == "completed", done.error
    assert done.output == 13
    assert ledger == ["charge_with_fees", "ship"]
    assert len(seen) >= 3 and all(seen), "replays across both sleeps answer True again"
    steps = env.admin.history(run.id).journal.step_results
    assert steps["charge_fees"].patches == ("fees",), "journalled with the next entry"
    assert steps["ship"].patches is None


def test_a_patch_met_before_a_wait_answers_the_same_after_it(make_env: MakeEnv) -> None:
    ledger: list[str] = []
    seen: list[bool] = []

    @workflow(id=WORKFLOW, versioning="upgrade")
    def body(data: Any, ctx: Any) -> Any:
        new = ctx.patched("notify-later")
        seen.append(new)
        if new:
            ctx.sleep("1m")
            return ctx.step("notify", lambda: ledger.append("notify") or "late")
        return ctx.step("notify-now", lambda: ledger.append("notify-now") or "now")

    env = make_env(workflows=[body])
    run = env.trigger(WORKFLOW, {})
    assert run.status == "waiting"

    done = _finish(env, run.id)

    assert (done.status, done.output) == ("completed", "late")
    assert seen == [True, True] and ledger == ["notify"]
    steps = env.admin.history(run.id).journal.step_results
    assert steps["notify"].patches == ("notify-later",)


def test_deprecate_patch_replays_runs_with_and_without_the_marker(make_env: MakeEnv) -> None:
    ledger: list[str] = []
    seen: list[bool] = []
    env = make_env(workflows=[_patched_body("sync", ledger, seen)])
    marked = env.trigger(WORKFLOW, {})

    @workflow(id=WORKFLOW, versioning="upgrade")
    def deprecated(data: Any, ctx: Any) -> Any:
        ctx.deprecate_patch("fees")
        amount = ctx.step("charge_fees", lambda: ledger.append("charge_with_fees") or 12)
        ctx.sleep("1m")
        ctx.sleep("1m")
        return amount + ctx.step("ship", lambda: ledger.append("ship") or 1)

    fresh = env.trigger(WORKFLOW, {})
    assert _finish(env, marked.id).output == 13
    assert _finish(env, fresh.id).output == 13
    steps = env.admin.history(fresh.id).journal.step_results
    assert steps["charge_fees"].patches == ("fees",), "code still calling patched() replays it"


@pytest.mark.parametrize(
    ("change_id", "error"),
    [("", "ValueError"), ("   ", "ValueError"), (7, "TypeError")],
)
def test_a_change_id_must_be_a_non_empty_string(
    make_env: MakeEnv, change_id: Any, error: str
) -> None:
    @workflow(id=WORKFLOW)
    def body(data: Any, ctx: Any) -> Any:
        return ctx.patched(change_id)

    env = make_env(workflows=[body])
    run = env.trigger(WORKFLOW, {})

    assert run.status == "failed"
    assert run.error is not None
    assert error in (run.error.name or run.error.code or "")
    assert "change id" in (run.error.message or "")


def test_the_marker_survives_a_host_crash_after_its_step_was_checkpointed(
    make_env: MakeEnv,
) -> None:
    ledger: list[str] = []
    crashes = [1]

    def flaky() -> str:
        ledger.append("flaky")
        if crashes:
            crashes.pop()
            crash()
        return "ok"

    @workflow(id=WORKFLOW, versioning="upgrade")
    def body(data: Any, ctx: Any) -> Any:
        if ctx.patched("fees"):
            first = ctx.step("charge_fees", lambda: ledger.append("charge_with_fees") or 12)
        else:
            first = ctx.step("charge", lambda: ledger.append("charge") or 10)
        return [first, ctx.step("flaky", flaky)]

    env = make_env(workflows=[body])
    run = env.trigger(WORKFLOW, {})
    env.recover(run.id)
    env.run_until_idle()
    done = env.get_run(run.id)

    assert done.status == "completed", done.error
    assert done.output == [12, "ok"]
    steps = env.admin.history(run.id).journal.step_results
    assert steps["charge_fees"].patches == ("fees",)
    # Per step, the charge (with its marker) was in the checkpoint log before the crash and
    # the recovery folds it in; batched, the crashed invocation saved nothing and the run
    # took the patched branch afresh.
    per_step = env.engine.checkpoints is not None  # type: ignore[attr-defined]
    assert ledger.count("charge_with_fees") == (1 if per_step else 2)
    assert "charge" not in ledger


def _grouped(ledger: list[str], *, patched: bool) -> Any:
    @workflow(id=WORKFLOW, versioning="upgrade")
    def body(data: Any, ctx: Any) -> Any:
        def payment(g: Any) -> Any:
            if patched and g.patched("hold-twice"):
                held = g.step("hold_twice", lambda: ledger.append("hold_twice") or 2)
            else:
                held = g.step("hold", lambda: ledger.append("hold") or 1)
            g.sleep("1m")
            return held

        return ctx.group("payment", payment)

    return body


def test_a_patch_inside_a_group_reads_the_group_s_history(make_env: MakeEnv) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_grouped(ledger, patched=False)])
    old = env.trigger(WORKFLOW, {})
    _grouped(ledger, patched=True)
    new = env.trigger(WORKFLOW, {})

    assert _finish(env, old.id).output == 1
    assert _finish(env, new.id).output == 2
    assert sorted(ledger) == ["hold", "hold_twice"]
    steps = env.admin.history(new.id).journal.step_results
    assert steps["payment/hold_twice"].patches == ("hold-twice",)


def test_a_run_parked_on_a_wait_right_after_the_patch_point_takes_the_new_branch(
    make_env: MakeEnv,
) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_old_body("sync", ledger)])
    run = env.trigger(WORKFLOW, {})

    @workflow(id=WORKFLOW, versioning="upgrade")
    def audited(data: Any, ctx: Any) -> Any:
        amount = ctx.step("charge", lambda: ledger.append("charge") or 10)
        if ctx.patched("audit"):
            ctx.step("audit", lambda: ledger.append("audit") or 0)
        ctx.sleep("1m")
        return amount + ctx.step("ship", lambda: ledger.append("ship") or 1)

    done = _finish(env, run.id)

    # A wait leaves no trace of the code that reached it: nothing after the patch point was
    # journalled, so the run is at the end of its history there.
    assert (done.status, done.output) == ("completed", 11)
    assert ledger == ["charge", "audit", "ship"]
    steps = env.admin.history(run.id).journal.step_results
    assert steps["audit"].patches == ("audit",)
    assert [steps[k].ordinal for k in ("charge", "audit", "ship")] == [0, 1, 2]
