"""Routes that pause and resume a whole workflow in one environment (scope ``runs:admin``),
and list the paused workflows (``runs:read``)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from relayflow.api.auth import RUNS_ADMIN, RUNS_READ, caller_name
from relayflow.api.bulk_action_models import BulkJobView, bulk_job_view
from relayflow.api.context import ApiContext
from relayflow.api.model_bases import JsonInt, RequestModel, ResponseModel
from relayflow.api.models import Environment
from relayflow.api.responses import BODY_ERRORS, READ_ERRORS, declare
from relayflow.operations.bulk import BulkJobs
from relayflow.operations.ports import WorkflowPause
from relayflow.operations.workflow_pausing import (
    DEFAULT_RESUME_RATE,
    WorkflowPauseChange,
    WorkflowPausing,
)

WorkflowId = Annotated[str, Path(description="the workflow id")]


class PauseWorkflowRequest(RequestModel):
    """Body of ``POST /api/workflows/{id}/pause``."""

    environment: Environment
    reason: str | None = Field(default=None, max_length=1000)


class ResumeWorkflowRequest(RequestModel):
    """Body of ``POST /api/workflows/{id}/resume``."""

    environment: Environment
    reason: str | None = Field(default=None, max_length=1000)
    rate_per_second: float = Field(
        default=DEFAULT_RESUME_RATE,
        ge=0.01,
        le=10_000,
        description="paused runs resumed per second, at most",
    )


class WorkflowPauseView(ResponseModel):
    """A paused workflow."""

    workflow_id: str
    environment: str
    paused_at: JsonInt
    by: str
    reason: str | None = None


class WorkflowPauseChangeView(WorkflowPauseView):
    """A workflow paused or resumed, with the bulk job acting on its runs."""

    job: BulkJobView


class PausedWorkflowsView(ResponseModel):
    """The paused workflows."""

    workflows: list[WorkflowPauseView]


def _mark_view(mark: WorkflowPause) -> WorkflowPauseView:
    return WorkflowPauseView(
        workflow_id=mark.workflow_id,
        environment=mark.environment,
        paused_at=mark.at,
        by=mark.by,
        reason=mark.reason,
    )


def _change_view(change: WorkflowPauseChange) -> WorkflowPauseChangeView:
    return WorkflowPauseChangeView(
        **_mark_view(change.mark).model_dump(), job=bulk_job_view(change.job)
    )


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The workflow pause routes over ``ctx``'s admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    pausing = WorkflowPausing(BulkJobs(ctx.admin))

    @router.post(
        "/api/workflows/<workflow_id>/pause",
        summary="Pause a workflow in one environment",
        description=(
            "Its new runs are inserted paused, and a bulk job (in the answer) pauses its runs "
            "in flight. A workflow already paused answers 409 already_paused."
        ),
        tags=["workflows"],
        operation_id="pauseWorkflow",
        security=[{"bearerAuth": [RUNS_ADMIN]}],
        responses=declare(
            200, WorkflowPauseChangeView, "the workflow is paused", *BODY_ERRORS, 409
        ),
    )
    def pause_workflow(
        workflow_id: WorkflowId, body: Annotated[PauseWorkflowRequest, Body()]
    ) -> WorkflowPauseChangeView:
        change = pausing.pause(
            unquote(workflow_id), body.environment, by=caller_name(), reason=body.reason
        )
        return _change_view(change)

    @router.post(
        "/api/workflows/<workflow_id>/resume",
        summary="Resume a paused workflow in one environment",
        description=(
            "Its new runs start again as usual, and a bulk job (in the answer) resumes its "
            "paused runs at ratePerSecond at most. A workflow that is not paused answers 409 "
            "not_paused."
        ),
        tags=["workflows"],
        operation_id="resumeWorkflow",
        security=[{"bearerAuth": [RUNS_ADMIN]}],
        responses=declare(
            200, WorkflowPauseChangeView, "the workflow is resumed", *BODY_ERRORS, 409
        ),
    )
    def resume_workflow(
        workflow_id: WorkflowId, body: Annotated[ResumeWorkflowRequest, Body()]
    ) -> WorkflowPauseChangeView:
        change = pausing.resume(
            unquote(workflow_id),
            body.environment,
            by=caller_name(),
            reason=body.reason,
            rate_per_second=body.rate_per_second,
        )
        return _change_view(change)

    @router.get(
        "/api/paused-workflows",
        summary="The paused workflows",
        tags=["workflows"],
        operation_id="listPausedWorkflows",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, PausedWorkflowsView, "the paused workflows", *READ_ERRORS),
    )
    def list_paused_workflows(
        environment: Annotated[Environment | None, Query()] = None,
    ) -> PausedWorkflowsView:
        marks = pausing.paused(environment)
        return PausedWorkflowsView(workflows=[_mark_view(mark) for mark in marks])

    return router
