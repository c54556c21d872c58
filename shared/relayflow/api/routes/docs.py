"""``GET /api/docs`` (Swagger UI over the OpenAPI document) and its files.

Public, like ``GET /api/openapi.json`` which the page reads: neither holds run data, and the
page calls the API with the token the person enters under "Authorize".
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api.errors import ApiError
from relayflow.api.swagger import CONTENT_SECURITY_POLICY, DOCS_PATH, PAGE, load_asset

#: The page names no version of its files: always revalidated.
PAGE_CACHE = "no-cache"
#: The files change only with the installed Powertools release.
ASSET_CACHE = "public, max-age=3600"


def _headers(cache_control: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": cache_control,
    }


def build_router() -> APIGatewayHttpRouter:
    """The docs page and the Swagger UI files it loads."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    @router.get(DOCS_PATH, include_in_schema=False, security=[], compress=True)
    def page() -> Response[str]:
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            headers=_headers(PAGE_CACHE),
            body=PAGE,
        )

    @router.get(f"{DOCS_PATH}/<name>", include_in_schema=False, security=[], compress=True)
    def asset(name: str) -> Response[str]:
        found = load_asset(name)
        if found is None:
            raise ApiError(404, "not_found", f"the API docs have no file {name!r}")
        return Response(
            status_code=200,
            content_type=found.content_type,
            headers=_headers(ASSET_CACHE),
            body=found.body,
        )

    return router
