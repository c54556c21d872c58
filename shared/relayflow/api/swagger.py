"""The interactive API docs: Swagger UI over the API's own OpenAPI document.

The page loads Swagger UI's script and stylesheet from the API itself: the files come from the
swagger-ui build that ``aws-lambda-powertools`` ships in its package, so nothing is fetched
from another origin. The page's one inline script is allowed by its hash in the page's own
Content-Security-Policy (computed here, from the script, at import).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

#: Where the page is served; its assets are under ``DOCS_PATH + "/"``.
DOCS_PATH = "/api/docs"
#: The package whose data files hold the swagger-ui build.
ASSET_PACKAGE = "aws_lambda_powertools.event_handler.openapi.swagger_ui"

#: Starts Swagger UI on the document the API serves next to the page (relative URLs, so the
#: page works under any path prefix).
INLINE_SCRIPT = """
window.ui = SwaggerUIBundle({
  url: "openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout"
});
"""
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(INLINE_SCRIPT.encode()).digest()).decode()

#: Served name → (file in :data:`ASSET_PACKAGE`, content type).
_ASSET_FILES = {
    "swagger-ui-bundle.js": ("swagger-ui-bundle.min.js", "text/javascript; charset=utf-8"),
    "swagger-ui.css": ("swagger-ui.min.css", "text/css; charset=utf-8"),
}

PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>relayflow API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script>{INLINE_SCRIPT}</script>
</body>
</html>
"""

#: The docs page's policy: its own files, its one inline script, the API as the only place
#: it connects to. Swagger UI's stylesheet draws its icons from ``data:`` images.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        f"script-src 'self' '{SCRIPT_HASH}'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)


@dataclass(frozen=True)
class Asset:
    """One file of Swagger UI as the API serves it."""

    name: str
    content_type: str
    body: str


@functools.cache
def load_asset(name: str) -> Asset | None:
    """The Swagger UI file served as ``name``, or None when there is no such file."""
    found = _ASSET_FILES.get(name)
    if found is None:
        return None
    file_name, content_type = found
    body = resources.files(ASSET_PACKAGE).joinpath(file_name).read_text(encoding="utf-8")
    return Asset(name=name, content_type=content_type, body=body)


def asset_names() -> list[str]:
    """The names of the files the page loads."""
    return list(_ASSET_FILES)
