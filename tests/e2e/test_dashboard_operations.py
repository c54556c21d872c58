"""The run page's operator actions in headless Chromium against ``relayflow dev``: pause and
resume a waiting run, redrive a failed one, rerun a run from the third of its five steps
and land on the new run.

Screenshots of the rerun dialog and of the new run's page land in ``artifacts/dashboard/``
(git-ignored), as ``rerun-dialog.png`` and ``rerun-new-run.png``.
"""

from __future__ import annotations

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
UI_TIMEOUT_MS = 15_000

pytestmark = pytest.mark.slow

OPERATED_FLOWS = """
import time
from pathlib import Path

from relayflow import workflow


def record(name, data):
    return {"step": name, "saw": data}


def charge(marker):
    if not Path(marker).exists():
        raise RuntimeError("the bank is down")
    return {"charged": True}


@workflow(id="ops.wait")
async def wait(data, ctx):
    # A second of work before the wait: a resumed run is seen running, then goes back to
    # waiting on the wait it had, a change of status that adds no journal event.
    time.sleep(1)
    return {"go": await ctx.wait_for_signal("go")}


@workflow(id="ops.flaky")
async def flaky(data, ctx):
    return await ctx.step("charge", charge, data["marker"])


@workflow(id="ops.five")
async def five(data, ctx):
    results = []
    for name in ("s1", "s2", "s3", "s4", "s5"):
        results.append(await ctx.step(name, record, name, data))
    return results
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevProcess, Path]]:
    root = tmp_path_factory.mktemp("operated")
    (root / "operated_flows.py").write_text(textwrap.dedent(OPERATED_FLOWS))
    dev = start_dev("--token", TOKEN, app="operated_flows", cwd=root, state_dir=root / "state")
    try:
        yield dev, root
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(
        tmp_path_factory.mktemp("chromium-profile"), viewport={"width": 1280, "height": 900}
    ) as context:
        yield context


@pytest.fixture
def page(browser: Any, stack: tuple[DevProcess, Path]) -> Iterator[Any]:
    dev, _ = stack
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on(
        "console",
        lambda m: (
            problems.append(f"console: {m.text}")
            if m.type == "error" and "409" not in m.text
            else None
        ),
    )
    tab.on("dialog", lambda dialog: dialog.accept())
    tab.set_default_timeout(UI_TIMEOUT_MS)
    line = dev.wait_for_output(lambda text: text.strip().startswith("dashboard "), 5)
    tab.goto(line.split()[-1])
    tab.wait_for_selector("#runs-list table, #runs-empty")
    yield tab
    tab.close()
    assert not problems, problems


def trigger(dev: DevProcess, workflow: str, payload: Any) -> str:
    answer = requests.post(
        f"{dev.url}/api/runs",
        json={"workflowId": workflow, "input": payload},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code in (200, 201), answer.text
    return str(answer.json()["id"])


def run_of(dev: DevProcess, run_id: str) -> dict[str, Any]:
    answer = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def settled(dev: DevProcess, run_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run = run_of(dev, run_id)
        if run["status"] == status:
            return run
        time.sleep(0.05)
    raise AssertionError(f"{run_id} is {run_of(dev, run_id)['status']}, not {status}")


def open_run(page: Any, run_id: str) -> None:
    page.evaluate("fragment => { location.hash = fragment; }", "#/runs/" + run_id)
    page.wait_for_selector("#run-status")


def test_pause_and_resume_a_waiting_run(page: Any, stack: tuple[DevProcess, Path]) -> None:
    dev, _ = stack
    run_id = trigger(dev, "ops.wait", {})
    settled(dev, run_id, "waiting")
    open_run(page, run_id)
    page.locator("#run-status", has_text="waiting").wait_for()
    # A waiting run can be paused or cancelled, not resumed or redriven.
    assert page.locator("#resume-run").count() == 0 and page.locator("#redrive-run").count() == 0

    page.fill("#cancel-reason", "the bank is down")
    page.click("#pause-run")

    page.locator("#run-status", has_text="paused").wait_for()
    paused = page.locator("#run-paused").inner_text()
    assert "paused since" in paused and "by static: the bank is down" in paused
    assert page.locator("#pause-run").count() == 0
    page.locator("#timeline svg.gantt rect.bar-action").first.wait_for()
    page.locator("#journal-list li", has_text="pause by static: the bank is down").wait_for()
    screenshot(page, "run-paused")

    page.click("#resume-run")

    page.locator("#run-status", has_text="waiting").wait_for()
    assert page.locator("#run-paused").count() == 0
    assert page.locator("#timeline svg.gantt rect.bar-action").count() == 2
    assert [a["kind"] for a in run_of(dev, run_id)["actions"]] == ["pause", "resume"]


def test_a_refused_action_shows_the_api_s_message(
    page: Any, stack: tuple[DevProcess, Path]
) -> None:
    dev, _ = stack
    run_id = trigger(dev, "ops.wait", {})
    settled(dev, run_id, "waiting")
    # The page does not hear of the change below (its stream never answers), as when the
    # pause lands between the stream's answer and the click: it still offers Pause.
    page.evaluate(
        """() => {
          const fetchFirst = window.fetch;
          window.fetch = (url, options) =>
            String(url).includes("/stream") ? new Promise(() => {}) : fetchFirst(url, options);
        }"""
    )
    open_run(page, run_id)
    page.wait_for_selector("#pause-run")
    # Someone else pauses the run first.
    requests.post(f"{dev.url}/api/runs/{run_id}/pause", json={}, headers=AUTH, timeout=10)

    page.click("#pause-run")

    page.locator("#action-error", has_text="already_paused").wait_for()


def test_redrive_a_failed_run(page: Any, stack: tuple[DevProcess, Path]) -> None:
    dev, root = stack
    marker = root / "bank-is-back"
    run_id = trigger(dev, "ops.flaky", {"marker": str(marker)})
    settled(dev, run_id, "failed")
    open_run(page, run_id)
    page.locator("#run-status", has_text="failed").wait_for()
    assert page.locator("#pause-run").count() == 0 and page.locator("#cancel-run").count() == 0
    marker.write_text("ok")

    page.fill("#redrive-retry-max", "2")
    page.click("#redrive-run")

    page.locator("#run-status", has_text="completed").wait_for()
    assert page.locator("#run-redrives").inner_text() == "1 time"
    page.locator("#timeline svg.gantt rect.bar-redriven").wait_for()
    run = run_of(dev, run_id)
    assert run["redriveCount"] == 1 and run["actions"][0]["detail"].get("retry", {}).get("max") == 2


def test_rerun_from_the_third_of_five_steps_lands_on_the_new_run(
    page: Any, stack: tuple[DevProcess, Path]
) -> None:
    dev, _ = stack
    original = trigger(dev, "ops.five", {"order": "o-1"})
    settled(dev, original, "completed")
    open_run(page, original)
    page.locator("#run-status", has_text="completed").wait_for()
    # Every top-level step of the ended run offers it.
    assert page.locator("#timeline .rerun-here").count() == 5

    page.locator('#timeline .rerun-here[data-step="s3"]').click()

    dialog = page.locator("#rerun-dialog")
    dialog.wait_for()
    assert '"order": "o-1"' in page.locator("#rerun-input").input_value()
    page.fill("#rerun-input", '{"order": "o-2"}')
    page.fill("#rerun-reason", "wrong order")
    screenshot(page, "rerun-dialog")
    page.click("#rerun-start")

    page.wait_for_function(
        "original => location.hash.startsWith('#/runs/') && !location.hash.endsWith(original)",
        arg=original,
    )
    page.locator("#run-status", has_text="completed").wait_for()
    new_id = page.evaluate("decodeURIComponent(location.hash.slice('#/runs/'.length))")
    assert new_id != original
    assert original in page.locator("#run-rerun-of").inner_text()
    assert "s3" in page.locator("#run-rerun-of").inner_text()
    # The copied steps sit at the new run's start; the rerun ones ran in it.
    page.locator("#timeline rect.bar-ok").nth(2).wait_for()
    assert page.locator("#timeline rect.bar-copied").count() == 2
    assert page.locator("#timeline rect.bar-ok").count() == 3
    screenshot(page, "rerun-new-run")
    rerun = run_of(dev, new_id)
    assert rerun["rerunOf"] == {"runId": original, "fromStep": "s3"}
    assert [r["saw"]["order"] for r in rerun["output"]] == ["o-1", "o-1", "o-2", "o-2", "o-2"]
    assert run_of(dev, original)["reruns"] == [new_id]
    page.locator("#run-rerun-of a").click()
    page.locator("#run-reruns a", has_text=new_id).wait_for()
