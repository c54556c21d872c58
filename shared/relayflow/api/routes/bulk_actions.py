"""Routes of ``/api/bulk-actions``: start a bulk job (or count its matches), list jobs, read
one job's progress, cancel a job. Every route needs the ``runs:admin`` scope."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

import pydantic
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api import idempotency
from relayflow.api.auth import RUNS_ADMIN, caller_name
from relayflow.api.bulk_action_models import (
    BulkActionRequest,
    BulkCancelRequest,
    BulkDryRunView,
    BulkJobListView,
    BulkJobView,
    bulk_job_view,
)
from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.responses import BODY_ERRORS, READ_ERRORS, declare, json_content
from relayflow.core.cursors import RUN_CURSOR_PATTERN
from relayflow.operations.bulk import BulkJobs
from relayflow.operations.bulk_models import BulkJobInput

_ADMIN = [{"bearerAuth": [RUNS_ADMIN]}]
JobId = Annotated[str, Path(description="the bulk job's id (its run id)")]


def _problem(exc: pydantic.ValidationError) -> str:
    """The first problem of a refused job, in words."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The bulk-action routes over ``ctx``'s admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    jobs = BulkJobs(ctx.admin)

    def job_input(body: BulkActionRequest) -> BulkJobInput:
        try:
            return body.to_job(caller_name())
        except pydantic.ValidationError as exc:
            raise ApiError(400, "invalid_body", _problem(exc)) from None
        except ApiError as exc:  # a since/until that names no time
            raise ApiError(400, "invalid_body", exc.message) from None

    @router.post(
        "/api/bulk-actions",
        summary="Act on every run a filter matches (or count them with dryRun)",
        description=(
            "Starts a bulk job: a run of the built-in workflow relayflow.bulk-action that "
            "pages through the matches and applies the action (cancel, pause, resume, "
            "redrive, rerun, upgrade) to each, with the job's id as every action's id. "
            "dryRun: true answers 200 with the number of runs the filter matches now and "
            "changes nothing. "
            "An Idempotency-Key header makes the request retry-safe: the same key never "
            "starts two jobs."
        ),
        tags=["bulk actions"],
        operation_id="startBulkAction",
        security=_ADMIN,
        status_code=201,
        responses={
            **declare(201, BulkJobView, "the job was started", *BODY_ERRORS),
            200: {
                "description": "a dry run's count, or the job this Idempotency-Key already started",
                "content": json_content(BulkJobView | BulkDryRunView),
            },
        },
    )
    def start_bulk_action(
        body: Annotated[BulkActionRequest, Body()],
    ) -> Response[BulkJobView | BulkDryRunView]:
        job = job_input(body)
        if body.dry_run:
            counted = BulkDryRunView(matched=jobs.count(job.filter))
            return Response(200, content_types.APPLICATION_JSON, counted)
        key = idempotency.header_key(router.current_event.headers)
        started, created = jobs.start(job, key=key)
        return Response(
            status_code=201 if created else 200,
            content_type=content_types.APPLICATION_JSON,
            body=bulk_job_view(started),
        )

    @router.get(
        "/api/bulk-actions",
        summary="List bulk jobs, newest first",
        tags=["bulk actions"],
        operation_id="listBulkActions",
        security=_ADMIN,
        responses=declare(200, BulkJobListView, "one page of jobs", *READ_ERRORS),
    )
    def list_bulk_actions(
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: Annotated[
            str | None,
            Query(pattern=RUN_CURSOR_PATTERN, description="the nextCursor of the previous page"),
        ] = None,
    ) -> BulkJobListView:
        found, next_cursor = jobs.list(limit=limit, cursor=cursor)
        return BulkJobListView(jobs=[bulk_job_view(j) for j in found], next_cursor=next_cursor)

    @router.get(
        "/api/bulk-actions/<job_id>",
        summary="A bulk job and its progress",
        tags=["bulk actions"],
        operation_id="getBulkAction",
        security=_ADMIN,
        responses=declare(200, BulkJobView, "the job", *READ_ERRORS, 404),
    )
    def get_bulk_action(job_id: JobId) -> BulkJobView:
        return bulk_job_view(jobs.get(unquote(job_id)))

    @router.post(
        "/api/bulk-actions/<job_id>/cancel",
        summary="Cancel a bulk job",
        description="The page in flight finishes; no other page starts.",
        tags=["bulk actions"],
        operation_id="cancelBulkAction",
        security=_ADMIN,
        responses=declare(200, BulkJobView, "the job after the cancel", *BODY_ERRORS, 404, 409),
    )
    def cancel_bulk_action(
        job_id: JobId, body: Annotated[BulkCancelRequest | None, Body()] = None
    ) -> BulkJobView:
        request = body or BulkCancelRequest()
        cancelled = jobs.cancel(unquote(job_id), by=caller_name(), reason=request.reason)
        return bulk_job_view(cancelled)

    return router
