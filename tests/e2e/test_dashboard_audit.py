"""The dashboard's Audit page in headless Chromium against ``relayflow dev``: the entries of
the stack's audit log (in its runs table on moto) newest first, filtered by kind and by
workflow, and paged."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
import test_dashboard
from browser import screenshot
from dev_process import DevProcess
from test_dashboard import UI_TIMEOUT_MS, dashboard_link, open_hash

from relayflow.adapters.aws.operations import DynamoDBAuditLog
from relayflow.clock import SystemClock
from relayflow.local.moto_server import DEFAULT_REGION
from relayflow.local.stack import LOCAL_SETTINGS
from relayflow.operations.ports import AuditEntry

pytestmark = pytest.mark.slow
# The browser and its tab, as the dashboard's other tests have them.
browser = test_dashboard.browser
page = test_dashboard.page


def stack_audit_log(dev: DevProcess) -> DynamoDBAuditLog:
    """The dev stack's audit log, reached through its moto server."""
    args = list(dev.process.args)
    endpoint = f"http://127.0.0.1:{args[args.index('--moto-port') + 1]}"
    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=DEFAULT_REGION
    )
    table = LOCAL_SETTINGS.require("table_name")
    return DynamoDBAuditLog(
        table,
        client_factory=lambda: session.client("dynamodb", endpoint_url=endpoint),
        clock=SystemClock(),
    )


@pytest.fixture(scope="module")
def recorded(dev_stack: DevProcess) -> list[AuditEntry]:
    """Sixty actions on two workflows over the last hour, newest last."""
    now = int(time.time() * 1000)
    kinds = ["pause", "resume", "cancel", "redrive", "rerun"]
    entries = [
        AuditEntry(
            id=f"ui-{n:02d}",
            kind=kinds[n % len(kinds)],  # type: ignore[arg-type]
            at=now - (60 - n) * 60_000,
            by="ops-token",
            environment="development",
            workflow_id="orders.fulfil" if n % 2 else "orders.label",
            run_id=f"run-ui-{n:02d}",
            reason=f"reason {n}",
            detail={"fromStep": "charge"} if kinds[n % len(kinds)] == "rerun" else {},
        )
        for n in range(60)
    ]
    audit = stack_audit_log(dev_stack)
    for entry in entries:
        audit.record(entry)
    return entries


def listed_ids(tab: Any) -> list[str]:
    rows = tab.locator("#audit-table tbody tr")
    return [str(rows.nth(i).get_attribute("data-entry-id")) for i in range(rows.count())]


def test_the_audit_page_lists_actions_newest_first_and_pages(
    page: Any, recorded: list[AuditEntry]
) -> None:
    page.locator("nav a[data-nav='audit']").click()
    page.wait_for_selector("#audit-table tbody tr")

    newest_first = [e.id for e in reversed(recorded)]
    assert page.locator("nav a[data-nav='audit']").get_attribute("aria-current") == "page"
    assert listed_ids(page) == newest_first[:50]
    first_row = page.locator("#audit-table tbody tr").first.inner_text()
    for shown in ("rerun", "orders.fulfil", "run-ui-59", "reason 59", "fromStep: charge"):
        assert shown in first_row
    screenshot(page, "audit")

    page.locator("#audit-list a[rel='next']").click()
    page.wait_for_selector("#audit-last-page")
    assert listed_ids(page) == newest_first[50:]


def test_the_audit_page_filters_by_kind_and_workflow(page: Any, recorded: list[AuditEntry]) -> None:
    open_hash(page, "#/audit")
    page.wait_for_selector("#audit-table tbody tr")
    page.select_option("#audit-kind", "rerun")
    page.fill("#audit-workflow", "orders.fulfil")
    page.locator("#audit-filters button[type='submit']").click()
    page.wait_for_function("location.hash.includes('kind=rerun')")
    page.wait_for_selector("#audit-table tbody tr")

    expected = [
        e.id for e in reversed(recorded) if e.kind == "rerun" and e.workflow_id == "orders.fulfil"
    ]
    page.wait_for_function(
        "n => document.querySelectorAll('#audit-table tbody tr').length === n", arg=len(expected)
    )
    assert listed_ids(page) == expected
    assert "fromStep: charge" in page.locator("#audit-table tbody tr").first.inner_text()

    page.select_option("#audit-kind", "bulk")
    page.locator("#audit-filters button[type='submit']").click()
    page.wait_for_selector("#audit-empty")
    assert "No action matches these filters." in page.locator("#audit-empty").inner_text()


def test_a_bad_cursor_offers_to_start_again(
    browser: Any, dev_stack: DevProcess, recorded: list[AuditEntry]
) -> None:
    # Its own tab: the refused request is logged to the console, which ``page`` forbids.
    tab = browser.new_page()
    try:
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.goto(dashboard_link(dev_stack))
        open_hash(tab, "#/audit?cursor=junk")
        tab.wait_for_selector("#audit-bad-cursor")
        assert "cursor" in tab.locator("#audit-bad-cursor").inner_text()
        tab.locator("#audit-bad-cursor a").click()
        tab.wait_for_selector("#audit-table tbody tr")
        assert listed_ids(tab)[0] == recorded[-1].id
    finally:
        tab.close()
