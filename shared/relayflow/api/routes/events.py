"""``POST /api/events``: route an event through the environment's manifest."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import WithJsonSchema

from relayflow.api import metrics as m
from relayflow.api.auth import EVENTS_WRITE
from relayflow.api.backend import Backend
from relayflow.api.backend import raw_json_body as _raw_body
from relayflow.api.context import ApiContext
from relayflow.api.models import IngestEventRequest, IngestResultView, documented_body
from relayflow.api.responses import BODY_ERRORS, declare
from relayflow.api.views import ingest_view
from relayflow.errors import RelayflowError
from relayflow.tracing.context import continuing

#: The body is validated by the events module in the reference's order and wording, so the
#: resolver only documents its schema.
IngestBody = Annotated[Any, WithJsonSchema(documented_body(IngestEventRequest))]


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The ingest route over ``ctx``'s driver."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)

    @router.post(
        "/api/events",
        summary="Ingest an event",
        description=(
            "Routes the envelope through the environment's current manifest and starts one "
            "run per matching filter (idempotent per filter and event id). No manifest "
            "answers 200 with ok=false and reason manifest_not_registered; when every match "
            "failed to start, 502 trigger_failed_for_all_matches."
        ),
        tags=["events"],
        operation_id="ingestEvent",
        security=[{"bearerAuth": [EVENTS_WRITE]}],
        responses=declare(200, IngestResultView, "the routing outcome", *BODY_ERRORS, 502, 503),
    )
    def ingest(body: Annotated[IngestBody, Body()]) -> Response[IngestResultView]:
        ctx.metrics.count(m.EVENTS_RECEIVED)
        try:
            with ctx.drive_scope(router.lambda_context), continuing(router.current_event.headers):
                raw_result, created = backend.ingest(_raw_body(router))
            result = ingest_view(raw_result)
        except RelayflowError:
            ctx.metrics.count(m.EVENTS_REJECTED)
            raise
        queued = sum(1 for match in result.matches if match.status == "queued")
        skipped = sum(1 for match in result.matches if match.status == "skipped")
        ctx.metrics.count(m.EVENTS_MATCHED, queued)
        ctx.metrics.count(m.EVENTS_SKIPPED, skipped)
        ctx.metrics.count(m.RUNS_TRIGGERED, created)
        status = 200
        if not result.ok:
            ctx.metrics.count(m.EVENTS_REJECTED)
            if result.reason == "trigger_failed_for_all_matches":
                status = 502
        return Response(
            status_code=status, content_type=content_types.APPLICATION_JSON, body=result
        )

    return router
