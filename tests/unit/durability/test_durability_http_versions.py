"""An HTTP step host names its build in every answer and refuses a run pinned to another
build (``version_unavailable``): the run waits for its build, and finishes on it."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv
from relayflow.worker.builds import BUILD_ID_ENV
from tests.unit.durability.http_host_support import HttpHostedEnv

pytestmark = pytest.mark.usefixtures("clean_registry")


def _hosted(versioning: Any) -> HttpHostedEnv:
    @workflow(id="http.versions", versioning=versioning)
    def two(data: Any, ctx: Any) -> Any:
        ctx.step("first", lambda: 1)
        ctx.sleep("1m")
        return ctx.step("second", lambda: 2)

    return HttpHostedEnv(WorkflowTestEnv(workflows=[two]), checkpoints=True, services={})


def test_a_host_of_another_build_refuses_a_pinned_run_until_its_build_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosted = _hosted("pinned")
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = hosted.env.trigger("http.versions")
    assert run.status == "waiting"
    assert run.code_version is not None and run.code_version.build == "build-1"

    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    hosted.env.advance("5m")
    waiting = hosted.env.get_run(run.id)
    assert waiting.status == "running" and waiting.version_wait is not None
    assert "409 version_unavailable" in waiting.version_wait.reason
    assert "build-1" in waiting.version_wait.reason
    assert hosted.host_adapter.requests[-1]["codeVersion"] == {"build": "build-1"}

    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    hosted.env.advance("1h")
    done = hosted.env.get_run(run.id)
    assert (done.status, done.output, done.version_wait) == ("completed", 2, None)


def test_an_upgrade_run_is_answered_by_the_host_of_the_new_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosted = _hosted("upgrade")
    monkeypatch.setenv(BUILD_ID_ENV, "build-1")
    run = hosted.env.trigger("http.versions")
    monkeypatch.setenv(BUILD_ID_ENV, "build-2")
    hosted.env.run_until_idle()
    done = hosted.env.get_run(run.id)
    assert done.status == "completed"
    assert done.code_version is not None and done.code_version.build == "build-2"
    assert "codeVersion" not in hosted.host_adapter.requests[-1]
