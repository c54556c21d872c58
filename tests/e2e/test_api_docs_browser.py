"""``/api/docs`` in headless Chromium: Swagger UI renders the operations from the API's own
files, with no request to another origin and no Content-Security-Policy violation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, screenshot

from relayflow.api.app import create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.local.http_adapter import LambdaHttpServer
from relayflow.testing import WorkflowTestEnv

UI_TIMEOUT_MS = 15_000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api_server() -> Iterator[tuple[LambdaHttpServer, dict[str, Any]]]:
    env = WorkflowTestEnv()
    app = create_app(env.driver, env.admin, auth=StaticTokenAuth(["docs-token"]))
    server = LambdaHttpServer(app.resolve, port=0)
    server.start()
    try:
        yield server, app.openapi_document()
    finally:
        server.stop()


def test_swagger_ui_lists_every_operation_from_the_apis_own_files(
    api_server: tuple[LambdaHttpServer, dict[str, Any]], tmp_path: Path
) -> None:
    server, document = api_server
    operations = sum(len(methods) for methods in document["paths"].values())
    requested: list[str] = []
    problems: list[str] = []
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.on("request", lambda request: requested.append(request.url))
        page.on(
            "console",
            lambda message: problems.append(message.text) if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(f"{server.url}/api/docs")
        page.wait_for_selector(".opblock", timeout=UI_TIMEOUT_MS)
        page.wait_for_function(
            f"document.querySelectorAll('.opblock').length >= {operations}",
            timeout=UI_TIMEOUT_MS,
        )
        rendered = page.locator(".opblock").count()
        title = page.locator(".info .title").inner_text()
        screenshot(page, "api-docs")
    assert rendered == operations
    assert title.startswith("relayflow API")
    assert problems == []
    foreign = [url for url in requested if not url.startswith(server.url)]
    assert foreign == [], "the docs page reached another origin"
    assert f"{server.url}/api/openapi.json" in requested
