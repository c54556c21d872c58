"""``GET /api/runs/{id}/stream``: a run's journal events after a cursor, as a long poll."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api.auth import RUNS_READ
from relayflow.api.context import DEADLINE_MARGIN_MS, ApiContext
from relayflow.api.models import RunStatus
from relayflow.api.responses import READ_ERRORS, declare
from relayflow.api.stream import MAX_STREAM_WAIT_MS, RunStream, RunStreamView, wait_budget_ms


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The stream route over ``ctx``'s admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    stream = RunStream(ctx.admin)

    @router.get(
        "/api/runs/<run_id>/stream",
        summary="A run's journal events after a cursor (long poll)",
        description=(
            "Answers the events numbered after `after` at once when there are some, or when "
            "the run's status is not `status`; otherwise waits up to `waitMs` (at most "
            f"{MAX_STREAM_WAIT_MS} ms, within API Gateway's 30 s) for the next event or a "
            "change of the run's status. Pass `next` back as `after`, and the answer's "
            "`status` as `status`; `done` says the run has ended."
        ),
        tags=["runs"],
        operation_id="streamRun",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, RunStreamView, "the events after the cursor", *READ_ERRORS, 404),
    )
    def stream_run(
        run_id: Annotated[str, Path(description="the run id (URL-encode '/')")],
        after: Annotated[int, Query(ge=0, description="the last seq already seen")] = 0,
        wait_ms: Annotated[
            int,
            Query(
                alias="waitMs",
                ge=0,
                le=MAX_STREAM_WAIT_MS,
                description="how long to wait for a new event",
            ),
        ] = 0,
        status: Annotated[
            RunStatus | None,
            Query(description="the run's status the caller shows: another one is answered at once"),
        ] = None,
    ) -> RunStreamView:
        remaining = router.lambda_context.get_remaining_time_in_millis
        budget = wait_budget_ms(min(wait_ms, ctx.wait.max_wait_ms), remaining, DEADLINE_MARGIN_MS)
        view = stream.read(unquote(run_id), after, budget, status)
        ctx.logger.thread_safe_append_keys(run_id=view.run_id)
        return view

    return router
