"""The dashboard for people on call, in headless Chromium against ``relayflow dev``: a step
attempt's output or error on click, retried attempts drawn amber, child runs under their
parent, the runs list at phone width and the schedules page's last run.

Screenshots land in ``artifacts/dashboard/`` (git-ignored).
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
import test_dashboard
from browser import screenshot
from dev_process import DevProcess, start_dev
from test_dashboard import (
    AUTH,
    TOKEN,
    UI_TIMEOUT_MS,
    dashboard_link,
    open_hash,
    trigger,
    wait_until_waiting_on_event,
)

pytestmark = pytest.mark.slow
# The browser and its tab, as the dashboard's other tests have them.
browser = test_dashboard.browser
page = test_dashboard.page

PHONE = {"width": 375, "height": 800}


def wait_for_run(dev: DevProcess, run_id: str, done: Callable[[dict[str, Any]], bool]) -> Any:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10).json()
        if done(run):
            return run
        time.sleep(0.05)
    raise AssertionError(f"{run_id} never got there")


def send_shipment(dev: DevProcess, run_id: str, order_id: str) -> None:
    shipment = {"orderId": order_id, "carrier": "UPS", "trackingNumber": "1Z-" + order_id}
    answer = requests.post(
        f"{dev.url}/api/runs/{run_id}/events",
        json={"eventType": "shipment.created", "payload": shipment},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def shipped(dev_stack: DevProcess) -> dict[str, Any]:
    """An order whose card gateway failed twice before the charge went through, shipped:
    its label printed in a child run."""
    order = {"id": "o-oncall", "total": 42, "items": ["book"], "coolingOff": "50ms"}
    run_id = trigger(dev_stack, "orders.fulfil", {**order, "gatewayOutages": 2})["id"]
    wait_until_waiting_on_event(dev_stack, run_id)
    send_shipment(dev_stack, run_id, "o-oncall")
    run = wait_for_run(dev_stack, run_id, lambda r: r["status"] == "completed")
    assert len(run["children"]) == 1
    return dict(run)


def bar(page: Any, step: str, attempt: int) -> Any:
    return page.locator(f'#timeline rect[data-step="{step}"][data-attempt="{attempt}"]')


def test_a_retried_attempt_is_amber_and_only_the_final_failure_red(
    page: Any, dev_stack: DevProcess, shipped: dict[str, Any]
) -> None:
    open_hash(page, f"#/runs/{shipped['id']}")
    bar(page, "charge-card", 3).wait_for()
    # The gateway's two outages were retried: amber, no cross; the third attempt charged.
    assert [bar(page, "charge-card", n).get_attribute("class") for n in (1, 2, 3)] == [
        "bar-retrying selectable",
        "bar-retrying selectable",
        "bar-ok selectable",
    ]
    assert page.locator("#timeline .fail-mark").count() == 0
    amber = bar(page, "charge-card", 1).evaluate("el => getComputedStyle(el).fill")
    legend = page.locator(".legend i.retrying").evaluate(
        "el => getComputedStyle(el).backgroundColor"
    )
    assert amber == legend == "rgb(212, 167, 44)"
    screenshot(page, "run-retried-amber")

    # No "id": reserve_stock raises KeyError on each of its 3 attempts and fails the run.
    failed = trigger(dev_stack, "orders.fulfil", {"total": 5})["id"]
    wait_for_run(dev_stack, failed, lambda r: r["status"] == "failed")
    open_hash(page, f"#/runs/{failed}")
    bar(page, "reserve-stock", 3).wait_for()
    classes = [bar(page, "reserve-stock", n).get_attribute("class") for n in (1, 2, 3)]
    assert classes == ["bar-retrying selectable", "bar-retrying selectable", "bar-err selectable"]
    assert page.locator("#timeline .fail-mark").count() == 1
    screenshot(page, "run-failed-for-good")


def test_a_steps_output_and_error_open_from_its_bar_and_its_row(
    page: Any, shipped: dict[str, Any]
) -> None:
    open_hash(page, f"#/runs/{shipped['id']}")
    detail = page.locator("#step-detail")
    bar(page, "charge-card", 3).click()

    detail.locator(".step-value").wait_for()
    assert detail.locator("h2").inner_text() == "Step charge-card #3"
    assert detail.locator(".step-facts").inner_text().startswith("Attempt 3: returned, ")
    charged = {"chargeId": "ch-o-oncall", "amount": 42, "attempts": 3}
    assert json.loads(detail.locator(".step-value").inner_text()) == charged
    assert detail.locator(".step-value").inner_text() == json.dumps(charged, indent=2)
    screenshot(page, "step-detail-output")

    # A failed attempt from the keyboard: what it was given, its type, message and traceback.
    bar(page, "charge-card", 1).focus()
    page.keyboard.press("Enter")
    detail.locator("h2", has_text="Step charge-card #1").wait_for()
    assert detail.locator(".step-facts").inner_text().startswith("Attempt 1: failed, ")
    given = json.loads(detail.locator('pre[aria-label="Input"]').inner_text())
    assert given == [
        {
            "id": "o-oncall",
            "total": 42,
            "items": ["book"],
            "coolingOff": "50ms",
            "gatewayOutages": 2,
        }
    ]
    error = detail.locator(".error-panel")
    assert error.locator(".error-type").inner_text() == (
        "PaymentGatewayUnavailable: payment gateway unavailable (attempt 1)"
    )
    trace = error.locator("pre.traceback").inner_text()
    assert trace.startswith("Traceback (most recent call last):")
    assert "in charge_card" in trace
    screenshot(page, "step-detail-error")

    # The same from the timeline table's row.
    page.locator("#timeline details summary").click()
    page.get_by_role("button", name="reserve-stock #1").click()
    detail.locator("h2", has_text="Step reserve-stock #1").wait_for()
    reserved = json.loads(detail.locator(".step-value").inner_text())
    assert reserved == {"reservationId": "res-o-oncall", "items": ["book"]}
    detail.get_by_role("button", name="Close the step's detail").click()
    assert detail.is_hidden()


def _serve_large_step(page: Any, output: Any, truncated: bool) -> str:
    """A finished run whose step ``export`` returned ``output``; the timeline with values
    gives it, or leaves it out as over its cap (the history gives it whole)."""
    run_id = "run_large_" + ("capped" if truncated else "shown")
    start = int(time.time() * 1000) - 60_000
    entry = {
        "type": "step",
        "id": "export",
        "attempt": 1,
        "startedAt": start,
        "endedAt": start + 30,
        "outcome": "ok",
    }
    size = len(json.dumps(output))
    valued = {**entry, "valueSize": size, **({"valueTruncated": True} if truncated else {})}
    if not truncated:
        valued["value"] = output
    run = {
        "id": run_id,
        "workflowId": "reports.export",
        "status": "completed",
        "environment": "development",
        "output": None,
        "startedAt": start,
        "completedAt": start + 40,
        "durationMs": 40,
    }
    history = {"runId": run_id, "journal": {"stepResults": {"export": {"output": output}}}}

    def answer(route: Any) -> None:
        url = route.request.url
        if "/stream" in url:
            body: Any = {"runId": run_id, "status": "completed", "events": [], "next": 0}
            body["done"] = True
        elif "/timeline" in url:
            body = {"runId": run_id, "status": "completed"}
            body["entries"] = [valued if "values=true" in url else entry]
        elif url.endswith("/history"):
            body = history
        else:
            body = run
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(re.compile(rf".*/api/runs/{run_id}.*"), answer)
    return run_id


def test_a_large_value_is_cut_with_a_way_to_see_it_all(page: Any) -> None:
    rows = [{"row": n, "name": f"customer-{n}"} for n in range(200)]
    open_hash(page, "#/runs/" + _serve_large_step(page, rows, truncated=False))
    bar(page, "export", 1).click()
    value = page.locator("#step-detail .step-value")
    value.wait_for()
    whole = json.dumps(rows, indent=2)
    assert len(value.inner_text()) < len(whole) / 2
    page.get_by_role("button", name=re.compile(r"^Show all \(")).click()
    assert value.inner_text() == whole

    # Over the timeline's cap: read whole from the run's history on demand.
    open_hash(page, "#/runs/" + _serve_large_step(page, rows, truncated=True))
    bar(page, "export", 1).click()
    page.locator("#step-detail", has_text="Too large to show here.").wait_for()
    page.locator("#step-detail").get_by_role("button", name=re.compile(r"^Show all")).click()
    page.get_by_role("button", name=re.compile(r"^Show all \(.* characters\)")).click()
    assert page.locator("#step-detail .step-value").inner_text() == whole


def test_child_runs_sit_under_their_parent(page: Any, shipped: dict[str, Any]) -> None:
    child = shipped["children"][0]
    open_hash(page, "#/runs")
    parent_row = page.locator(f'#runs-table tr[data-run-id="{shipped["id"]}"]')
    parent_row.wait_for()
    child_row = page.locator(f'#runs-table tr[data-run-id="{child}"]')
    assert child_row.count() == 1 and child_row.is_hidden()
    expander = parent_row.get_by_role("button", name=f"Show the child runs of {shipped['id']}")
    assert expander.get_attribute("aria-expanded") == "false"

    expander.click()

    child_row.wait_for()
    assert expander.get_attribute("aria-expanded") == "true"
    assert "child-row" in (child_row.get_attribute("class") or "")
    assert "completed" in child_row.locator("td.run-status").inner_text()
    # Right under its parent, its link opening it.
    following = page.evaluate(
        "id => document.querySelector(`tr[data-run-id='${id}']`).nextElementSibling.dataset.runId",
        shipped["id"],
    )
    assert following == child
    screenshot(page, "runs-children-nested")
    child_row.get_by_role("link", name=child).click()
    page.wait_for_url(re.compile(re.escape(quote(child, safe="")) + "$"))
    page.locator("#run-status").get_by_text("completed").wait_for()


def test_the_runs_table_shows_every_status_at_phone_width(
    browser: Any, dev_stack: DevProcess, shipped: dict[str, Any]
) -> None:
    # A run waiting beside the shipped one (whose child is folded under it): two rows at least,
    # whichever of this module's tests ran on this stack before.
    trigger(dev_stack, "expenses.approve", {"id": "c-phone", "amount": 2500})
    tab = browser.new_page()
    try:
        tab.set_viewport_size(PHONE)
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.goto(dashboard_link(dev_stack))
        tab.wait_for_function(
            "() => document.querySelectorAll('#runs-table tbody tr:not([hidden])').length >= 2"
        )
        badges = tab.locator("#runs-table tbody tr:not([hidden]) td.run-status .badge")
        assert badges.count() >= 2
        for box in badges.evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); "
            "return {left: r.left, right: r.right, width: r.width}; })"
        ):
            assert box["width"] > 0 and box["left"] >= 0 and box["right"] <= PHONE["width"], box
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page scrolls sideways ({width}px)"
        screenshot(tab, "runs-phone")
    finally:
        tab.close()


SCHEDULED = """
from relayflow import Schedule, workflow


@workflow(id="reports.nightly", schedule=Schedule.cron("0 3 * * *", name="nightly"))
async def nightly(data, ctx):
    await ctx.sleep("300ms")
    return {"ok": True}
"""


def test_the_schedules_page_tells_trigger_now_and_shows_the_runs_real_status(
    browser: Any, tmp_path: Path
) -> None:
    (tmp_path / "nightly_flows.py").write_text(textwrap.dedent(SCHEDULED))
    dev = start_dev("--token", TOKEN, app="nightly_flows", cwd=tmp_path, state_dir=tmp_path / "s")
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.goto(dashboard_link(dev))
        tab.get_by_role("link", name="Schedules").click()
        card = tab.locator("article.schedule", has_text="nightly")
        card.wait_for()
        assert card.locator(".last-run").inner_text() == "none yet"

        card.get_by_role("button", name="Trigger nightly now").click()

        card.locator(".ok-text", has_text="started").wait_for()
        run_id = card.locator(".ok-text a").inner_text()
        # Followed until it ends: shown completed, not as running for ever.
        card.locator(".last-run .badge", has_text="completed").wait_for()
        last = card.locator(".last-run")
        assert run_id in last.inner_text()
        assert "triggered by hand" in last.locator(".last-run-how").inner_text()
        # A trigger now is no scheduled firing.
        assert card.locator(".last-fired").inner_text() == "never"
        run = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10).json()
        assert run["status"] == "completed" and run["triggeredBy"]["manual"] is True
        screenshot(tab, "schedules-last-run")
    finally:
        tab.close()
        try:
            dev.interrupt()
        finally:
            dev.kill()
    assert not problems, problems
