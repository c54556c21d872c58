"""The dashboard in headless Chromium against ``relayflow dev``: a run's page shows its trace
id, linked to the trace viewer ``RELAYFLOW_TRACE_VIEWER_URL`` names, and as plain text
when none is named."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import test_dashboard
from browser import screenshot
from dev_process import DevProcess, start_dev
from test_dashboard import AUTH, _serve_finished_run, open_hash

pytestmark = pytest.mark.slow
browser = test_dashboard.browser
page = test_dashboard.page

VIEWER = "https://traces.example/trace/{traceId}"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def dev_stack() -> Iterator[DevProcess]:
    dev = start_dev("--token", "e2e-token", environment={"RELAYFLOW_TRACE_VIEWER_URL": VIEWER})
    try:
        yield dev
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()


def test_the_run_page_links_the_runs_trace_to_the_viewer(page: Any, dev_stack: DevProcess) -> None:
    started = requests.post(
        f"{dev_stack.url}/api/runs",
        json={
            "workflowId": "media.thumbnails",
            "input": {"gallery": "g-tr", "images": ["a.jpg", "b.png"]},
        },
        headers={**AUTH, "traceparent": f"00-{CALLER_TRACE}-b7ad6b7169203331-01"},
        timeout=30,
    )
    assert started.status_code == 201, started.text
    run = started.json()
    assert run["traceId"] == CALLER_TRACE

    open_hash(page, f"#/runs/{run['id']}")
    link = page.locator(f"dl.facts a[data-trace='{CALLER_TRACE}']")
    link.wait_for()
    assert link.inner_text() == CALLER_TRACE
    assert link.get_attribute("href") == f"https://traces.example/trace/{CALLER_TRACE}"
    assert link.get_attribute("target") == "_blank"
    screenshot(page, "run-trace-link")


def test_without_a_viewer_the_trace_id_is_shown_as_text(page: Any) -> None:
    start = int(time.time() * 1000) - 60_000
    run = {
        "id": "run_traced_plain",
        "workflowId": "orders.fulfil",
        "status": "completed",
        "environment": "development",
        "startedAt": start,
        "completedAt": start + 500,
        "durationMs": 500,
        "traceId": CALLER_TRACE,
    }
    _serve_finished_run(page, run, [])
    open_hash(page, f"#/runs/{run['id']}")
    shown = page.locator(f"dl.facts [data-trace='{CALLER_TRACE}']")
    shown.wait_for()
    assert shown.evaluate("node => node.tagName") == "SPAN"
    assert shown.inner_text() == CALLER_TRACE
