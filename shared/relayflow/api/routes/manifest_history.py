"""``GET /api/manifests/{env}/versions`` and ``.../versions/{versionId}``: retained versions."""

from __future__ import annotations

from typing import Annotated, Any, Protocol, runtime_checkable

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field, WithJsonSchema

from relayflow.api.auth import RUNS_READ
from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.model_bases import ResponseModel
from relayflow.api.models import ManifestView
from relayflow.api.responses import READ_ERRORS, declare
from relayflow.protocol import ENVIRONMENTS


@runtime_checkable
class VersionedManifests(Protocol):
    """A manifest store that keeps older versions (both relayflow stores do)."""

    def get_current(self, environment: str) -> dict[str, Any] | None: ...

    def get_version(self, environment: str, version_id: str) -> dict[str, Any] | None: ...

    def versions(self, environment: str) -> list[str]: ...


class ManifestVersionView(ResponseModel):
    """One retained version of an environment's manifest."""

    version_id: str
    current: bool
    built_at: Any = Field(default=None, description="the manifest's builtAt, when it has one")
    workflows: int = Field(description="how many workflows it declares")
    event_filters: int = Field(description="how many event filters it declares")


class ManifestVersionsView(ResponseModel):
    """The retained versions of an environment's manifest, newest first."""

    environment: str
    versions: list[ManifestVersionView]


EnvironmentPath = Annotated[
    str,
    WithJsonSchema({"type": "string", "enum": list(ENVIRONMENTS)}),
    Path(description="production, preview or development"),
]


def _count(manifest: dict[str, Any], key: str) -> int:
    items = manifest.get(key)
    return len(items) if isinstance(items, list) else 0


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The manifest history routes over ``ctx``'s driver's manifest store."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    def store(environment: str) -> VersionedManifests:
        if environment not in ENVIRONMENTS:
            raise ApiError(
                400, "invalid_environment", f"environment must be one of {', '.join(ENVIRONMENTS)}"
            )
        manifests = getattr(ctx.driver, "manifests", None)
        if not isinstance(manifests, VersionedManifests):
            raise ApiError(404, "not_found", "this deployment keeps no manifest history")
        return manifests

    @router.get(
        "/api/manifests/<environment>/versions",
        summary="List the retained versions of an environment's manifest",
        tags=["manifests"],
        operation_id="listManifestVersions",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, ManifestVersionsView, "newest first", *READ_ERRORS),
    )
    def list_versions(environment: EnvironmentPath) -> ManifestVersionsView:
        manifests = store(environment)
        current = manifests.get_current(environment)
        current_id = str(current.get("versionId", "")) if current else None
        out: list[ManifestVersionView] = []
        for version_id in manifests.versions(environment):
            body = manifests.get_version(environment, version_id)
            if body is None:
                continue  # pruned between the listing and the read
            out.append(
                ManifestVersionView(
                    version_id=version_id,
                    current=version_id == current_id,
                    built_at=body.get("builtAt"),
                    workflows=_count(body, "workflows"),
                    event_filters=_count(body, "eventFilters"),
                )
            )
        return ManifestVersionsView(environment=environment, versions=out)

    @router.get(
        "/api/manifests/<environment>/versions/<version_id>",
        summary="Get one retained version of an environment's manifest",
        tags=["manifests"],
        operation_id="getManifestVersion",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, ManifestView, "the manifest version", *READ_ERRORS, 404),
    )
    def get_version(
        environment: EnvironmentPath,
        version_id: Annotated[str, Path(description="the versionId")],
    ) -> ManifestView:
        body = store(environment).get_version(environment, version_id)
        if body is None:
            raise ApiError(
                404,
                "not_found",
                f"{environment} keeps no manifest version {version_id!r}",
                details={"environment": environment, "versionId": version_id},
            )
        return ManifestView(environment=environment, version_id=version_id, manifest=body)

    return router
