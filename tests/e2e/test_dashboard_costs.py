"""The dashboard's run page in headless Chromium against ``relayflow dev``: a run shows what
it cost, its total and parts as the run detail gives them, and the AWS usage behind them."""

from __future__ import annotations

from typing import Any

import pytest
import test_dashboard
from browser import screenshot
from dev_process import DevProcess
from test_dashboard import open_hash, trigger
from test_dashboard_tracebacks import wait_until_failed

pytestmark = pytest.mark.slow
browser = test_dashboard.browser
page = test_dashboard.page


def test_the_run_page_shows_the_runs_cost_and_usage(page: Any, dev_stack: DevProcess) -> None:
    # No "id": the run fails at its first step after retries, which cost something too.
    run = trigger(dev_stack, "orders.fulfil", {"total": 5})
    ended = wait_until_failed(dev_stack, run["id"])
    cost, usage = ended["cost"], ended["usage"]
    assert cost["total"] > 0 and usage["dynamodbRequests"] > 0

    open_hash(page, f"#/runs/{run['id']}")
    shown = page.locator("#run-cost")
    shown.wait_for()
    text = shown.inner_text()
    assert text.startswith(f"${cost['total']:.6f}")
    assert f"dynamodb ${cost['parts']['dynamodb']:.6f}" in text
    page.locator("#run-usage summary").click()
    listed = page.locator("#run-usage li").all_inner_texts()
    assert f"{usage['dynamodbRequests']:,} DynamoDB requests" in listed
    screenshot(page, "run-cost")
