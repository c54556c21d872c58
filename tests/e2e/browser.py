"""Headless Chromium for the dashboard tests: Playwright's client driving the system browser.

The browser comes from the machine (Debian's ``chromium``; ``make browser`` installs it, and
``make test`` runs that first). Playwright's own browser downloads are never used. When no
browser is found the tests fail with one line saying how to install it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Screenshots and render figures of the dashboard tests (git-ignored).
ARTIFACTS = ROOT / "artifacts" / "dashboard"
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "headless Chromium is needed for the dashboard tests: run `make browser` "
    "(apt-get install -y chromium) or set RELAYFLOW_CHROMIUM to a Chromium binary"
)
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium_path() -> str:
    """The system Chromium's path; fails the test (one line) when there is none."""
    configured = os.environ.get("RELAYFLOW_CHROMIUM")
    if configured:
        if Path(configured).is_file():
            return configured
        pytest.fail(f"RELAYFLOW_CHROMIUM={configured} does not exist; {INSTALL_HINT}", False)
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(INSTALL_HINT, pytrace=False)


@contextmanager
def chromium(profile: Path, **context: Any) -> Iterator[Any]:
    """A headless Chromium context on a fresh profile directory."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: run `make` (pip install -e '.[dev]')", pytrace=False)
    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            **context,
        )
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot as ``artifacts/dashboard/<name>.png``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
