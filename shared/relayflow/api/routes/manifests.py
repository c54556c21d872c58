"""``POST /api/manifests`` and ``GET /api/manifests/{env}``."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import WithJsonSchema

from relayflow.api.auth import MANIFESTS_WRITE, RUNS_READ
from relayflow.api.backend import Backend
from relayflow.api.backend import raw_json_body as _raw_body
from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.models import (
    ManifestRegisteredView,
    ManifestView,
    RegisterManifestRequest,
    documented_body,
)
from relayflow.api.responses import BODY_ERRORS, READ_ERRORS, declare
from relayflow.protocol import ENVIRONMENTS

#: Validated by the events module (reference messages); the resolver documents the schema.
ManifestBody = Annotated[
    Any,
    WithJsonSchema(documented_body(RegisterManifestRequest)),
]


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The manifest routes over ``ctx``'s driver."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)

    @router.post(
        "/api/manifests",
        summary="Register an environment's manifest",
        description=(
            "Validates the manifest, stores it and makes it current for the environment. "
            "Registering the same content again is a no-op that answers the same versionId."
        ),
        tags=["manifests"],
        operation_id="registerManifest",
        security=[{"bearerAuth": [MANIFESTS_WRITE]}],
        responses=declare(200, ManifestRegisteredView, "the manifest is current", *BODY_ERRORS),
    )
    def register(body: Annotated[ManifestBody, Body()]) -> ManifestRegisteredView:
        return ManifestRegisteredView(version_id=backend.register_manifest(_raw_body(router)))

    @router.get(
        "/api/manifests/<environment>",
        summary="Get an environment's current manifest",
        tags=["manifests"],
        operation_id="getManifest",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, ManifestView, "the current manifest", *READ_ERRORS, 404),
    )
    def get_manifest(
        environment: Annotated[
            str,
            WithJsonSchema({"type": "string", "enum": list(ENVIRONMENTS)}),
            Path(description="production, preview or development"),
        ],
    ) -> ManifestView:
        if environment not in ENVIRONMENTS:
            raise ApiError(
                400,
                "invalid_environment",
                f"environment must be one of {', '.join(ENVIRONMENTS)}",
            )
        found = backend.get_manifest(environment)
        if found is None:
            raise ApiError(
                404,
                "not_found",
                f"no manifest is registered for {environment}",
                details={"environment": environment},
            )
        version_id, manifest = found
        return ManifestView(environment=environment, version_id=version_id, manifest=manifest)

    return router
