"""``relayflow dev --reload``: a code change restarts the hosted workflows; runs carry on, a
pinned workflow's on the code it started with, an upgrade workflow's on the new code."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import requests
from dev_process import DevProcess, start_dev, wait_until_completed

TOKEN = "reload-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FLOWS = """
from relayflow import workflow


@workflow(id="reload.greet")
async def greet(data, ctx):
    who = await ctx.wait_for_signal("go")
    return {"greeting": GREETING + " " + who["name"]}


@workflow(id="reload.greet-latest", versioning="upgrade")
async def greet_latest(data, ctx):
    who = await ctx.wait_for_signal("go")
    return {"greeting": GREETING + " " + who["name"]}


GREETING = "{greeting}"
"""


def _start(dev: DevProcess, workflow: str) -> str:
    answer = requests.post(
        f"{dev.url}/api/runs", json={"workflowId": workflow}, headers=AUTH, timeout=30
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"] == "waiting"
    return str(answer.json()["id"])


def _finish(dev: DevProcess, run_id: str) -> Any:
    signal = requests.post(
        f"{dev.url}/api/runs/{run_id}/signals",
        json={"name": "go", "payload": {"name": "ada"}},
        headers=AUTH,
        timeout=30,
    )
    assert signal.status_code == 200, signal.text
    return wait_until_completed(dev.url, run_id, AUTH, timeout_s=60)["output"]


def test_a_pinned_run_finishes_on_its_code_and_an_upgrade_run_on_the_new_code(
    tmp_path: Path,
) -> None:
    module = tmp_path / "reload_flows.py"
    module.write_text(textwrap.dedent(FLOWS).replace("{greeting}", "hello"))
    dev = start_dev(
        "--token", TOKEN, "--reload", app="reload_flows", cwd=tmp_path,
        state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        pinned = _start(dev, "reload.greet")
        moving = _start(dev, "reload.greet-latest")

        module.write_text(textwrap.dedent(FLOWS).replace("{greeting}", "bonjour"))
        dev.wait_for_output(lambda line: "changed; restarting the hosted workflows" in line, 30)
        deadline = time.monotonic() + 90
        while sum("Ctrl-C stops" in line for line in dev.lines) < 2:
            assert time.monotonic() < deadline, dev.output()
            time.sleep(0.1)
        fresh = _start(dev, "reload.greet")

        assert _finish(dev, pinned) == {"greeting": "hello ada"}
        assert _finish(dev, moving) == {"greeting": "bonjour ada"}
        assert _finish(dev, fresh) == {"greeting": "bonjour ada"}
        builds = sorted(p.name for p in (tmp_path / "state" / "builds").iterdir())
        assert len(builds) == 2, builds
    finally:
        try:
            assert dev.interrupt(timeout_s=40) == 0, "\n".join(dev.errors)
        finally:
            dev.kill()
