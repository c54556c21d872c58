"""The dashboard's files and the manifest history routes it reads."""

from __future__ import annotations

import base64
import gzip
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from api_harness import PUBLISHER, READER, Api
from apigw import http_event

from relayflow.dashboard import CONTENT_SECURITY_POLICY, etag_matches, load_assets


@dataclass
class Page:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def fetch(api: Api, path: str, headers: dict[str, str] | None = None) -> Page:
    """GET ``path`` without a token, decoding a gzip answer the way a browser does."""
    raw = api.app.resolve(http_event("GET", path, headers=headers), api.context)
    data = base64.b64decode(raw["body"]) if raw.get("isBase64Encoded") else raw["body"].encode()
    names = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
    if names.get("content-encoding") == "gzip":
        data = gzip.decompress(data)
    return Page(int(raw["statusCode"]), names, data.decode())


def test_the_shell_is_public_html_with_the_policy_and_an_etag(api: Api) -> None:
    answer = fetch(api, "/")

    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert answer.headers["cache-control"] == "no-cache"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert re.fullmatch(r'"[0-9a-f]{20}"', answer.headers["etag"])
    digest = load_assets().digest
    assert f'src="dashboard/{digest}/app.js"' in answer.text


def test_the_policy_allows_only_this_origin_and_no_inline_script() -> None:
    directives = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY
    assert "http" not in CONTENT_SECURITY_POLICY


def test_an_unchanged_file_answers_304(api: Api) -> None:
    first = fetch(api, "/")
    again = fetch(api, "/", headers={"If-None-Match": first.headers["etag"]})
    weak = fetch(api, "/", headers={"If-None-Match": "W/" + first.headers["etag"]})
    other = fetch(api, "/", headers={"If-None-Match": '"something-else"'})

    assert again.status == 304 and again.text == ""
    assert again.headers["etag"] == first.headers["etag"]
    assert weak.status == 304
    assert other.status == 200


def test_files_under_the_current_digest_are_immutable(api: Api) -> None:
    bundle = load_assets()
    script = fetch(api, f"/dashboard/{bundle.digest}/app.js")
    older = fetch(api, "/dashboard/0123456789ab/app.js")
    style = fetch(api, f"/dashboard/{bundle.digest}/style.css")
    missing = fetch(api, f"/dashboard/{bundle.digest}/nothing.js")

    assert script.status == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "immutable" in script.headers["cache-control"]
    assert script.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert older.status == 200 and older.headers["cache-control"] == "no-cache"
    assert style.headers["content-type"].startswith("text/css")
    assert missing.status == 404 and missing.json()["error"] == "not_found"
    cached = fetch(
        api, f"/dashboard/{bundle.digest}/app.js", headers={"If-None-Match": script.headers["etag"]}
    )
    assert cached.status == 304
    zipped = fetch(api, f"/dashboard/{bundle.digest}/app.js", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.text == script.text


def test_every_shipped_file_is_served_and_no_page_loads_another_origin(api: Api) -> None:
    bundle = load_assets()
    static = resources.files("relayflow.dashboard").joinpath("static")
    names = sorted(entry.name for entry in static.iterdir() if entry.name != "index.html")
    assert sorted(bundle.files) == names
    for name, asset in bundle.files.items():
        assert fetch(api, f"/dashboard/{bundle.digest}/{name}").status == 200
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", asset.text), name
        if name.endswith(".js"):
            assert ".innerHTML" not in asset.text and "eval(" not in asset.text, name
    shell = bundle.shell.text
    assert "<script>" not in shell and " on" not in re.sub(
        r"<noscript>.*?</noscript>", "", shell, flags=re.S
    )


def test_the_dashboard_is_left_out_of_the_openapi_document(api: Api) -> None:
    paths = api.get("/api/openapi.json", token=None).body["paths"]

    assert "/" not in paths
    assert not any(p.startswith("/dashboard") for p in paths)


def test_if_none_match_lists_and_wildcards() -> None:
    assert etag_matches('"a", "b"', '"b"')
    assert etag_matches("*", '"b"')
    assert not etag_matches(None, '"b"')
    assert not etag_matches('"a"', '"b"')


def _register(api: Api, workflows: list[str]) -> str:
    manifest = {"schemaVersion": 1, "workflows": [{"id": w} for w in workflows], "eventFilters": []}
    answer = api.post(
        "/api/manifests", {"environment": "preview", "manifest": manifest}, token=PUBLISHER
    )
    assert answer.status == 200, answer.body
    return str(answer.body["versionId"])


def test_the_versions_of_a_manifest_are_listed_newest_first(api: Api) -> None:
    first = _register(api, ["api.echo"])
    second = _register(api, ["api.echo", "api.fails"])

    listing = api.get("/api/manifests/preview/versions", token=READER)

    assert listing.status == 200
    versions = listing.body["versions"]
    assert [v["versionId"] for v in versions] == [second, first]
    assert [v["current"] for v in versions] == [True, False]
    assert [v["workflows"] for v in versions] == [2, 1]
    older = api.get(f"/api/manifests/preview/versions/{first}", token=READER)
    assert older.status == 200
    assert [w["id"] for w in older.body["manifest"]["workflows"]] == ["api.echo"]


def test_manifest_history_refuses_unknown_environments_and_versions(api: Api) -> None:
    assert api.get("/api/manifests/staging/versions").status == 400
    assert api.get("/api/manifests/preview/versions").body["versions"] == []
    missing = api.get("/api/manifests/preview/versions/feedface")
    assert missing.status == 404 and missing.body["error"] == "not_found"
    assert api.get("/api/manifests/preview/versions", token=None).status == 401
