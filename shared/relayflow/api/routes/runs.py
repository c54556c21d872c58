"""Routes of ``/api/runs``: trigger, list, get, timeline, operator actions (cancel, pause,
resume, redrive, rerun, upgrade) and injections."""

from __future__ import annotations

import secrets
from contextlib import AbstractContextManager
from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api import idempotency
from relayflow.api import metrics as m
from relayflow.api.action_models import RedriveRunRequest, RerunRunRequest, RunActionRequest
from relayflow.api.auth import RUNS_READ, RUNS_WRITE, caller_name
from relayflow.api.backend import Backend
from relayflow.api.context import DEADLINE_MARGIN_MS, ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.models import (
    MAX_WAIT_MS,
    CancelRunRequest,
    CompleteTokenRequest,
    Environment,
    FailTokenRequest,
    InjectionView,
    RunListView,
    RunNoticeView,
    RunStatus,
    RunView,
    SendEventRequest,
    SendSignalRequest,
    TimelineView,
    TriggerRunRequest,
)
from relayflow.api.query import INSTANT_SCHEMA, parse_instant
from relayflow.api.responses import BODY_ERRORS, READ_ERRORS, declare
from relayflow.api.views import injection_view, run_summary, run_view, timeline_view
from relayflow.core.cursors import RUN_CURSOR_PATTERN
from relayflow.core.views import (
    TIMELINE_CURSOR_PATTERN,
    TIMELINE_DEFAULT_LIMIT,
    TIMELINE_MAX_LIMIT,
    TIMELINE_PAGE_VALUE_BUDGET_BYTES,
    TIMELINE_VALUE_CAP_BYTES,
    RunDetail,
)
from relayflow.drivers import DeliveryResult, replay_answer
from relayflow.errors import ValidationError
from relayflow.run_history import RunHistory
from relayflow.tracing.context import continuing

_READ = [{"bearerAuth": [RUNS_READ]}]
INTERRUPTED = (
    "the run is stored, but a backing service failed while it was driven (the logs have the "
    "error under this request's id); the sweeper drives it again when it is due: do not "
    "start it again"
)
_WRITE = [{"bearerAuth": [RUNS_WRITE]}]
RunId = Annotated[str, Path(description="the run id (URL-encode '/' in child run ids)")]
#: How the action routes are retry-safe (their descriptions say it).
ACTION_KEY = (
    " The Idempotency-Key header is the action's id: a repeat of the request gets the first "
    "answer again (header Idempotent-Replayed: true), and an action whose id the run already "
    "holds is not applied again (the run is answered as it is). Without the header the action "
    "gets a random id."
)
TokenId = Annotated[str, Path(description="the token id")]


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The run routes over ``ctx``'s driver and admin."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)

    def observe(run: RunDetail) -> RunDetail:
        ctx.logger.thread_safe_append_keys(run_id=run.id, workflow_id=run.workflow_id)
        return run

    def scope() -> AbstractContextManager[None]:
        return ctx.drive_scope(router.lambda_context)

    def header_key() -> str | None:
        """The request's ``Idempotency-Key`` (the resolver has checked it)."""
        return idempotency.header_key(router.current_event.headers)

    def wait_for_settle(run: RunDetail, wait_ms: int) -> RunDetail:
        """Re-read the run until it waits or ends, for at most ``wait_ms``."""
        budget = min(wait_ms, MAX_WAIT_MS, ctx.wait.max_wait_ms)
        remaining = router.lambda_context.get_remaining_time_in_millis()
        budget = min(budget, max(0, remaining - DEADLINE_MARGIN_MS))
        deadline = ctx.wait.monotonic_ms() + budget
        delay = float(ctx.wait.first_poll_ms)
        while run.status == "running":
            left = deadline - ctx.wait.monotonic_ms()
            if left <= 0:
                break
            ctx.wait.sleep_ms(min(delay, left))
            delay = min(delay * 2, float(ctx.wait.max_poll_ms))
            run = backend.get_run(run.id)
        return run

    @router.post(
        "/api/runs",
        summary="Start a run",
        description=(
            "Inserts the run atomically and drives it for at most the inline budget (the "
            "deployed api hands the drive to the drive function and waits up to the budget "
            "for the run to wait or end), then answers with the run as it stands. A repeated "
            "body idempotencyKey answers 200 with the run it first started (its original "
            "input). An Idempotency-Key header makes the request retry-safe: a repeat gets "
            "the first answer again (header Idempotent-Replayed: true), the same key with "
            "another body answers 422; without a body idempotencyKey the header key is used."
        ),
        tags=["runs"],
        operation_id="triggerRun",
        security=_WRITE,
        status_code=201,
        responses=declare(
            201,
            RunView,
            "the run was created",
            *BODY_ERRORS,
            404,
            503,
            extra={
                200: "the idempotency key already started this run, or a debounced "
                "trigger joined this run"
            },
        ),
    )
    def trigger_run(body: Annotated[TriggerRunRequest, Body()]) -> Response[RunView]:
        key = header_key()
        if key is not None and body.idempotency_key is None and body.run_id is None:
            # A retry after a lost answer must find the run the first attempt started.
            body = body.model_copy(update={"idempotency_key": key})
        with scope(), continuing(router.current_event.headers):
            run, created, interrupted = backend.trigger(body, hand_off=ctx.hand_off)
        observe(run)
        if created:
            ctx.metrics.count(m.RUNS_TRIGGERED)
        notice = None
        if interrupted is not None:
            # The error names internal resources: it goes to the logs, the client gets a notice.
            ctx.logger.warning("the run's first drive was interrupted", exc_info=interrupted)
            notice = RunNoticeView(code="drive_interrupted", message=INTERRUPTED)
        elif created:
            wait_ms = body.wait_ms
            if ctx.hand_off:
                wait_ms = max(wait_ms, ctx.budget_ms(router.lambda_context))
            if wait_ms > 0:
                run = wait_for_settle(run, wait_ms)
        return Response(
            status_code=201 if created else 200,
            content_type=content_types.APPLICATION_JSON,
            body=run_view(run).model_copy(update={"notice": notice}),
        )

    @router.get(
        "/api/runs",
        summary="List runs, newest first",
        tags=["runs"],
        operation_id="listRuns",
        security=_READ,
        responses=declare(200, RunListView, "one page of runs", *READ_ERRORS),
    )
    def list_runs(
        environment: Annotated[Environment | None, Query()] = None,
        workflow_id: Annotated[str | None, Query(alias="workflowId", min_length=1)] = None,
        status: Annotated[
            list[RunStatus] | None,
            Query(description="repeat the parameter to accept several statuses"),
        ] = None,
        tag: Annotated[str | None, Query(min_length=1)] = None,
        since: Annotated[
            str | None,
            Query(
                description="runs started at or after: epoch ms or an RFC 3339 date-time",
                json_schema_extra=INSTANT_SCHEMA,
            ),
        ] = None,
        until: Annotated[
            str | None,
            Query(
                description="runs started before: epoch ms or an RFC 3339 date-time",
                json_schema_extra=INSTANT_SCHEMA,
            ),
        ] = None,
        code_version: Annotated[
            str | None,
            Query(
                alias="codeVersion",
                min_length=1,
                max_length=256,
                description="runs on this build (codeVersion.build of a run)",
            ),
        ] = None,
        parent: Annotated[
            str | None,
            Query(
                min_length=1,
                max_length=512,
                description="only the child runs this run started (parentRunId of a run); "
                "pass the parent's start as since to read less",
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: Annotated[
            str | None,
            Query(pattern=RUN_CURSOR_PATTERN, description="the nextCursor of the previous page"),
        ] = None,
    ) -> RunListView:
        try:
            page = backend.list_runs(
                environment=environment,
                workflow_id=workflow_id,
                statuses=tuple(status or ()),
                tag=tag,
                started_after=parse_instant("since", since),
                started_before=parse_instant("until", until),
                limit=limit,
                cursor=cursor,
                code_version=code_version,
                parent_run_id=parent,
            )
        except ValidationError as exc:
            raise ApiError(400, "invalid_query", exc.message) from None
        return RunListView(runs=[run_summary(r) for r in page.runs], next_cursor=page.next_cursor)

    @router.get(
        "/api/runs/<run_id>",
        summary="Get a run",
        tags=["runs"],
        operation_id="getRun",
        security=_READ,
        responses=declare(200, RunView, "the run", *READ_ERRORS, 404),
    )
    def get_run(run_id: RunId) -> RunView:
        return run_view(observe(backend.get_run(unquote(run_id))))

    @router.get(
        "/api/runs/<run_id>/timeline",
        summary="A run's step attempts and waits, with names and (on request) values",
        description=(
            "Paged: at most `limit` entries and, with values=true, at most "
            f"{TIMELINE_PAGE_VALUE_BUDGET_BYTES} bytes of values per page (each value "
            f"capped at {TIMELINE_VALUE_CAP_BYTES} bytes); pass nextCursor back as cursor."
        ),
        tags=["runs"],
        operation_id="getRunTimeline",
        security=_READ,
        responses=declare(200, TimelineView, "one page of the timeline", *READ_ERRORS, 404),
    )
    def get_timeline(
        run_id: RunId,
        values: Annotated[
            bool, Query(description="give each entry its checkpointed value")
        ] = False,
        cursor: Annotated[
            str | None,
            Query(
                pattern=TIMELINE_CURSOR_PATTERN, description="the nextCursor of the previous page"
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=TIMELINE_MAX_LIMIT)] = TIMELINE_DEFAULT_LIMIT,
    ) -> TimelineView:
        try:
            page = backend.timeline(unquote(run_id), values=values, cursor=cursor, limit=limit)
        except ValidationError as exc:
            raise ApiError(400, "invalid_query", exc.message) from None
        ctx.logger.append_keys(run_id=page.run_id)
        return timeline_view(page)

    @router.get(
        "/api/runs/<run_id>/history",
        summary="A run's recorded history, for a replay check",
        description=(
            "The run's journal with every value in it, its input and the facts its body "
            "reads (format relayflow.history/1): what `relayflow runs export` writes and "
            "`relayflow replay` runs new code against."
        ),
        tags=["runs"],
        operation_id="getRunHistory",
        security=_READ,
        responses=declare(200, RunHistory, "the run's history", *READ_ERRORS, 404),
    )
    def get_history(run_id: RunId) -> RunHistory:
        history = backend.history(unquote(run_id))
        ctx.logger.append_keys(run_id=history.run_id)
        return history

    def action_id() -> str:
        """The id of the action this request asks for: its ``Idempotency-Key``, else new."""
        return header_key() or f"act_{secrets.token_hex(12)}"

    action_responses = declare(200, RunView, "the run after the action", *BODY_ERRORS, 404, 409)

    @router.post(
        "/api/runs/<run_id>/cancel",
        summary="Cancel a run (optionally compensating first)",
        description="An empty body cancels without compensation; a paused run can be "
        "cancelled. A run that ended answers 409 already_terminal." + ACTION_KEY,
        tags=["runs"],
        operation_id="cancelRun",
        security=_WRITE,
        responses=action_responses,
    )
    def cancel_run(
        run_id: RunId, body: Annotated[CancelRunRequest | None, Body()] = None
    ) -> RunView:
        request = body or CancelRunRequest()
        with scope():
            run = backend.cancel(
                unquote(run_id),
                request.reason,
                request.compensate,
                by=caller_name(),
                action_id=action_id(),
            )
        return run_view(observe(run))

    @router.post(
        "/api/runs/<run_id>/pause",
        summary="Pause a running or waiting run",
        description=(
            "The run starts no new invocation until resumed: a waiting run stops at once, a "
            "running one at its next step checkpoint. 409: already_paused, not_started "
            "(queued or delayed), already_terminal." + ACTION_KEY
        ),
        tags=["runs"],
        operation_id="pauseRun",
        security=_WRITE,
        responses=action_responses,
    )
    def pause_run(
        run_id: RunId, body: Annotated[RunActionRequest | None, Body()] = None
    ) -> RunView:
        request = body or RunActionRequest()
        with scope():
            run = backend.pause(
                unquote(run_id), request.reason, by=caller_name(), action_id=action_id()
            )
        return run_view(observe(run))

    @router.post(
        "/api/runs/<run_id>/resume",
        summary="Resume a paused run",
        description=(
            "The run goes on at once from its journal, with what arrived while it was "
            "paused. 409: not_paused, already_terminal." + ACTION_KEY
        ),
        tags=["runs"],
        operation_id="resumeRun",
        security=_WRITE,
        responses=action_responses,
    )
    def resume_run(
        run_id: RunId, body: Annotated[RunActionRequest | None, Body()] = None
    ) -> RunView:
        request = body or RunActionRequest()
        with scope():
            run = backend.resume(
                unquote(run_id), request.reason, by=caller_name(), action_id=action_id()
            )
        return run_view(observe(run))

    @router.post(
        "/api/runs/<run_id>/upgrade",
        summary="Move a run to the current version",
        description=(
            "The run's next invocation goes to the code that answers now (which a pinned run "
            "then keeps): a run waiting for its pinned version is tried at once, a paused run "
            "moves and runs on resume. A run on no particular version (an upgrade workflow's, "
            "or one no code answered yet) answers 200 with the action kept and nothing "
            "changed (its detail from is null). 409: already_terminal." + ACTION_KEY
        ),
        tags=["runs"],
        operation_id="upgradeRun",
        security=_WRITE,
        responses=action_responses,
    )
    def upgrade_run(
        run_id: RunId, body: Annotated[RunActionRequest | None, Body()] = None
    ) -> RunView:
        request = body or RunActionRequest()
        with scope():
            run = backend.upgrade(
                unquote(run_id), request.reason, by=caller_name(), action_id=action_id()
            )
        return run_view(observe(run))

    @router.post(
        "/api/runs/<run_id>/redrive",
        summary="Redrive a failed, cancelled or compensation_failed run",
        description=(
            "The same run goes on from its failure point: completed steps keep their results, "
            "the failed step starts again from attempt 1 (with retry's policy when given). "
            "409: not_redrivable." + ACTION_KEY
        ),
        tags=["runs"],
        operation_id="redriveRun",
        security=_WRITE,
        responses=action_responses,
    )
    def redrive_run(
        run_id: RunId, body: Annotated[RedriveRunRequest | None, Body()] = None
    ) -> RunView:
        request = body or RedriveRunRequest()
        with scope():
            run = backend.redrive(unquote(run_id), request, by=caller_name(), action_id=action_id())
        return run_view(observe(run))

    @router.post(
        "/api/runs/<run_id>/rerun",
        summary="Rerun an ended run from one of its top-level steps, as a new run",
        description=(
            "The new run copies the original's journal up to fromStep and runs that step and "
            "everything after it anew; input replaces the run's input (left out: the "
            "original's). Answers 201 with the new run. 400 step_not_found: fromStep is not a "
            "top-level step of the run; 409 not_rerunnable: the run has not ended, or its "
            "compensations ran and fromStep is not its first step." + ACTION_KEY
        ),
        tags=["runs"],
        operation_id="rerunRun",
        security=_WRITE,
        status_code=201,
        responses=declare(201, RunView, "the new run", *BODY_ERRORS, 404, 409),
    )
    def rerun_run(run_id: RunId, body: Annotated[RerunRunRequest, Body()]) -> Response[RunView]:
        with scope():
            run = backend.rerun(unquote(run_id), body, by=caller_name(), action_id=action_id())
        return Response(
            status_code=201,
            content_type=content_types.APPLICATION_JSON,
            body=run_view(observe(run)),
        )

    def delivered(
        delivery: DeliveryResult, claim: idempotency.Claim | None = None
    ) -> InjectionView:
        observe(delivery.run)
        if claim is not None:
            # What the driver answers a repeat of the id with, should one come to it directly.
            claim.extra.update(replay_answer(delivery))
        return injection_view(delivery)

    injection_responses = declare(
        200, InjectionView, "the run after the delivery", *BODY_ERRORS, 404, 409
    )

    @router.post(
        "/api/runs/<run_id>/events",
        summary="Deliver an event to a run",
        description=(
            "Resolves the first pending event wait that matches; an early event waits in "
            "the run's inbox for a later wait. Terminal runs answer 409 run_terminal."
        ),
        tags=["runs"],
        operation_id="sendRunEvent",
        security=_WRITE,
        responses=injection_responses,
    )
    def send_event(run_id: RunId, body: Annotated[SendEventRequest, Body()]) -> InjectionView:
        event_id = body.event_id or header_key()
        claim = idempotency.held_delivery()
        with scope():
            delivery = backend.send_event(
                unquote(run_id), body.event_type, body.payload, event_id, claimed=claim is not None
            )
        return delivered(delivery, claim)

    @router.post(
        "/api/runs/<run_id>/signals",
        summary="Send a signal to a run",
        tags=["runs"],
        operation_id="sendRunSignal",
        security=_WRITE,
        responses=injection_responses,
    )
    def send_signal(run_id: RunId, body: Annotated[SendSignalRequest, Body()]) -> InjectionView:
        signal_id = body.signal_id or header_key()
        claim = idempotency.held_delivery()
        with scope():
            delivery = backend.send_signal(
                unquote(run_id), body.name, body.payload, signal_id, claimed=claim is not None
            )
        return delivered(delivery, claim)

    @router.post(
        "/api/runs/<run_id>/tokens/<token_id>",
        summary="Complete a token with a payload",
        tags=["runs"],
        operation_id="completeToken",
        security=_WRITE,
        responses=injection_responses,
    )
    def complete_token(
        run_id: RunId,
        token_id: TokenId,
        body: Annotated[CompleteTokenRequest | None, Body()] = None,
    ) -> InjectionView:
        payload = body.payload if body is not None else None
        with scope():
            return delivered(backend.complete_token(unquote(run_id), unquote(token_id), payload))

    @router.post(
        "/api/runs/<run_id>/tokens/<token_id>/fail",
        summary="Fail a token",
        tags=["runs"],
        operation_id="failToken",
        security=_WRITE,
        responses=injection_responses,
    )
    def fail_token(
        run_id: RunId, token_id: TokenId, body: Annotated[FailTokenRequest, Body()]
    ) -> InjectionView:
        error = body.error
        with scope():
            return delivered(
                backend.fail_token(unquote(run_id), unquote(token_id), error.code, error.message)
            )

    @router.post(
        "/api/runs/<run_id>/tokens/<token_id>/heartbeat",
        summary="Heartbeat a token (pushes its heartbeat deadline)",
        tags=["runs"],
        operation_id="heartbeatToken",
        security=_WRITE,
        responses=injection_responses,
    )
    def heartbeat_token(run_id: RunId, token_id: TokenId) -> InjectionView:
        with scope():
            return delivered(backend.heartbeat_token(unquote(run_id), unquote(token_id)))

    return router
