"""The dashboard in headless Chromium against ``relayflow dev``: every page, live updates,
actions on pending waits, cancel with compensation, the start form, paging and the schedules.

Screenshots land in ``artifacts/dashboard/`` (git-ignored); the render times of 500 runs and
of a 1,000-entry timeline are printed and saved there as ``render-times.txt``.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import requests
from browser import ARTIFACTS, chromium, screenshot
from dev_process import DevProcess, start_dev

TOKEN = "e2e-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHIPMENT = {"orderId": "o-ui", "carrier": "UPS", "trackingNumber": "1Z999"}
BULK_RUNS = 250
UI_TIMEOUT_MS = 15_000

pytestmark = pytest.mark.slow


def trigger(dev: DevProcess, workflow: str, payload: Any, **extra: Any) -> dict[str, Any]:
    answer = requests.post(
        f"{dev.url}/api/runs",
        json={"workflowId": workflow, "input": payload, **extra},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code in (200, 201), answer.text
    run: dict[str, Any] = answer.json()
    return run


def wait_until_waiting_on_event(dev: DevProcess, run_id: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10).json()
        if any(w["id"].startswith("event:") for w in run.get("pendingWaitpoints", [])):
            return
        time.sleep(0.05)
    raise AssertionError(f"{run_id} never waited for its event")


def order(order_id: str) -> dict[str, Any]:
    return {"id": order_id, "total": 42, "items": ["book"], "coolingOff": "50ms"}


@pytest.fixture(scope="module")
def bulk(dev_stack: DevProcess) -> Iterator[Future[list[str]]]:
    """Starts 250 short runs in the background while the other tests use the browser."""

    def create() -> list[str]:
        with ThreadPoolExecutor(max_workers=6) as pool:
            runs = pool.map(
                lambda i: trigger(
                    dev_stack,
                    "orders.label",
                    {"orderId": f"bulk-{i}", "carrier": "UPS", "trackingNumber": str(i)},
                    tags=["bulk"],
                ),
                range(BULK_RUNS),
            )
            return [r["id"] for r in runs]

    with ThreadPoolExecutor(max_workers=1) as starter:
        yield starter.submit(create)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(
        tmp_path_factory.mktemp("chromium-profile"), viewport={"width": 1280, "height": 900}
    ) as context:
        yield context


@pytest.fixture
def page(browser: Any, dev_stack: DevProcess) -> Iterator[Any]:
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    tab.on("dialog", lambda dialog: dialog.accept())
    tab.set_default_timeout(UI_TIMEOUT_MS)
    tab.goto(dashboard_link(dev_stack))
    tab.wait_for_selector("#runs-list table, #runs-empty")
    yield tab
    tab.close()
    assert not problems, problems


def dashboard_link(dev: DevProcess) -> str:
    line = dev.wait_for_output(lambda text: text.strip().startswith("dashboard "), 5)
    return line.split()[-1]


def open_hash(page: Any, fragment: str) -> None:
    page.evaluate("fragment => { location.hash = fragment; }", fragment)


def test_the_printed_link_signs_in_and_shows_the_runs(page: Any, dev_stack: DevProcess) -> None:
    link = dashboard_link(dev_stack)
    assert link == f"{dev_stack.url}/#token={TOKEN}"
    trigger(dev_stack, "media.thumbnails", {"gallery": "g-ui", "images": ["a.jpg"]})
    page.wait_for_selector("#runs-table tbody tr")
    # The token left the address for the tab's session storage.
    assert "token" not in page.url
    assert page.evaluate("sessionStorage.getItem('relayflow.token')") == TOKEN
    assert page.locator("#status-counts").inner_text().strip() != ""
    headers = requests.get(dev_stack.url + "/", timeout=10).headers
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    screenshot(page, "runs-list")


def test_a_waiting_run_completes_live_after_its_event_is_sent_from_the_page(
    page: Any, dev_stack: DevProcess
) -> None:
    run_id = trigger(dev_stack, "orders.fulfil", order("o-ui"))["id"]
    wait_until_waiting_on_event(dev_stack, run_id)
    open_hash(page, "#/runs/" + run_id)
    page.wait_for_selector("#pending-waits .action")
    page.evaluate("window.__sameDocument = true")
    assert "waiting" in page.locator("#run-status").inner_text()
    page.wait_for_selector("#timeline svg.gantt rect")
    screenshot(page, "run-waiting")

    action = page.locator("#pending-waits .action").first
    assert action.locator("input").first.input_value() == "shipment.created"
    action.locator("textarea").fill(json.dumps(SHIPMENT))
    action.get_by_role("button", name="Send event").click()

    page.locator("#run-status").get_by_text("completed").wait_for()
    assert page.evaluate("window.__sameDocument") is True  # no reload
    page.locator("#journal-list li", has_text="run completed").wait_for()
    page.locator("#journal-live", has_text="finished").wait_for()
    assert "label" in page.locator("section", has_text="Output").inner_text()
    screenshot(page, "run-completed")


def test_a_run_is_cancelled_with_compensation(page: Any, dev_stack: DevProcess) -> None:
    run_id = trigger(dev_stack, "orders.fulfil", order("o-cancel"))["id"]
    wait_until_waiting_on_event(dev_stack, run_id)
    open_hash(page, "#/runs/" + run_id)
    page.wait_for_selector("#cancel-compensate")
    page.fill("#cancel-reason", "customer changed their mind")

    page.click("#cancel-compensate")

    page.locator("#run-status").get_by_text("cancelled").wait_for()
    compensations = page.locator("section", has_text="Compensations").inner_text()
    assert "charge-card" in compensations and "reserve-stock" in compensations
    # The event the run waited for never came: its bar ends with the run, greyed.
    assert page.locator("#timeline rect.bar-abandoned").count() == 1
    screenshot(page, "run-compensated")


def test_a_run_started_from_the_form_opens(page: Any, dev_stack: DevProcess) -> None:
    open_hash(page, "#/start")
    page.wait_for_selector("#start-workflow")
    page.select_option("#start-workflow", "media.thumbnails")
    page.fill("#start-input", '{"gallery": "g-form", "images": [')
    assert "Not valid JSON" in page.inner_text("#input-check")
    page.click("#start-submit")
    assert "#/start" in page.url  # an invalid input is not sent
    page.fill("#start-input", json.dumps({"gallery": "g-form", "images": ["x.jpg"]}))
    page.fill("#start-key", "form-key-1")
    assert "Valid JSON" in page.inner_text("#input-check")
    screenshot(page, "start-run")

    page.click("#start-submit")

    page.wait_for_url(re.compile(r"#/runs/idem-media\.thumbnails-form-key-1$"))
    page.locator("#run-status").get_by_text("completed").wait_for()
    assert "form-key-1" in page.locator("dl.facts").inner_text()


def test_the_manifest_page_shows_workflows_and_readable_filters(page: Any) -> None:
    open_hash(page, "#/manifests")
    page.wait_for_selector("#manifest-workflows")

    workflows = page.inner_text("#manifest-workflows")
    for workflow in ("orders.fulfil", "media.thumbnails", "expenses.approve", "billing.invoice"):
        assert workflow in workflows
    assert page.inner_text("#manifest-filters .predicate") == (
        'data.amount ≥ 100 and data.currency = "EUR"'
    )
    assert "paymentId: data.id" in page.inner_text("#manifest-filters .mapper")
    assert page.locator("#manifest-versions li").count() >= 1
    screenshot(page, "manifests")


def test_paging_through_250_runs(page: Any, bulk: Future[list[str]]) -> None:
    created = set(bulk.result(timeout=120))
    assert len(created) == BULK_RUNS
    open_hash(page, "#/runs?tag=bulk&limit=50")
    seen: list[str] = []
    for number in range(1, 6):
        # The page before stays drawn until the next one arrives: wait for a run not seen yet.
        page.wait_for_function(
            "seen => { const a = document.querySelector('#runs-table tbody a');"
            " return a !== null && !seen.includes(a.textContent); }",
            arg=seen,
        )
        ids = page.locator("#runs-table tbody tr td:first-child a").all_inner_texts()
        assert len(ids) == 50, f"page {number} has {len(ids)} runs"
        seen += ids
        if number == 1:
            screenshot(page, "runs-paged")
        if number < 5:
            page.get_by_role("link", name="Older →").click()
    assert page.locator("#last-page").is_visible()
    assert set(seen) == created and len(seen) == BULK_RUNS
    # Back to a newer page.
    page.get_by_role("link", name="← Newer").click()
    page.wait_for_function(
        "first => document.querySelector('#runs-table tbody a')?.textContent === first",
        arg=seen[150],
    )


def test_a_narrow_window_keeps_the_run_page_readable(browser: Any, dev_stack: DevProcess) -> None:
    run_id = trigger(dev_stack, "expenses.approve", {"id": "c-narrow", "amount": 2500})["id"]
    tab = browser.new_page()
    try:
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.goto(dashboard_link(dev_stack))
        tab.evaluate("fragment => { location.hash = fragment; }", "#/runs/" + run_id)
        tab.wait_for_selector("#pending-waits .action")
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"the page scrolls sideways ({width}px)"
        # Keyboard: the token wait's buttons are reachable with Tab.
        labels = []
        for _ in range(60):
            tab.keyboard.press("Tab")
            labels.append(tab.evaluate("document.activeElement.textContent"))
            if "Complete token" in labels[-1]:
                break
        assert "Complete token" in labels[-1]
        screenshot(tab, "run-narrow")
    finally:
        tab.close()


def _runs(count: int) -> dict[str, Any]:
    statuses = ["completed", "waiting", "failed", "running", "cancelled"]
    base = int(time.time() * 1000)
    return {
        "runs": [
            {
                "id": f"run_render_{i:04d}",
                "workflowId": f"bench.flow{i % 7}",
                "status": statuses[i % 5],
                "environment": "development",
                "tags": ["bench"] if i % 3 == 0 else [],
                "startedAt": base - i * 1000,
                "completedAt": base - i * 1000 + 850 if i % 5 in (0, 2, 4) else None,
            }
            for i in range(count)
        ],
        "nextCursor": None,
    }


def _timeline(count: int, start: int) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    at = start
    step = 0
    while len(entries) < count:
        step += 1
        attempts = 3 if step % 10 == 0 else 1
        for attempt in range(1, attempts + 1):
            ok = attempt == attempts
            entries.append(
                {
                    "type": "step",
                    "id": f"step-{step}",
                    "attempt": attempt,
                    "startedAt": at,
                    "endedAt": at + 40,
                    "outcome": "ok" if ok else "retrying",
                    "error": None if ok else {"code": "FLAKY", "message": "try again"},
                }
            )
            at += 45
        if step % 5 == 0:
            entries.append(
                {
                    "type": "wait",
                    "id": f"sleep:{step}",
                    "kind": "DATETIME",
                    "startedAt": at,
                    "endedAt": at + 200,
                    "outcome": "resolved",
                    "source": "alarm",
                }
            )
            at += 200
    return entries[:count]


def _fulfil(route: Any, body: Any) -> None:
    route.fulfill(status=200, content_type="application/json", body=json.dumps(body))


def _last_measure(page: Any, name: str) -> float:
    return float(
        page.evaluate(
            "name => performance.getEntriesByName(name).at(-1).duration",
            name,
        )
    )


def _serve_finished_run(page: Any, run: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Answers the page's requests for ``run`` (finished) and its timeline ``entries``."""

    def answer(route: Any) -> None:
        url = route.request.url
        status = run["status"]
        if "/stream" in url:
            _fulfil(
                route, {"runId": run["id"], "status": status, "events": [], "next": 0, "done": True}
            )
        elif url.endswith("/timeline"):
            _fulfil(route, {"runId": run["id"], "status": status, "entries": entries})
        else:
            _fulfil(route, run)

    page.route(re.compile(rf".*/api/runs/{re.escape(run['id'])}.*"), answer)


def test_a_timed_out_attempt_shows_how_long_its_code_ran_on(page: Any) -> None:
    start = int(time.time() * 1000) - 60_000
    timeout = {"code": "TIMEOUT", "message": "step 'export' timed out after 1000ms"}
    entries = [
        {
            "type": "step",
            "id": "export",
            "attempt": 1,
            "startedAt": start,
            "endedAt": start + 1_000,
            "outcome": "err",
            "error": timeout,
            "abandonedEndedAt": start + 9_000,
            "abandonedOutcome": "returned",
        },
        {
            "type": "step",
            "id": "export",
            "attempt": 2,
            "startedAt": start + 9_000,
            "endedAt": start + 9_500,
            "outcome": "ok",
        },
    ]
    run = {
        "id": "run_overrun",
        "workflowId": "reports.export",
        "status": "completed",
        "environment": "development",
        "output": "exported",
        "startedAt": start,
        "completedAt": start + 9_600,
        "durationMs": 9_600,
    }
    _serve_finished_run(page, run, entries)
    open_hash(page, "#/runs/run_overrun")
    page.wait_for_selector("#timeline svg.gantt rect.bar-overrun")

    [tail] = page.locator("#timeline rect.bar-overrun").all()
    # Attempt 2 followed: the timed-out attempt was retried, drawn amber.
    given_up = page.locator("#timeline rect.bar-retrying").first
    assert float(tail.get_attribute("x") or 0) == pytest.approx(
        float(given_up.get_attribute("x") or 0) + float(given_up.get_attribute("width") or 0)
    )
    # The tail is eight times as long as the one-second attempt it follows.
    assert float(tail.get_attribute("width") or 0) == pytest.approx(
        8 * float(given_up.get_attribute("width") or 0), rel=0.01
    )
    assert "its code ran on 8.0 s more and returned" in (tail.locator("title").text_content() or "")
    assert "timed out, its code ran on" in page.locator(".legend").inner_text()
    screenshot(page, "run-overrun")


def test_render_times_of_500_runs_and_a_1000_entry_timeline(page: Any) -> None:
    """Prints the figures (no timed assertion): the API answers are served by the test."""
    page.route(re.compile(r".*/api/runs\?.*limit=500.*"), lambda route: _fulfil(route, _runs(500)))
    open_hash(page, "#/runs?tag=render&limit=500")
    page.wait_for_function("() => document.querySelectorAll('#runs-table tbody tr').length === 500")
    runs_ms = _last_measure(page, "runs-render")
    screenshot(page, "runs-500")

    start = int(time.time() * 1000) - 120_000
    entries = _timeline(1000, start)
    run = {
        "id": "run_render_timeline",
        "workflowId": "bench.long",
        "status": "completed",
        "environment": "development",
        "input": {"items": list(range(50))},
        "output": {"done": True},
        "startedAt": start,
        "completedAt": entries[-1]["endedAt"],
        "durationMs": entries[-1]["endedAt"] - start,
    }

    _serve_finished_run(page, run, entries)
    open_hash(page, "#/runs/run_render_timeline")
    page.wait_for_selector("#timeline svg.gantt")
    bars = page.locator("#timeline svg.gantt rect").count()
    assert bars == 1000
    timeline_ms = _last_measure(page, "timeline-render")
    screenshot(page, "timeline-1000")

    report = (
        f"dashboard render, headless Chromium: 500 runs {runs_ms:.1f} ms; "
        f"1,000-entry timeline (Gantt) {timeline_ms:.1f} ms\n"
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    Path(ARTIFACTS / "render-times.txt").write_text(report)
    print("\n" + report)


def test_the_start_form_checks_the_input_schema_of_the_manifest(
    page: Any, dev_stack: DevProcess
) -> None:
    schema = {
        "type": "object",
        "required": ["id", "total"],
        "properties": {"id": {"type": "string"}, "total": {"type": "number", "minimum": 0}},
    }
    manifest = {
        "schemaVersion": 1,
        "workflows": [{"id": "orders.fulfil", "inputSchema": schema}],
        "eventFilters": [],
    }
    answer = requests.post(
        f"{dev_stack.url}/api/manifests",
        json={"environment": "preview", "manifest": manifest},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    open_hash(page, "#/start?env=preview")
    page.wait_for_selector("#start-workflow")

    page.fill("#start-input", json.dumps({"id": 7, "total": -1}))

    check = page.inner_text("#input-check")
    assert "input.id should be string, not integer" in check
    assert "input.total should be ≥ 0" in check
    page.click("#start-submit")
    assert "#/start" in page.url
    page.fill("#start-input", json.dumps({"id": "o-schema", "total": 3}))
    assert "matches the input schema" in page.inner_text("#input-check")


SCHEDULED_FLOWS = """
from relayflow import Schedule, workflow


@workflow(
    id="reports.tick",
    schedule=[
        Schedule.cron("* * * * *", timezone="Europe/Berlin", name="minutely"),
        Schedule.every("10m", name="sweep", overlap="queue"),
    ],
)
async def tick(data, ctx):
    return {"ok": True}
"""


def _schedules(dev: DevProcess) -> dict[str, dict[str, Any]]:
    answer = requests.get(
        f"{dev.url}/api/schedules", params={"environment": "development"}, headers=AUTH, timeout=10
    )
    assert answer.status_code == 200, answer.text
    return {s["name"]: s for s in answer.json()["schedules"]}


def test_the_schedules_page_shows_next_fire_times_and_pauses_and_resumes(
    browser: Any, tmp_path: Path
) -> None:
    (tmp_path / "scheduled_flows.py").write_text(textwrap.dedent(SCHEDULED_FLOWS))
    dev = start_dev("--token", TOKEN, app="scheduled_flows", cwd=tmp_path, state_dir=tmp_path / "s")
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.goto(dashboard_link(dev))
        tab.get_by_role("link", name="Schedules").click()
        card = tab.locator("article.schedule", has_text="minutely")
        card.wait_for()
        assert tab.locator("article.schedule").count() == 2
        assert "cron * * * * *" in card.locator(".schedule-timing").inner_text()
        assert "Europe/Berlin" in card.inner_text() and "skip:" in card.inner_text()
        sweep = tab.locator("article.schedule", has_text="sweep")
        assert "every 10m" in sweep.inner_text() and "queue:" in sweep.inner_text()
        # Five fire times a minute apart, shown with relative times ("in 40 seconds").
        fires = card.locator(".next-fires time")
        assert fires.count() == 5
        times = [
            datetime.fromisoformat(t) for t in fires.evaluate_all("e => e.map(x => x.dateTime)")
        ]
        assert all((b - a).total_seconds() == 60 for a, b in pairwise(times))
        assert fires.first.inner_text().startswith("in ")
        assert card.locator(".schedule-state").inner_text() == "active"

        card.get_by_role("button", name="Pause minutely").click()

        card.locator(".schedule-state", has_text="paused").wait_for()
        assert _schedules(dev)["minutely"]["paused"] is True
        assert _schedules(dev)["sweep"]["paused"] is False
        assert card.locator(".next-fires").count() == 0  # a paused schedule fires at no time
        # The Resume button takes the focus: the keyboard carries on from where it was.
        assert tab.evaluate("document.activeElement.textContent") == "Resume"
        screenshot(tab, "schedules")

        tab.keyboard.press("Enter")

        card.locator(".schedule-state", has_text="active").wait_for()
        assert _schedules(dev)["minutely"]["paused"] is False
        assert card.locator(".next-fires time").count() == 5
        sweep.get_by_role("button", name="Trigger sweep now").click()
        sweep.locator(".ok-text", has_text="started").wait_for()
        assert sweep.locator(".ok-text a").inner_text().startswith("idem-reports.tick-sch_")
        tab.set_viewport_size({"width": 390, "height": 844})
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"the page scrolls sideways ({width}px)"
        screenshot(tab, "schedules-narrow")
        # An environment without schedules says how to declare one.
        tab.get_by_role("link", name="preview").click()
        empty = tab.locator("#schedules-empty")
        empty.wait_for()
        assert "Schedule.cron(" in empty.inner_text()
    finally:
        tab.close()
        try:
            dev.interrupt()
        finally:
            dev.kill()
    assert not problems, problems


def test_queued_and_delayed_runs_are_visible(page: Any) -> None:
    offered = page.locator("select[name=status] option").all_inner_texts()
    assert {"queued", "delayed"} <= set(offered)
    start = int(time.time() * 1000) - 5_000
    line = "queued (concurrency key acme: 5 of 5 in use)"
    run = {
        "id": "run_queued",
        "workflowId": "crm.sync",
        "status": "queued",
        "statusDetail": line,
        "environment": "development",
        "startedAt": start,
    }
    _serve_finished_run(page, run, [])
    open_hash(page, "#/runs/run_queued")
    page.wait_for_selector("#run-status-detail")

    assert page.locator("#run-status-detail").inner_text() == line
    badge = page.locator("#run-status .badge")
    assert badge.get_attribute("class") == "badge s-queued"
    held = page.evaluate(
        "() => getComputedStyle(document.querySelector('#run-status .badge')).color"
    )
    assert held == "rgb(138, 70, 0)", "queued runs have their own colour"
