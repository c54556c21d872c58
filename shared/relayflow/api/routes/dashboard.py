"""The web dashboard's files: ``GET /`` (the page shell) and ``GET /dashboard/{digest}/{file}``.

Both are public: they hold no run data, and the pages call the API with the bearer token the
person gave them. Every answer carries the dashboard's Content-Security-Policy and an ETag;
``If-None-Match`` with the current ETag answers 304.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api.errors import ApiError
from relayflow.dashboard import CONTENT_SECURITY_POLICY, Asset, etag_matches, load_assets

#: The shell is small and names the assets' digest: always revalidated.
SHELL_CACHE = "no-cache"
#: Files under the current digest never change.
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
#: Files asked for under an older digest get today's content, revalidated each time.
STALE_CACHE = "no-cache"


def _security_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


def build_router() -> APIGatewayHttpRouter:
    """The dashboard routes (static files from the package)."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    def answer(asset: Asset, cache_control: str) -> Response[str]:
        headers = {**_security_headers(), "Cache-Control": cache_control, "ETag": asset.etag}
        if etag_matches(router.current_event.headers.get("if-none-match"), asset.etag):
            return Response(status_code=304, headers=headers, body="")
        return Response(
            status_code=200, content_type=asset.content_type, headers=headers, body=asset.text
        )

    @router.get("/", include_in_schema=False, security=[], compress=True)
    def shell() -> Response[str]:
        return answer(load_assets().shell, SHELL_CACHE)

    @router.get("/dashboard/<digest>/<name>", include_in_schema=False, security=[], compress=True)
    def asset(digest: str, name: str) -> Response[str]:
        bundle = load_assets()
        found = bundle.get(name)
        if found is None:
            raise ApiError(404, "not_found", f"the dashboard has no file {name!r}")
        return answer(found, IMMUTABLE_CACHE if digest == bundle.digest else STALE_CACHE)

    return router
