"""Route of ``/api/versions``: the code versions live runs are on, per workflow."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api.auth import RUNS_READ
from relayflow.api.backend import Backend
from relayflow.api.context import ApiContext
from relayflow.api.models import Environment
from relayflow.api.responses import READ_ERRORS, declare
from relayflow.api.version_models import BuildRunsView, VersionsView
from relayflow.operations.versions import MAX_RUNS_READ, VersionsReport


def versions_view(report: VersionsReport) -> VersionsView:
    """The wire form of a report."""
    return VersionsView(
        versions=[
            BuildRunsView(
                workflow_id=count.key.workflow_id,
                environment=count.key.environment,
                build=count.key.build,
                function=count.key.function,
                runs=count.runs,
                waiting_for_version=count.waiting_for_version,
            )
            for count in report.versions
        ],
        runs_read=report.runs_read,
        truncated=report.truncated,
    )


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The versions route over ``ctx``'s admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)

    @router.get(
        "/api/versions",
        summary="The code versions live runs are on, per workflow",
        description=(
            "Counts the runs that have not ended (delayed, queued, paused, running, waiting) "
            "per workflow, environment, build and function, most runs first, with how many "
            "wait for their version to answer again. Reads at most "
            f"{MAX_RUNS_READ} live runs, newest first (truncated says when there are more). "
            "A build no live run is on can be retired."
        ),
        tags=["runs"],
        operation_id="listVersions",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, VersionsView, "the live runs per code version", *READ_ERRORS),
    )
    def list_versions(
        environment: Annotated[Environment | None, Query()] = None,
        workflow_id: Annotated[str | None, Query(alias="workflowId", min_length=1)] = None,
    ) -> VersionsView:
        return versions_view(backend.live_versions(environment, workflow_id))

    return router
