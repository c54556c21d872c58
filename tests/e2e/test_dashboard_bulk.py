"""The dashboard's bulk actions and workflow pause in headless Chromium against ``relayflow
dev``: a dry run's count then a bulk cancel by tag, the job page until the job ends, cancelling
a running job, pausing and resuming a workflow, and a refused (403) bulk action."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
import test_dashboard_operations
from browser import screenshot
from dev_process import DevProcess
from test_dashboard_operations import AUTH, UI_TIMEOUT_MS, settled, trigger

pytestmark = pytest.mark.slow
# The stack, browser and tab of the operations tests (one instance per module).
stack = test_dashboard_operations.stack
browser = test_dashboard_operations.browser
page = test_dashboard_operations.page


def tagged_waiting_runs(dev: DevProcess, tag: str, count: int) -> list[str]:
    """``count`` runs of ops.wait tagged ``tag``, each waiting for its signal."""
    run_ids = []
    for _ in range(count):
        answer = requests.post(
            f"{dev.url}/api/runs",
            json={"workflowId": "ops.wait", "input": {}, "tags": [tag]},
            headers=AUTH,
            timeout=30,
        )
        assert answer.status_code in (200, 201), answer.text
        run_ids.append(str(answer.json()["id"]))
    for run_id in run_ids:
        settled(dev, run_id, "waiting")
    return run_ids


def open_hash(tab: Any, fragment: str) -> None:
    tab.evaluate("fragment => { location.hash = fragment; }", fragment)


def jobs_with_tag(dev: DevProcess, tag: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{dev.url}/api/bulk-actions?limit=100", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    return [j for j in answer.json()["jobs"] if j["filter"].get("tag") == tag]


def test_a_bulk_cancel_by_tag_counts_then_runs_to_completion(
    page: Any, stack: tuple[DevProcess, Path]
) -> None:
    dev, _ = stack
    run_ids = tagged_waiting_runs(dev, "bulk-ui", 5)
    open_hash(page, "#/runs?tag=bulk-ui")
    page.wait_for_selector("#runs-table tbody tr")
    page.locator("#bulk-open").click()
    page.wait_for_function(
        "() => document.querySelector('#bulk-count').textContent === '5 runs match'"
    )
    page.fill("#bulk-reason", "customer asked")
    screenshot(page, "bulk-dialog")

    # A double click: the Idempotency-Key (and the request in flight) make it one job.
    page.locator("#bulk-start").dblclick()
    page.wait_for_function("() => location.hash.startsWith('#/bulk/')")
    page.wait_for_function(
        "() => document.querySelector('#bulk-job-status')?.textContent === 'completed'"
    )
    facts = {
        name: page.locator(f"#bulk-job-{name}").inner_text()
        for name in ("action", "matched", "done", "skipped", "failed", "reason")
    }
    assert facts == {
        "action": "cancel",
        "matched": "5",
        "done": "5",
        "skipped": "0",
        "failed": "0",
        "reason": "customer asked",
    }
    assert "tag: bulk-ui" in page.locator("#bulk-job-filter").inner_text()
    assert page.locator("#bulk-job-cancel").count() == 0
    screenshot(page, "bulk-job")
    for run_id in run_ids:
        settled(dev, run_id, "cancelled")
    (job,) = jobs_with_tag(dev, "bulk-ui")

    page.locator("nav a[data-nav='bulk']").click()
    page.wait_for_selector("#bulk-jobs-table tbody tr")
    assert (
        page.locator("#bulk-jobs-table tbody tr").first.get_attribute("data-job-id")
        == (job["jobId"])
    )


def test_a_bulk_rerun_names_its_step_before_it_counts(
    page: Any, stack: tuple[DevProcess, Path]
) -> None:
    dev, _ = stack
    originals = []
    for n in range(2):
        answer = requests.post(
            f"{dev.url}/api/runs",
            json={"workflowId": "ops.five", "input": {"n": n}, "tags": ["bulk-rerun"]},
            headers=AUTH,
            timeout=30,
        )
        assert answer.status_code in (200, 201), answer.text
        originals.append(str(answer.json()["id"]))
    for run_id in originals:
        settled(dev, run_id, "completed")
    open_hash(page, "#/runs?tag=bulk-rerun")
    page.wait_for_selector("#runs-table tbody tr")
    page.locator("#bulk-open").click()
    page.wait_for_function(
        "() => document.querySelector('#bulk-count').textContent === '2 runs match'"
    )
    assert not page.locator("#bulk-from-step").is_visible()
    page.select_option("#bulk-action", "rerun")
    page.wait_for_function(
        "() => document.querySelector('#bulk-count').textContent === 'Name the step to rerun from.'"
    )
    assert page.locator("#bulk-start").is_disabled()
    page.fill("#bulk-from-step", "s3")
    page.locator("#bulk-from-step").press("Tab")
    page.wait_for_function(
        "() => document.querySelector('#bulk-count').textContent === '2 runs match'"
    )
    page.locator("#bulk-start").click()
    page.wait_for_function(
        "() => document.querySelector('#bulk-job-status')?.textContent === 'completed'"
    )
    assert page.locator("#bulk-job-action").inner_text() == "rerun"
    assert page.locator("#bulk-job-done").inner_text() == "2"
    for run_id in originals:
        (rerun,) = settled(dev, run_id, "completed")["reruns"]
        assert settled(dev, rerun, "completed")["rerunOf"]["fromStep"] == "s3"


def test_cancel_a_running_bulk_job(page: Any, stack: tuple[DevProcess, Path]) -> None:
    dev, _ = stack
    tagged_waiting_runs(dev, "bulk-slow", 6)
    # One run a second at most, so the job is still running when the button is pressed.
    answer = requests.post(
        f"{dev.url}/api/bulk-actions",
        json={
            "action": "pause",
            "filter": {"tag": "bulk-slow"},
            "ratePerSecond": 0.5,
            "pageSize": 1,
        },
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["jobId"]
    open_hash(page, f"#/bulk/{job_id}")
    page.wait_for_selector("#bulk-job-cancel")
    assert page.locator("#bulk-job-status").inner_text() not in ("completed", "cancelled")
    page.locator("#bulk-job-cancel").click()
    page.wait_for_function(
        "() => document.querySelector('#bulk-job-status')?.textContent === 'cancelled'"
    )
    assert page.locator("#bulk-job-cancel").count() == 0
    done = int(page.locator("#bulk-job-done").inner_text())
    assert done < 6


def test_pause_then_resume_a_workflow(page: Any, stack: tuple[DevProcess, Path]) -> None:
    dev, _ = stack
    (earlier,) = tagged_waiting_runs(dev, "wf-pause", 1)
    open_hash(page, "#/runs?workflow=ops.wait&environment=development")
    page.wait_for_selector("#pause-workflow")
    page.locator("#pause-workflow").click()
    page.fill("#workflow-change-reason", "bank maintenance")
    page.locator("#workflow-change-submit").click()
    page.wait_for_selector("#workflow-paused-banner")
    banner = page.locator("#workflow-paused-banner").inner_text()
    assert "ops.wait is paused in development" in banner
    assert "bank maintenance" in banner
    pause_job = page.locator("#workflow-pause-job a").inner_text()
    settled(dev, earlier, "paused")
    later = trigger(dev, "ops.wait", {})
    settled(dev, later, "paused")
    page.wait_for_selector(f"#runs-table a[href='#/runs/{later}']")

    page.locator("#resume-workflow").click()
    page.fill("#workflow-change-rate", "50")
    page.locator("#workflow-change-submit").click()
    page.wait_for_selector("#pause-workflow")
    assert page.locator("#workflow-paused-banner").count() == 0
    resume_job = page.locator("#workflow-pause-job a").inner_text()
    assert resume_job != pause_job
    for run_id in (earlier, later):
        settled(dev, run_id, "waiting")
    page.locator("#workflow-pause-job a").click()
    page.wait_for_function(
        "() => document.querySelector('#bulk-job-status')?.textContent === 'completed'"
    )
    assert page.locator("#bulk-job-action").inner_text() == "resume"


def test_a_token_without_runs_admin_sees_the_api_s_message(
    browser: Any, stack: tuple[DevProcess, Path]
) -> None:
    dev, _ = stack
    # relayflow dev has one token with every scope, so the API's refusal of a token without
    # runs:admin is answered in its place, as the API words it.
    refused = {"error": "forbidden", "message": "this token lacks the 'runs:admin' scope"}

    def refuse_posts(route: Any) -> None:
        if route.request.method == "POST":
            route.fulfill(status=403, content_type="application/json", body=json.dumps(refused))
        else:
            route.continue_()

    # Its own tab: the refused request is logged to the console, which ``page`` forbids.
    tab = browser.new_page()
    try:
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.route("**/api/bulk-actions", refuse_posts)
        line = dev.wait_for_output(lambda text: text.strip().startswith("dashboard "), 5)
        tab.goto(line.split()[-1])
        open_hash(tab, "#/runs?tag=anything")
        tab.wait_for_selector("#bulk-open")
        tab.locator("#bulk-open").click()
        tab.wait_for_function("() => document.querySelector('#bulk-error').textContent !== ''")
        assert tab.locator("#bulk-error").inner_text() == (
            "this token lacks the 'runs:admin' scope (forbidden)"
        )
        assert tab.locator("#bulk-start").is_disabled()
    finally:
        tab.close()
