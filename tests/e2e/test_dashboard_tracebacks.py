"""The dashboard in headless Chromium against ``relayflow dev``: a failed step attempt's panel
shows the exception type and its traceback in a <pre>, as text, under the same CSP."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import test_dashboard
from browser import screenshot
from dev_process import ROOT, DevProcess
from test_dashboard import AUTH, _serve_finished_run, open_hash, trigger

pytestmark = pytest.mark.slow
# The browser and its tab, as the dashboard's other tests have them.
browser = test_dashboard.browser
page = test_dashboard.page

#: Where the screenshot of the traceback panel is saved (outside the checkout).
SHOTS = Path(os.environ.get("RELAYFLOW_SHOTS", "/work/shots"))
ORDER_SAGA = str(ROOT / "examples" / "order_saga.py")


def wait_until_failed(dev: DevProcess, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run: dict[str, Any] = requests.get(
            f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10
        ).json()
        if run["status"] == "failed":
            return run
        time.sleep(0.05)
    raise AssertionError(f"{run_id} never failed")


def test_a_failed_step_shows_its_type_and_traceback(page: Any, dev_stack: DevProcess) -> None:
    # No "id": reserve_stock's message reads order["id"] and raises KeyError('id').
    run = trigger(dev_stack, "orders.fulfil", {"total": 5})
    failed = wait_until_failed(dev_stack, run["id"])
    assert failed["error"]["name"] == "KeyError"

    open_hash(page, f"#/runs/{run['id']}")
    panel = page.locator("#failed-attempts .attempt-failure").first
    panel.locator("pre.traceback").wait_for()
    summary = panel.locator("summary").inner_text()
    assert "reserve-stock #1" in summary and "KeyError: 'id'" in summary
    text = panel.locator("pre.traceback").inner_text()
    assert text.startswith("Traceback (most recent call last):")
    assert f'File "{ORDER_SAGA}", line 30, in reserve_stock' in text
    assert text.rstrip().endswith("KeyError: 'id'")
    assert "site-packages" not in text and "relayflow/" not in text
    error_panel = page.locator(".error-panel")
    assert error_panel.locator(".error-type").inner_text() == "KeyError: 'id'"
    assert error_panel.locator("pre.traceback").inner_text() == text

    SHOTS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(SHOTS / "dashboard-traceback.png"))
    screenshot(page, "run-failed-traceback")
    # orders.fulfil retries a step 3 times: the dev log prints each failed attempt once.
    logged = [line[10:] for line in dev_stack.lines if f"{run['id']}  step " in line]
    assert logged == [
        f"{run['id']}  step reserve-stock attempt {n} failed: KeyError: 'id'" for n in (1, 2, 3)
    ]


def test_a_traceback_is_shown_as_text(page: Any) -> None:
    start = int(time.time() * 1000) - 60_000
    hostile = '<img src=x onerror="window.pwned=1">'
    error = {
        "code": "UNKNOWN",
        "message": hostile,
        "name": "ValueError",
        "stack": f'Traceback (most recent call last):\n  File "/app/x.py", line 1, in f\n'
        f"ValueError: {hostile}\n",
    }
    entries = [
        {
            "type": "step",
            "id": "parse",
            "attempt": 1,
            "startedAt": start,
            "endedAt": start + 10,
            "outcome": "err",
            "error": error,
        },
        {
            "type": "step",
            "id": "parse",
            "attempt": 2,
            "startedAt": start + 20,
            "endedAt": start + 30,
            "outcome": "ok",
        },
    ]
    run = {
        "id": "run_hostile",
        "workflowId": "docs.parse",
        "status": "completed",
        "environment": "development",
        "output": "parsed",
        "startedAt": start,
        "completedAt": start + 40,
        "durationMs": 40,
    }
    _serve_finished_run(page, run, entries)
    open_hash(page, "#/runs/run_hostile")
    pre = page.locator("#failed-attempts pre.traceback")
    pre.wait_for()

    assert pre.inner_text().rstrip().endswith(f"ValueError: {hostile}")
    assert pre.evaluate("el => el.children.length") == 0
    assert page.locator("#failed-attempts img").count() == 0
    assert page.evaluate("window.pwned") is None
