"""Routes of ``/api/schedules``: list (with next fire times), pause, resume, trigger now."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from relayflow.api.auth import RUNS_READ, RUNS_WRITE
from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.model_bases import ResponseModel
from relayflow.api.models import Environment
from relayflow.api.responses import READ_ERRORS, declare
from relayflow.schedules.service import ScheduleService

_READ = [{"bearerAuth": [RUNS_READ]}]
_WRITE = [{"bearerAuth": [RUNS_WRITE]}]
ScheduleId = Annotated[str, Path(description="the schedule id (sch_...)")]
EnvironmentQuery = Annotated[Environment, Query(description="the environment (production)")]


class LastRunView(ResponseModel):
    """The run the schedule's latest firing started and how it stands now."""

    run_id: str
    status: str | None = Field(
        default=None, description="the run's status now; null while it is not stored yet"
    )
    manual: bool = Field(description='started by "trigger now", not by a scheduled firing')
    scheduled_time: str | None = Field(
        default=None, description="the time the firing was for (a trigger now: when it was asked)"
    )
    started_at: int | None = Field(default=None, description="epoch milliseconds")


class ScheduleDetailView(ResponseModel):
    """A schedule as declared in the current manifest, with its state."""

    id: str
    workflow_id: str
    environment: str
    name: str | None = None
    kind: Literal["cron", "every", "at"]
    declaration: dict[str, Any]
    timezone: str
    overlap: Literal["skip", "queue", "allow"]
    paused: bool
    fired: bool
    last_scheduled_time: str | None = None
    active_run_id: str | None = Field(
        default=None,
        description="the run the overlap policy last waited on (it may have ended since)",
    )
    last_run: LastRunView | None = Field(
        default=None,
        description="the run the latest firing started (scheduled or trigger now), with its "
        "status now",
    )
    queued_time: str | None = None
    scheduler_name: str
    next_fire_times: list[str]


class ScheduleListView(ResponseModel):
    """``GET /api/schedules``."""

    environment: str
    schedules: list[ScheduleDetailView]


class FiringView(ResponseModel):
    """What a firing did: ``started``, ``duplicate``, ``skipped``, ``queued``, ``paused`` or
    ``superseded``, with the run it started (or found)."""

    status: str
    schedule_id: str
    scheduled_time: str
    run_id: str | None = None


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The schedule routes over ``ctx.driver.schedules``."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    def service() -> ScheduleService:
        found: ScheduleService | None = getattr(ctx.driver, "schedules", None)
        if found is None:
            raise ApiError(
                404, "not_found", "this deployment hosts no schedules (no schedule group)"
            )
        return found

    @router.get(
        "/api/schedules",
        summary="List an environment's schedules",
        description="Every schedule the current manifest declares for the environment, "
        "with its pause, overlap state and next five fire times (UTC).",
        tags=["schedules"],
        operation_id="listSchedules",
        security=_READ,
        responses=declare(200, ScheduleListView, "the schedules", *READ_ERRORS, 404),
    )
    def list_schedules(environment: EnvironmentQuery = "production") -> ScheduleListView:
        views = service().list(environment)
        return ScheduleListView(
            environment=environment,
            schedules=[ScheduleDetailView.model_validate(v.to_json()) for v in views],
        )

    def one(action: str, summary: str, doc: str) -> None:
        @router.post(
            f"/api/schedules/<schedule_id>/{action}",
            summary=summary,
            description=doc,
            tags=["schedules"],
            operation_id=f"{action}Schedule",
            security=_WRITE,
            responses=declare(200, ScheduleDetailView, "the schedule", *READ_ERRORS, 404),
        )
        def change(
            schedule_id: ScheduleId, environment: EnvironmentQuery = "production"
        ) -> ScheduleDetailView:
            schedules = service()
            view = (schedules.pause if action == "pause" else schedules.resume)(
                environment, schedule_id
            )
            return ScheduleDetailView.model_validate(view.to_json())

    one("pause", "Pause a schedule", "It stops firing until resumed, across re-registrations.")
    one("resume", "Resume a schedule", "It fires again from its next scheduled time on.")

    @router.post(
        "/api/schedules/<schedule_id>/trigger",
        summary="Fire a schedule now",
        description="Starts the schedule's run now (even while paused), following its "
        "overlap policy.",
        tags=["schedules"],
        operation_id="triggerSchedule",
        security=_WRITE,
        responses=declare(200, FiringView, "what the firing did", *READ_ERRORS, 404),
    )
    def trigger(
        schedule_id: ScheduleId, environment: EnvironmentQuery = "production"
    ) -> FiringView:
        return FiringView.model_validate(service().trigger_now(environment, schedule_id).to_json())

    return router
