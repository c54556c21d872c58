"""``GET /api/healthz`` and ``GET /api/openapi.json`` (both public)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api.context import ApiContext
from relayflow.api.models import HealthView
from relayflow.api.responses import declare


def build_router(ctx: ApiContext, openapi: Callable[[], dict[str, Any]]) -> APIGatewayHttpRouter:
    """The health and OpenAPI routes; ``openapi`` returns the document."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    @router.get(
        "/api/healthz",
        summary="Liveness check",
        tags=["health"],
        operation_id="healthz",
        security=[],
        responses=declare(200, HealthView, "the API answers", 500),
    )
    def healthz() -> HealthView:
        return HealthView(version=ctx.version)

    @router.get(
        "/api/openapi.json",
        summary="This API's OpenAPI 3.1 document",
        tags=["health"],
        operation_id="openapi",
        security=[],
        responses=declare(200, dict[str, Any], "the OpenAPI document", 500),
    )
    def openapi_document() -> dict[str, Any]:
        return openapi()

    return router
