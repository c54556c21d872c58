"""The HTTP API as a Powertools ``APIGatewayHttpResolver``, built from an injected driver.

:func:`create_app` wires the routers (runs, events, manifests, health), the exception map,
authentication and the request checks that must run before a route's validation: size,
encoding, JSON, method and scope (:mod:`relayflow.api.request_checks`), then the
``Idempotency-Key`` claim (:mod:`relayflow.api.idempotency`). Both run as the first
middleware of every route, ahead of Powertools' validation middlewares. Nothing a client
sends can produce a 500 or a stack trace.

Powertools offers no public list of a resolver's routes and no thread-safe way to build a
route's middleware stack; the few private members this module uses for those are listed
(and checked against the installed Powertools) in ``tests/api/test_api_powertools_surface.py``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, CORSConfig, Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.middlewares import BaseMiddlewareHandler, NextMiddleware
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.typing import LambdaContext

from relayflow import __version__
from relayflow.api import idempotency
from relayflow.api.auth import Authenticator, hold_caller
from relayflow.api.context import (
    DEFAULT_INLINE_BUDGET_MS,
    MAX_BODY_BYTES,
    ApiContext,
    WaitPolicy,
)
from relayflow.api.error_handlers import install_error_handlers
from relayflow.api.metrics import EmfMetrics, MetricsSink
from relayflow.api.openapi import build_document
from relayflow.api.request_checks import RequestChecks
from relayflow.api.routes import audit as audit_routes
from relayflow.api.routes import bulk_actions as bulk_actions_routes
from relayflow.api.routes import checkpoints as checkpoints_routes
from relayflow.api.routes import concurrency as concurrency_routes
from relayflow.api.routes import dashboard as dashboard_routes
from relayflow.api.routes import docs as docs_routes
from relayflow.api.routes import events as events_routes
from relayflow.api.routes import health as health_routes
from relayflow.api.routes import manifest_history as manifest_history_routes
from relayflow.api.routes import manifests as manifests_routes
from relayflow.api.routes import runs as runs_routes
from relayflow.api.routes import schedules as schedules_routes
from relayflow.api.routes import stream as stream_routes
from relayflow.api.routes import tokens as tokens_routes
from relayflow.api.routes import versions as versions_routes
from relayflow.api.routes import workflow_pauses as workflow_pauses_routes
from relayflow.api.routes import workflow_stats as workflow_stats_routes
from relayflow.deliveries import DeliveryIdClaims
from relayflow.dispatch.capabilities import CapabilitySigner
from relayflow.observability import RunMetrics
from relayflow.protocol import strict_json_loads

_LOG_KEYS = ("run_id", "workflow_id")


class _RequestState(threading.local):
    """What Powertools keeps about the request being answered, kept per thread.

    Powertools stores the event and Lambda context on its ``BaseRouter`` class (shared by
    every resolver in the process) and the matched route and its arguments in the
    resolver's ``context`` dict: one thread's request would overwrite another's. Lambda
    answers one request at a time; the local server answers many at once.
    """

    def __init__(self) -> None:
        self.current_event: Any = None
        self.lambda_context: Any = None
        self.context: dict[str, Any] = {}
        self.processed_stack_frames: list[str] = []


class _RequestGate(BaseMiddlewareHandler[Any]):
    """The first middleware of every route: the request checks, then the key's claim (a
    request answered before gets its first answer again without reaching its route)."""

    def __init__(self, checks: RequestChecks, claims: idempotency.RequestClaims) -> None:
        self.checks = checks
        self.claims = claims

    def handler(self, app: Any, next_middleware: NextMiddleware) -> Response[Any]:
        event = cast(APIGatewayProxyEventV2, app.current_event)
        principal = self.checks.check(event)
        hold_caller(principal)
        replay = self.claims.claim(event, principal.name if principal is not None else None)
        if replay is not None:
            return idempotency.replay_response(replay)
        return next_middleware(app)


class RelayflowResolver(APIGatewayHttpResolver):
    """The resolver with the request checks and the never-500-for-input guarantee.

    It answers concurrent requests from several threads: the per-request state lives in
    :class:`_RequestState`, and the routes' middleware stacks are built once, under a lock,
    before the first request is routed.
    """

    def __init__(
        self,
        *,
        auth: Authenticator,
        metrics: MetricsSink,
        logger: Logger,
        cors: CORSConfig | None,
        max_body_bytes: int,
        deliveries: DeliveryIdClaims | None = None,
    ) -> None:
        # Before ``super().__init__``: it assigns ``context`` and ``processed_stack_frames``.
        self._request = _RequestState()
        self._build_lock = threading.Lock()
        self._stacks_built = 0
        # Validation is added as middlewares of our own (below), so that the request checks
        # run before it: Powertools would otherwise put its validation first.
        super().__init__(
            cors=cors,
            debug=False,
            enable_validation=False,
            json_body_deserializer=strict_json_loads,
        )
        self.auth = auth
        self.metrics = metrics
        self.logger = logger
        self.claims = idempotency.RequestClaims(deliveries, logger)
        checks = RequestChecks(
            routes=self.routes, auth=auth, max_body_bytes=max_body_bytes, cors=cors is not None
        )
        self.use(
            [
                _RequestGate(checks, self.claims),
                OpenAPIRequestValidationMiddleware(),  # type: ignore[no-untyped-call]
                OpenAPIResponseValidationMiddleware(),
            ]
        )
        self._openapi_cache: dict[str, Any] | None = None

    # -- per-thread request state ------------------------------------------------------------

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEventV2:
        """The event of the request this thread is answering."""
        event: APIGatewayProxyEventV2 = self._request.current_event
        return event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEventV2) -> None:
        self._request.current_event = value

    @property
    def lambda_context(self) -> LambdaContext:
        """The Lambda context of the request this thread is answering."""
        context: LambdaContext = self._request.lambda_context
        return context

    @lambda_context.setter
    def lambda_context(self, value: LambdaContext) -> None:
        self._request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        """Powertools' routing context (matched route, its arguments) of this thread."""
        return self._request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value

    @property
    def processed_stack_frames(self) -> list[str]:
        """Powertools' middleware trace of this thread's request."""
        return self._request.processed_stack_frames

    @processed_stack_frames.setter
    def processed_stack_frames(self, value: list[str]) -> None:
        self._request.processed_stack_frames = value

    # -- routes ------------------------------------------------------------------------------

    def routes(self) -> Sequence[Route]:
        """The registered routes, in the order requests are matched against them."""
        return [*self._static_routes, *self._dynamic_routes]

    def _build_middleware_stacks(self) -> None:
        """Build every route's middleware stack once: Powertools builds one on a route's first
        call, and two threads doing it at once would wrap the route twice."""
        routes = self.routes()
        if self._stacks_built == len(routes):
            return
        with self._build_lock:
            for route in routes:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(
                        router_middlewares=self._router_middlewares, app=self
                    )
            self._stacks_built = len(routes)

    # -- entry point -----------------------------------------------------------------------

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        """Answer one API Gateway v2 event; unexpected failures become 500 ``internal_error``."""
        started = time.monotonic()
        request_id = _request_id(event, context)
        self.logger.thread_safe_append_keys(request_id=request_id)
        idempotency.hold(None)
        answer: dict[str, Any] = {}
        try:
            self._build_middleware_stacks()
            event = _normalise_event(event)
            # Powertools sets these on its shared class; this thread reads its own copies.
            self.current_event = APIGatewayProxyEventV2(event, strict_json_loads)
            self.lambda_context = context
            answer = super().resolve(event, context)
        except Exception:
            self.logger.exception("request failed before routing")
            answer = _raw_error(500, "internal_error", "internal error", request_id)
        finally:
            self.metrics.flush()
            self.claims.settle(answer)
        self.logger.info(
            "request",
            extra={
                "method": _method(event),
                "path": _path(event),
                "status": answer.get("statusCode"),
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
            },
        )
        self.logger.thread_safe_remove_keys([*_LOG_KEYS, "request_id"])
        return answer

    # -- OpenAPI -----------------------------------------------------------------------------

    def openapi_document(self) -> dict[str, Any]:
        """The OpenAPI 3.1 document of this API (built once)."""
        if self._openapi_cache is None:
            self._openapi_cache = build_document(self, self.auth.openapi_scheme)
        return self._openapi_cache


def create_app(
    driver: Any,
    admin: Any,
    *,
    auth: Authenticator,
    cors: CORSConfig | None = None,
    metrics: MetricsSink | None = None,
    logger: Logger | None = None,
    wait: WaitPolicy | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    deliveries: DeliveryIdClaims | None = None,
    hand_off: bool = False,
    inline_budget_ms: int = DEFAULT_INLINE_BUDGET_MS,
    checkpoint_capabilities: CapabilitySigner | None = None,
) -> RelayflowResolver:
    """Build the HTTP API over a driver.

    Args:
        driver: A ``relayflow.drivers.WorkflowDriver`` (memory or AWS).
        admin: The matching ``relayflow.drivers.WorkflowAdmin``.
        auth: Who may call: ``BearerTokenAuth``, ``StaticTokenAuth``, ``IamAuth`` or
            ``AllowAllAuth`` (see ``relayflow.api.auth``).
        cors: CORS settings; ``None`` disables CORS headers.
        metrics: Counter sink (EMF on stdout by default).
        logger: Structured logger (a JSON Powertools logger by default).
        wait: Polling policy of ``waitMs`` (clock and sleep injectable).
        max_body_bytes: Bodies over this answer 413 ``payload_too_large``.
        deliveries: Where ``Idempotency-Key``s are claimed (the driver's by default).
        hand_off: Never drive runs in this process: a run that needs driving is handed to
            the drive function and the request waits up to the inline budget for it to
            settle (the deployed api function; see docs/operations/limits.md).
        inline_budget_ms: How long a request drives (or waits for) its run, at most.
        checkpoint_capabilities: Verifies HTTP step hosts' checkpoint capabilities (built
            from the dispatch signing secret); None refuses every checkpoint call.

    Returns:
        The resolver; call ``resolve(event, context)`` with API Gateway v2 events.
    """
    logger = logger or Logger(service="relayflow-api")
    # Powertools' router logs route arguments (request bodies) at DEBUG: payloads and tokens
    # must never reach the logs, whatever level the function runs at.
    logging.getLogger("aws_lambda_powertools.event_handler").setLevel(logging.INFO)
    metrics = metrics or EmfMetrics()
    engine = getattr(driver, "engine", None)
    if engine is not None:
        engine.add_observer(RunMetrics(metrics))
    app = RelayflowResolver(
        auth=auth,
        metrics=metrics,
        logger=logger,
        cors=cors,
        max_body_bytes=max_body_bytes,
        deliveries=deliveries or getattr(driver, "deliveries", None),
    )
    ctx = ApiContext(
        driver=driver,
        admin=admin,
        metrics=metrics,
        logger=logger,
        wait=wait or WaitPolicy(),
        version=__version__,
        hand_off=hand_off,
        inline_budget_ms=inline_budget_ms,
        checkpoint_capabilities=checkpoint_capabilities,
    )
    app.include_router(runs_routes.build_router(ctx))
    app.include_router(bulk_actions_routes.build_router(ctx))
    app.include_router(workflow_pauses_routes.build_router(ctx))
    app.include_router(workflow_stats_routes.build_router(ctx))
    app.include_router(concurrency_routes.build_router(ctx))
    app.include_router(audit_routes.build_router(ctx))
    app.include_router(versions_routes.build_router(ctx))
    app.include_router(checkpoints_routes.build_router(ctx))
    app.include_router(tokens_routes.build_router(ctx))
    app.include_router(events_routes.build_router(ctx))
    app.include_router(manifests_routes.build_router(ctx))
    app.include_router(schedules_routes.build_router(ctx))
    app.include_router(health_routes.build_router(ctx, app.openapi_document))
    app.include_router(stream_routes.build_router(ctx))
    app.include_router(manifest_history_routes.build_router(ctx))
    app.include_router(dashboard_routes.build_router())
    app.include_router(docs_routes.build_router())
    install_error_handlers(app, logger, request_id=_request_id)
    return app


def _normalise_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``event`` with the fields Powertools dereferences present."""
    out = dict(event)
    ctx = dict(out.get("requestContext") or {})
    ctx.setdefault("stage", "$default")
    http = dict(ctx.get("http") or {})
    http.setdefault("method", "GET")
    http.setdefault("path", out.get("rawPath") or "/")
    ctx["http"] = http
    out["requestContext"] = ctx
    out.setdefault("rawPath", http["path"])
    out.setdefault("rawQueryString", "")
    headers = out.get("headers")
    headers = headers if isinstance(headers, Mapping) else {}
    out["headers"] = {str(k).lower(): v for k, v in headers.items()}
    return out


def _request_id(event: Any, context: Any) -> str | None:
    ctx = event.get("requestContext") if isinstance(event, Mapping) else None
    if isinstance(ctx, Mapping) and isinstance(ctx.get("requestId"), str):
        return str(ctx["requestId"])
    rid = getattr(context, "aws_request_id", None)
    return rid if isinstance(rid, str) else None


def _method(event: Any) -> str:
    try:
        return str(event["requestContext"]["http"]["method"])
    except (KeyError, TypeError):
        return ""


def _path(event: Any) -> str:
    return str(event.get("rawPath", "")) if isinstance(event, Mapping) else ""


def _raw_error(status: int, code: str, message: str, request_id: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": code, "message": message}
    if request_id:
        body["requestId"] = request_id
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }
