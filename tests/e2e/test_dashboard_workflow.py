"""The workflow page in headless Chromium against ``relayflow dev``: reached from a workflow's
name in the runs list and from the nav, it shows the runs that ended (success rate, duration),
an hourly chart, and the workflow's delayed and paused runs with links to them; at phone
width the figures stack.

Screenshots land in ``artifacts/dashboard/`` (git-ignored) as ``workflow-page.png`` and
``workflow-page-phone.png``.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from browser import chromium, screenshot
from dev_process import DevProcess, start_dev

TOKEN = "e2e-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
UI_TIMEOUT_MS = 15_000
WORKFLOW = "stats.pay"

pytestmark = pytest.mark.slow

FLOWS = """
from relayflow import workflow
from relayflow.errors import FatalError


@workflow(id="stats.pay")
async def pay(data, ctx):
    if data.get("hold"):
        await ctx.wait_for_signal("go")
    if data.get("fail"):
        raise FatalError("card declined", code="DECLINED")
    return await ctx.step("charge", lambda: {"charged": data.get("amount", 1)})
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    root = tmp_path_factory.mktemp("stats")
    (root / "stats_flows.py").write_text(textwrap.dedent(FLOWS))
    process = start_dev("--token", TOKEN, app="stats_flows", cwd=root, state_dir=root / "state")
    try:
        yield process
    finally:
        try:
            process.interrupt()
        finally:
            process.kill()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(
        tmp_path_factory.mktemp("chromium-profile"), viewport={"width": 1280, "height": 900}
    ) as context:
        yield context


def trigger(dev: DevProcess, payload: dict[str, Any], **options: Any) -> dict[str, Any]:
    answer = requests.post(
        f"{dev.url}/api/runs",
        json={"workflowId": WORKFLOW, "input": payload, **options},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code in (200, 201), answer.text
    run: dict[str, Any] = answer.json()
    return run


def settled(dev: DevProcess, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 20
    seen = None
    while time.monotonic() < deadline:
        answer = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10)
        seen = answer.json()["status"]
        if seen == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"{run_id} is {seen}, not {status}")


def test_the_workflow_page_shows_its_figures_chart_and_waiting_runs(
    dev: DevProcess, browser: Any
) -> None:
    ended = [trigger(dev, {"amount": n}) for n in (1, 2, 3)] + [trigger(dev, {"fail": True})]
    for run, status in zip(ended, ["completed"] * 3 + ["failed"], strict=True):
        settled(dev, run["id"], status)
    delayed = trigger(dev, {}, delay="1h")
    assert delayed["status"] == "delayed"
    held = trigger(dev, {"hold": True})
    settled(dev, held["id"], "waiting")
    paused = requests.post(
        f"{dev.url}/api/runs/{held['id']}/pause", json={}, headers=AUTH, timeout=10
    )
    assert paused.status_code == 200, paused.text

    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    # The workflows list first asks for production's manifest, which `relayflow dev` has not
    # (a 404 the page explains); any other failed request is a problem.
    page.on(
        "console",
        lambda m: problems.append(m.text) if m.type == "error" and "404" not in m.text else None,
    )
    page.set_default_timeout(UI_TIMEOUT_MS)
    line = dev.wait_for_output(lambda text: text.strip().startswith("dashboard "), 5)
    page.goto(line.split()[-1])
    page.wait_for_selector("#runs-list table")

    page.locator("#runs-table a.workflow-link", has_text=WORKFLOW).first.click()

    page.wait_for_selector("#stat-runs")
    assert page.locator("#workflow-id").inner_text() == WORKFLOW
    assert page.locator("#stats-environment").input_value() == "development"
    assert page.locator("#stat-runs .figure-value").inner_text() == "4"
    assert page.locator("#stat-success .figure-value").inner_text() == "75.0 %"
    assert "/" in page.locator("#stat-duration .figure-value").inner_text()
    bars = page.locator("#hourly-chart g.hour")
    assert bars.count() == 25, "every hour of the last 24, from the one holding its start"
    busy = page.locator("#hourly-chart g.hour[data-runs='4']")
    assert busy.count() == 1
    assert busy.locator("rect.bar-ok").count() == 1 and busy.locator("rect.bar-err").count() == 1
    assert "4 runs (3 completed, 1 failed)" in busy.locator("title").text_content()
    assert page.locator("#waiting-delayed h3").inner_text().endswith("1 delayed")
    assert page.locator("#waiting-paused h3").inner_text().endswith("1 paused")
    assert page.locator("#waiting-queued h3").inner_text().endswith("0 queued")
    screenshot(page, "workflow-page")

    page.locator("#waiting-paused a", has_text=held["id"]).click()
    page.wait_for_selector("#run-status")
    assert held["id"] in page.url

    page.locator("nav a[data-nav='workflows']").click()
    page.locator("#workflows-list", has_text="No manifest is registered in production").wait_for()
    page.locator("#workflows-environment").select_option("development")
    page.locator("#workflows-list a", has_text=WORKFLOW).click()
    page.wait_for_selector("#stat-runs")
    page.locator("#stats-range").select_option("1h")
    page.wait_for_function("() => location.hash.includes('range=1h')")
    page.wait_for_selector("#hourly-chart")
    assert page.locator("#hourly-chart g.hour").count() == 2

    page.set_viewport_size({"width": 390, "height": 844})
    boxes = [page.locator(f"#{name}").bounding_box() for name in ("stat-runs", "stat-success")]
    assert boxes[0] and boxes[1] and boxes[1]["y"] > boxes[0]["y"], "the figures stack"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "no sideways scroll"
    screenshot(page, "workflow-page-phone")
    page.close()
    assert not problems, problems
