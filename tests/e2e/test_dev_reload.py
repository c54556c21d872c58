"""``relayflow dev --reload``: a code change restarts the hosted workflows; runs carry on."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import requests
from dev_process import start_dev, wait_until_completed

TOKEN = "reload-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FLOWS = """
from relayflow import workflow


@workflow(id="reload.greet")
async def greet(data, ctx):
    who = await ctx.wait_for_signal("go")
    return {"greeting": GREETING + " " + who["name"]}


GREETING = "{greeting}"
"""


def test_a_changed_module_is_reloaded_and_the_waiting_run_finishes_with_it(
    tmp_path: Path,
) -> None:
    module = tmp_path / "reload_flows.py"
    module.write_text(textwrap.dedent(FLOWS).replace("{greeting}", "hello"))
    dev = start_dev(
        "--token", TOKEN, "--reload", app="reload_flows", cwd=tmp_path,
        state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        answer = requests.post(
            f"{dev.url}/api/runs", json={"workflowId": "reload.greet"}, headers=AUTH, timeout=30
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        assert answer.json()["status"] == "waiting"

        module.write_text(textwrap.dedent(FLOWS).replace("{greeting}", "bonjour"))
        dev.wait_for_output(lambda line: "changed; restarting the hosted workflows" in line, 30)
        deadline = time.monotonic() + 90
        while sum("Ctrl-C stops" in line for line in dev.lines) < 2:
            assert time.monotonic() < deadline, dev.output()
            time.sleep(0.1)
        signal = requests.post(
            f"{dev.url}/api/runs/{run_id}/signals",
            json={"name": "go", "payload": {"name": "ada"}},
            headers=AUTH,
            timeout=30,
        )
        assert signal.status_code == 200, signal.text
        run = wait_until_completed(dev.url, run_id, AUTH, timeout_s=30)
        assert run["output"] == {"greeting": "bonjour ada"}
    finally:
        try:
            assert dev.interrupt(timeout_s=40) == 0, "\n".join(dev.errors)
        finally:
            dev.kill()
