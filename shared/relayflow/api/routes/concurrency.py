"""Routes of ``/api/workflows/{workflowId}/concurrency``: a key's holders and queue, and the
release of a slot that a run which ended still holds."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from relayflow.api.auth import RUNS_READ, RUNS_WRITE
from relayflow.api.backend import Backend
from relayflow.api.context import ApiContext
from relayflow.api.model_bases import RequestModel, ResponseModel
from relayflow.api.models import Environment
from relayflow.api.responses import BODY_ERRORS, READ_ERRORS, declare
from relayflow.flow.declarations import MAX_KEY_LENGTH
from relayflow.schedules.times import iso_utc

WorkflowId = Annotated[str, Path(description="the workflow id")]
KeyQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        description="the concurrency key; omit it for a limit over the whole workflow",
    ),
]


class SlotHolderView(ResponseModel):
    """A run holding one of the key's slots."""

    run_id: str
    since: str = Field(description="when it took the slot (ISO 8601, UTC)")


class QueuedRunView(ResponseModel):
    """A run waiting for one of the key's slots."""

    run_id: str
    priority: int
    position: int = Field(description="1 is the next run to take a slot")
    queued_at: str = Field(description="when it joined the queue (ISO 8601, UTC)")


class ConcurrencyKeyView(ResponseModel):
    """``GET /api/workflows/{workflowId}/concurrency``: the key's slots."""

    workflow_id: str
    key: str = Field(description="'' for a limit over the whole workflow")
    limit: int
    strategy: str
    in_use: int
    holders: list[SlotHolderView] = Field(description="oldest first")
    queue: list[QueuedRunView] = Field(description="in the order they will take slots")


class ReleaseSlotRequest(RequestModel):
    """``POST /api/workflows/{workflowId}/concurrency/release``."""

    run_id: str = Field(min_length=1, description="the ended (or unknown) run whose slot to free")
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        description="the key it holds a slot of (default: the key the run was admitted under)",
    )


class SlotReleaseView(ResponseModel):
    """What a release did."""

    workflow_id: str
    key: str
    run_id: str
    released: bool = Field(description="the run held a slot or a queue place, now freed")
    started: list[str] = Field(description="queued runs that took the freed slots and started")


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The concurrency routes over ``ctx``'s driver and admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)

    @router.get(
        "/api/workflows/<workflow_id>/concurrency",
        summary="A concurrency key's holders and queue",
        tags=["concurrency"],
        operation_id="getConcurrencyKey",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, ConcurrencyKeyView, "the key's slots", *READ_ERRORS, 404, 409),
    )
    def get_key(
        workflow_id: WorkflowId,
        key: KeyQuery = None,
        environment: Annotated[Environment, Query()] = "development",
    ) -> ConcurrencyKeyView:
        state = backend.concurrency_key(unquote(workflow_id), key, environment)
        return ConcurrencyKeyView(
            workflow_id=state.workflow_id,
            key=state.key,
            limit=state.concurrency.limit,
            strategy=state.concurrency.strategy,
            in_use=state.in_use,
            holders=[
                SlotHolderView(run_id=h.run_id, since=iso_utc(h.since_ms)) for h in state.holders
            ],
            queue=[
                QueuedRunView(
                    run_id=q.run_id,
                    priority=q.priority,
                    position=position,
                    queued_at=iso_utc(q.queued_at_ms),
                )
                for position, q in enumerate(state.queue, start=1)
            ],
        )

    @router.post(
        "/api/workflows/<workflow_id>/concurrency/release",
        summary="Free the slot of a run that ended without giving it back",
        description=(
            "Frees the run's slot (or queue place) and starts the queued runs that take it at "
            "once. A run that has not ended answers 409 run_active: cancel it, its end frees "
            "the slot. Safe to repeat; an Idempotency-Key header replays the first answer."
        ),
        tags=["concurrency"],
        operation_id="releaseConcurrencySlot",
        security=[{"bearerAuth": [RUNS_WRITE]}],
        responses=declare(200, SlotReleaseView, "the slot is free", *BODY_ERRORS, 404, 409),
    )
    def release(
        workflow_id: WorkflowId,
        body: Annotated[ReleaseSlotRequest, Body()],
        environment: Annotated[Environment, Query()] = "development",
    ) -> SlotReleaseView:
        with ctx.drive_scope(router.lambda_context):
            done = backend.release_slot(unquote(workflow_id), body.run_id, body.key, environment)
        return SlotReleaseView(
            workflow_id=done.workflow_id,
            key=done.key,
            run_id=done.run_id,
            released=done.released,
            started=done.started,
        )

    return router
