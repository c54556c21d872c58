"""``relayflow dev --app X --reload`` started as a user starts it (the installed script, in
their project folder): an edit of the app's code is picked up by the next run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import requests
from dev_process import DevProcess, start_dev

TOKEN = "reload-app-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FLOWS = """
from relayflow import workflow


def version():
    return "VERSION"


@workflow(id="reload.version")
def which(data, ctx):
    return {"version": ctx.step("version", version)}
"""


def _write(path: Path, version: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FLOWS.replace("VERSION", version))


def _completed_output(dev: DevProcess) -> Any:
    answer = requests.post(
        f"{dev.url}/api/runs",
        json={"workflowId": "reload.version", "waitMs": 10000},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    run: dict[str, Any] = answer.json()
    assert run["status"] == "completed", run
    return run["output"]


def _wait_for_restart(dev: DevProcess) -> None:
    dev.wait_for_output(lambda line: "changed; restarting the hosted workflows" in line, 30)
    deadline = time.monotonic() + 90
    while sum("Ctrl-C stops" in line for line in dev.lines) < 2:
        assert time.monotonic() < deadline, dev.output()
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("app", "module", "watched"),
    [
        ("flows", "flows.py", "."),
        ("shop.workflows", "shop/workflows.py", "shop"),
    ],
    ids=["module", "package"],
)
def test_the_next_run_uses_the_edited_code(
    tmp_path: Path, app: str, module: str, watched: str
) -> None:
    project = tmp_path / "project"
    _write(project / module, "v1")
    if "/" in module:
        (project / module).with_name("__init__.py").write_text("")
    dev = start_dev(
        "--token", TOKEN, "--reload", app=app, cwd=project, console_script=True,
        state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        first = dev.lines[0]
        assert first == f"relayflow dev: reloading on changes to {(project / watched).resolve()}"
        assert _completed_output(dev) == {"version": "v1"}

        _write(project / module, "v2")
        _wait_for_restart(dev)
        assert _completed_output(dev) == {"version": "v2"}
    finally:
        try:
            assert dev.interrupt(timeout_s=40) == 0, "\n".join(dev.errors)
        finally:
            dev.kill()
