"""What ``relayflow dev`` prints at start about the hosted app."""

from __future__ import annotations

from relayflow.local.cli import banner
from relayflow.local.stack import AppInfo


def test_an_app_without_workflows_says_so() -> None:
    text = banner("http://127.0.0.1:1", "tok", "http://127.0.0.1:2", "development", AppInfo("x"))
    assert "  app          x: no workflows registered (declare them with @workflow(id=...)" in text


def test_an_app_with_workflows_counts_them() -> None:
    app = AppInfo("shop", workflow_ids=["a", "b"], filter_count=1, manifest_version="v9")
    text = banner("http://127.0.0.1:1", "tok", "http://127.0.0.1:2", "development", app)
    assert "  app          shop: 2 workflow(s), 1 event filter(s), manifest v9" in text
