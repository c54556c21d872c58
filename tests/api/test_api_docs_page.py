"""``GET /api/docs``: Swagger UI from the API's own files, under a policy of its own."""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from importlib import resources

import pytest
from api_harness import Api
from apigw import http_event

from relayflow.api import swagger
from relayflow.dashboard import CONTENT_SECURITY_POLICY as DASHBOARD_POLICY


@dataclass
class Page:
    status: int
    headers: dict[str, str]
    text: str


def fetch(api: Api, path: str) -> Page:
    """GET ``path`` without a token, decoding a gzip answer the way a browser does."""
    raw = api.app.resolve(http_event("GET", path, headers={"accept-encoding": "gzip"}), api.context)
    data = base64.b64decode(raw["body"]) if raw.get("isBase64Encoded") else raw["body"].encode()
    names = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
    if names.get("content-encoding") == "gzip":
        data = gzip.decompress(data)
    return Page(int(raw["statusCode"]), names, data.decode())


class _PageParts(HTMLParser):
    """The inline scripts and the URLs a page loads."""

    def __init__(self) -> None:
        super().__init__()
        self.inline_scripts: list[str] = []
        self.urls: list[str] = []
        self._in_inline_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("src", "href"):
            url = found.get(name)
            if url and not url.startswith("data:"):  # inline data, nothing is fetched
                self.urls.append(url)
        self._in_inline_script = tag == "script" and "src" not in found
        if self._in_inline_script:
            self.inline_scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_inline_script = False

    def handle_data(self, data: str) -> None:
        if self._in_inline_script:
            self.inline_scripts[-1] += data


def _policy(header: str) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


def _parts(text: str) -> _PageParts:
    parts = _PageParts()
    parts.feed(text)
    return parts


def test_the_page_answers_without_a_token_with_its_policy(api: Api) -> None:
    page = fetch(api, "/api/docs")

    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = _policy(page.headers["content-security-policy"])
    assert policy["default-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert "unsafe" not in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert 'id="swagger-ui"' in page.text


def test_the_policy_allows_exactly_the_inline_script_of_the_page(api: Api) -> None:
    page = fetch(api, "/api/docs")
    (script,) = _parts(page.text).inline_scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()

    sources = _policy(page.headers["content-security-policy"])["script-src"].split()
    assert sources == ["'self'", f"'sha256-{digest}'"]


def test_every_file_the_page_loads_comes_from_the_api(api: Api) -> None:
    page = fetch(api, "/api/docs")
    urls = _parts(page.text).urls

    assert not re.search(r"https?://|//[a-z]", page.text)
    assert sorted(urls) == sorted(f"docs/{name}" for name in swagger.asset_names())
    shipped = resources.files(swagger.ASSET_PACKAGE)
    for url in urls:
        answer = fetch(api, f"/api/{url}")
        assert answer.status == 200, url
        assert answer.headers["x-content-type-options"] == "nosniff"
    js = fetch(api, "/api/docs/swagger-ui-bundle.js")
    assert js.headers["content-type"].startswith("text/javascript")
    assert js.text == shipped.joinpath("swagger-ui-bundle.min.js").read_text(encoding="utf-8")
    css = fetch(api, "/api/docs/swagger-ui.css")
    assert css.headers["content-type"].startswith("text/css")
    assert css.text == shipped.joinpath("swagger-ui.min.css").read_text(encoding="utf-8")


def test_the_document_the_page_reads_is_public_like_the_page(api: Api) -> None:
    assert api.get("/api/openapi.json", token=None).status == 200
    assert fetch(api, "/api/docs").status == 200
    assert api.get("/api/runs", token=None).status == 401


@pytest.mark.parametrize("name", ["app.js", "swagger-ui.min.css", "..%2Fsecrets"])
def test_an_unknown_file_answers_404(api: Api, name: str) -> None:
    answer = api.get(f"/api/docs/{name}", token=None)
    assert (answer.status, answer.error) == (404, "not_found")


def test_the_docs_are_left_out_of_the_openapi_document(api: Api) -> None:
    paths = api.get("/api/openapi.json").body["paths"]
    assert not [path for path in paths if path.startswith("/api/docs")]


def test_the_dashboard_keeps_its_own_stricter_policy(api: Api) -> None:
    shell = fetch(api, "/")
    assert shell.headers["content-security-policy"] == DASHBOARD_POLICY
    assert "sha256" not in DASHBOARD_POLICY
    assert swagger.SCRIPT_HASH not in shell.headers["content-security-policy"]
