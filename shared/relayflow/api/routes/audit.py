"""Route of ``/api/audit``: the operator actions across runs, newest first."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from relayflow.api.auth import RUNS_READ
from relayflow.api.backend import Backend
from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.model_bases import ResponseModel
from relayflow.api.models import Environment
from relayflow.api.query import INSTANT_SCHEMA, parse_instant
from relayflow.api.responses import READ_ERRORS, declare
from relayflow.errors import ValidationError
from relayflow.operations.audit import DEFAULT_WINDOW_MS, MAX_LIMIT
from relayflow.operations.ports import AuditEntry, AuditKind, AuditQuery

_WINDOW_DAYS = DEFAULT_WINDOW_MS // (24 * 60 * 60 * 1000)


class AuditEntryView(ResponseModel):
    """One operator action."""

    id: str = Field(description="the action id (the request's Idempotency-Key, a bulk job's id)")
    kind: AuditKind
    at: int = Field(description="when it was applied (epoch ms)")
    by: str = Field(description="who asked: a token's name, cli, or bulk:<job id>")
    environment: str
    workflow_id: str | None = None
    run_id: str | None = Field(default=None, description="the run acted on, when one run was")
    reason: str | None = None
    detail: dict[str, Any] = Field(
        default_factory=dict, description="what the action chose or made (fromStep, rerunId...)"
    )


class AuditPageView(ResponseModel):
    """``GET /api/audit``: one page, newest first; pass ``nextCursor`` back for the next page."""

    entries: list[AuditEntryView]
    next_cursor: str | None = None


def entry_view(entry: AuditEntry) -> AuditEntryView:
    """The wire form of one entry."""
    return AuditEntryView(
        id=entry.id,
        kind=entry.kind,
        at=entry.at,
        by=entry.by,
        environment=entry.environment,
        workflow_id=entry.workflow_id,
        run_id=entry.run_id,
        reason=entry.reason,
        detail=entry.detail,
    )


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The audit route over ``ctx``'s admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)

    @router.get(
        "/api/audit",
        summary="List operator actions, newest first",
        description=(
            "Every single-run action (pause, resume, cancel, redrive, rerun, upgrade), every "
            "workflow pause and resume and every bulk job, each recorded once per action id. "
            f"Without since, the listing goes back {_WINDOW_DAYS} days; entries are kept 400 days."
        ),
        tags=["audit"],
        operation_id="listAudit",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, AuditPageView, "one page of the audit log", *READ_ERRORS),
    )
    def list_audit(
        environment: Annotated[Environment | None, Query()] = None,
        kind: Annotated[AuditKind | None, Query()] = None,
        workflow_id: Annotated[str | None, Query(alias="workflowId", min_length=1)] = None,
        run_id: Annotated[str | None, Query(alias="runId", min_length=1)] = None,
        since: Annotated[
            str | None,
            Query(
                description="actions at or after: epoch ms or an RFC 3339 date-time "
                f"(default: {_WINDOW_DAYS} days before until)",
                json_schema_extra=INSTANT_SCHEMA,
            ),
        ] = None,
        until: Annotated[
            str | None,
            Query(
                description="actions before: epoch ms or an RFC 3339 date-time (default: now)",
                json_schema_extra=INSTANT_SCHEMA,
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
        cursor: Annotated[
            str | None, Query(min_length=1, description="the nextCursor of the previous page")
        ] = None,
    ) -> AuditPageView:
        try:
            query = AuditQuery(
                environment=environment,
                kind=kind,
                workflow_id=workflow_id,
                run_id=run_id,
                since=parse_instant("since", since),
                until=parse_instant("until", until),
                limit=limit,
                cursor=cursor,
            )
            page = backend.audit_log(query)
        except ValidationError as exc:
            raise ApiError(400, "invalid_query", exc.message) from None
        return AuditPageView(
            entries=[entry_view(e) for e in page.entries], next_cursor=page.next_cursor
        )

    return router
