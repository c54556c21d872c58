"""Runs and the code they run on, on every driver: a ``pinned`` workflow's run keeps the
build that answered its first invocation (and waits, without failing, while only another
build answers), an ``upgrade`` workflow's run moves to the build that answers now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relayflow import workflow
from relayflow.errors import RunTerminalError
from relayflow.testing import DriverHarness
from relayflow.worker.builds import BUILD_ID_ENV

pytestmark = pytest.mark.usefixtures("clean_registry")

MakeEnv = Callable[..., DriverHarness]


def _two_steps(versioning: Any, ledger: list[str]) -> Any:
    @workflow(id="versions.two", versioning=versioning)
    async def two(data: Any, ctx: Any) -> Any:
        first = await ctx.step("first", lambda: ledger.append("first") or 1)
        await ctx.sleep("1m")
        return first + await ctx.step("second", lambda: ledger.append("second") or 1)

    return two


def test_a_pinned_run_waits_for_its_build_and_finishes_on_it(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_two_steps("pinned", ledger)])
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = env.trigger("versions.two", {})
    assert run.status == "waiting"
    assert run.code_version is not None and run.code_version.build == "build-1"
    assert run.versioning == "pinned"

    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    env.advance("2m")
    env.run_until_idle()
    held = env.get_run(run.id)
    assert held.status == "running", "another build answered: the run waits, it does not fail"
    assert held.version_wait is not None and "build-1" in held.version_wait.reason
    assert ledger == ["first"]
    env.advance("10m")
    env.run_until_idle()
    assert env.get_run(run.id).version_wait.attempts > 1  # type: ignore[union-attr]

    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    env.advance("1h")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed" and done.output == 2
    assert done.version_wait is None
    assert ledger == ["first", "second"]


def test_an_upgrade_run_moves_to_the_build_that_answers_now(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_two_steps("upgrade", ledger)])
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = env.trigger("versions.two", {})
    assert run.versioning == "upgrade"
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    env.advance("2m")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.code_version is not None and done.code_version.build == "build-2"
    assert ledger == ["first", "second"]


def test_without_a_named_build_the_build_is_the_workflow_code(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BUILD_ID_ENV, raising=False)
    env = make_env(workflows=[_two_steps("pinned", [])])
    first = env.trigger("versions.two", {})
    second = env.trigger("versions.two", {})
    assert first.code_version is not None and second.code_version is not None
    assert first.code_version.build == second.code_version.build
    assert len(first.code_version.build) == 12


def test_upgrade_moves_a_run_waiting_for_its_build_to_the_build_that_answers(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_two_steps("pinned", ledger)])
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = env.trigger("versions.two", {})
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    env.advance("2m")
    env.run_until_idle()
    assert env.get_run(run.id).version_wait is not None

    env.admin.upgrade_run(run.id, by="oncall", action_id="upgrade-1", reason="build-1 is gone")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed" and done.output == 2
    assert done.code_version is not None and done.code_version.build == "build-2"
    assert done.version_wait is None
    assert ledger == ["first", "second"]
    [action] = done.actions
    assert (action.id, action.kind, action.by) == ("upgrade-1", "upgrade", "oncall")
    assert action.detail["from"]["build"] == "build-1"
    assert "build-1" in action.detail["versionWait"]

    again = env.admin.upgrade_run(run.id, by="oncall", action_id="upgrade-1")
    assert [a.id for a in again.actions] == ["upgrade-1"], "a repeated action id acts once"
    with pytest.raises(RunTerminalError) as ended:
        env.admin.upgrade_run(run.id, by="oncall", action_id="upgrade-2")
    assert ended.value.code == "already_terminal"


def test_upgrade_of_a_run_that_names_no_build_is_kept_with_nothing_to_change(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    env = make_env(workflows=[_two_steps("upgrade", [])])
    run = env.trigger("versions.two", {})
    assert run.status == "waiting"
    moved = env.admin.upgrade_run(run.id, by="oncall", action_id="upgrade-1")
    assert moved.status == "waiting"
    assert moved.code_version is not None and moved.code_version.build == "build-1"
    [action] = moved.actions
    assert action.kind == "upgrade" and action.detail == {"from": None, "versionWait": None}


def test_an_upgraded_pinned_run_keeps_the_build_that_answers_next(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(workflows=[_two_steps("pinned", [])])
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = env.trigger("versions.two", {})
    moved = env.admin.upgrade_run(run.id, by="oncall")
    assert moved.status == "waiting" and moved.code_version is None
    assert moved.actions[0].detail["from"]["build"] == "build-1"
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    env.advance("2m")
    env.run_until_idle()
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.code_version is not None and done.code_version.build == "build-2"


def test_a_rerun_starts_on_the_code_its_copied_history_was_recorded_on(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    env = make_env(workflows=[_two_steps("pinned", ledger)])
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = env.trigger("versions.two", {})
    env.run_until_idle()
    assert env.get_run(run.id).status == "completed"

    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    rerun = env.admin.rerun_run(run.id, from_step="second", by="oncall")
    env.run_until_idle()
    held = env.get_run(rerun.id)
    assert held.code_version is not None and held.code_version.build == "build-1"
    assert held.version_wait is not None, "build-2 answered: the rerun waits for build-1"

    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    env.advance("1h")
    assert env.get_run(rerun.id).status == "completed"
    assert ledger == ["first", "second", "second"]
