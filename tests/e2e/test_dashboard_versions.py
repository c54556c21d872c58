"""Code versions on the dashboard in headless Chromium against ``relayflow dev --reload``: a
pinned run left waiting for its build by a code change (and the loss of the stack's copy of
that build) shows its "Version" line (build,
versioning, why it waits), is found by the runs list's build filter, and "Upgrade to current
version" moves it to the new build, where it completes.

A screenshot of the waiting run's page lands in ``artifacts/dashboard/`` (git-ignored) as
``run-version-wait.png``.
"""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from browser import chromium, screenshot
from dev_process import DevProcess, start_dev

TOKEN = "e2e-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
UI_TIMEOUT_MS = 20_000

pytestmark = pytest.mark.slow

FLOWS = """
from relayflow import workflow


def note(name):
    return {"step": name, "greeting": GREETING}


@workflow(id="versions.pinned")
async def pinned(data, ctx):
    first = await ctx.step("first", note, "first")
    await ctx.wait_for_signal("go")
    second = await ctx.step("second", note, "second")
    return [first, second]


GREETING = "{greeting}"
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevProcess, Path]]:
    root = tmp_path_factory.mktemp("versions")
    module = root / "version_flows.py"
    module.write_text(textwrap.dedent(FLOWS).replace("{greeting}", "hello"))
    dev = start_dev(
        "--token", TOKEN, "--reload", app="version_flows", cwd=root, state_dir=root / "state"
    )
    try:
        yield dev, module
    finally:
        try:
            dev.interrupt(timeout_s=40)
        finally:
            dev.kill()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(
        tmp_path_factory.mktemp("chromium-profile"), viewport={"width": 1280, "height": 900}
    ) as context:
        yield context


def run_of(dev: DevProcess, run_id: str) -> dict[str, Any]:
    answer = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def eventually(dev: DevProcess, run_id: str, check: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = run_of(dev, run_id)
        if check(run):
            return run
        time.sleep(0.1)
    raise AssertionError(f"{run_id} never {what}: {run_of(dev, run_id)}")


def stranded_run(dev: DevProcess, module: Path) -> tuple[str, str]:
    """A pinned run waiting for the build it started on, after a code change and the loss of
    the stack's copy of that build; its id and that build."""
    answer = requests.post(
        f"{dev.url}/api/runs", json={"workflowId": "versions.pinned"}, headers=AUTH, timeout=30
    )
    assert answer.status_code == 201, answer.text
    run = eventually(dev, answer.json()["id"], lambda r: r["status"] == "waiting", "waited")
    build = run["codeVersion"]["build"]
    module.write_text(textwrap.dedent(FLOWS).replace("{greeting}", "bonjour"))
    dev.wait_for_output(lambda line: "changed; restarting the hosted workflows" in line, 30)
    deadline = time.monotonic() + 90
    while sum("Ctrl-C stops" in line for line in dev.lines) < 2:
        assert time.monotonic() < deadline, dev.output()
        time.sleep(0.1)
    shutil.rmtree(module.parent / "state" / "builds" / build)
    signal = requests.post(
        f"{dev.url}/api/runs/{run['id']}/signals",
        json={"name": "go", "payload": {}},
        headers=AUTH,
        timeout=30,
    )
    assert signal.status_code == 200, signal.text
    eventually(dev, run["id"], lambda r: r["versionWait"] is not None, "waited for its build")
    return run["id"], build


def test_a_run_waiting_for_its_build_is_shown_found_and_upgraded(
    browser: Any, stack: tuple[DevProcess, Path]
) -> None:
    dev, module = stack
    run_id, build = stranded_run(dev, module)
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("dialog", lambda dialog: dialog.accept())
    page.set_default_timeout(UI_TIMEOUT_MS)
    line = dev.wait_for_output(lambda text: text.strip().startswith("dashboard "), 5)
    page.goto(line.split()[-1])
    page.wait_for_selector("#runs-list table, #runs-empty")

    page.evaluate("fragment => { location.hash = fragment; }", "#/runs?version=" + build)
    page.locator("#runs-table tbody tr", has_text=run_id).wait_for()
    assert page.locator("#runs-table tbody tr").count() == 1
    assert f"{build} (waiting)" in page.locator("#runs-table tbody tr").inner_text()

    page.evaluate("fragment => { location.hash = fragment; }", "#/runs/" + run_id)
    page.wait_for_selector("#run-version-wait")
    assert page.locator("#run-build").inner_text() == build
    assert page.locator("#run-versioning").inner_text() == "pinned (keeps this code)"
    assert build in page.locator("#run-version-wait").inner_text()
    upgrade = page.locator("#upgrade-run")
    assert upgrade.inner_text() == "Upgrade to current version"
    assert "primary" in (upgrade.get_attribute("class") or "")
    screenshot(page, "run-version-wait")

    upgrade.click()

    page.locator("#run-status", has_text="completed").wait_for()
    page.wait_for_selector("#run-version-wait", state="detached")
    moved = page.locator("#run-build").inner_text()
    assert moved != build
    assert page.locator("#upgrade-run").count() == 0
    done = run_of(dev, run_id)
    assert done["codeVersion"]["build"] == moved
    assert done["output"][1]["greeting"] == "bonjour"
    assert [a["kind"] for a in done["actions"]] == ["upgrade"]
    page.locator("#journal-list li", has_text="upgrade by static").wait_for()
    page.close()
    assert not problems, problems
