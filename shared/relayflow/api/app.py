"""The HTTP API as a Powertools ``APIGatewayHttpResolver``, built from an injected driver.

:func:`create_app` wires the routers (runs, events, manifests, health), the exception map,
authentication and the request checks that must run before routing: size, encoding, JSON,
method and scope. Nothing a client sends can produce a 500 or a stack trace.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, CORSConfig, Response
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.typing import LambdaContext

from relayflow import __version__
from relayflow.api import idempotency
from relayflow.api.auth import Authenticator, Principal
from relayflow.api.context import (
    DEFAULT_INLINE_BUDGET_MS,
    MAX_BODY_BYTES,
    ApiContext,
    WaitPolicy,
)
from relayflow.api.error_handlers import install_error_handlers
from relayflow.api.errors import (
    ApiError,
    ForbiddenError,
)
from relayflow.api.metrics import EmfMetrics, MetricsSink
from relayflow.api.openapi import tidy_openapi
from relayflow.api.routes import checkpoints as checkpoints_routes
from relayflow.api.routes import dashboard as dashboard_routes
from relayflow.api.routes import events as events_routes
from relayflow.api.routes import health as health_routes
from relayflow.api.routes import manifest_history as manifest_history_routes
from relayflow.api.routes import manifests as manifests_routes
from relayflow.api.routes import runs as runs_routes
from relayflow.api.routes import schedules as schedules_routes
from relayflow.api.routes import stream as stream_routes
from relayflow.api.routes import tokens as tokens_routes
from relayflow.deliveries import (
    Deliveries,
    IdempotencyKeyReusedError,
    Replay,
    RequestInProgressError,
)
from relayflow.dispatch.capabilities import CAPABILITY_HEADER, CapabilitySigner
from relayflow.errors import RelayflowError
from relayflow.observability import RunMetrics
from relayflow.protocol import MAX_JSON_DEPTH, json_depth, strict_json_loads

SECURITY_SCHEME = "bearerAuth"
#: How a step host's checkpoint call proves itself (``relayflow.dispatch.capabilities``).
CAPABILITY_SCHEME = "checkpointCapability"
CAPABILITY_SECURITY: dict[str, Any] = {
    "type": "apiKey",
    "in": "header",
    "name": CAPABILITY_HEADER,
    "description": "the capability of the step request whose invocation writes the checkpoint",
}
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
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


class RelayflowResolver(APIGatewayHttpResolver):
    """The resolver with the pre-routing checks and the never-500-for-input guarantee.

    It answers concurrent requests from several threads: the per-request state lives in
    :class:`_RequestState`, and each route's middleware stack is built once under a lock.
    """

    def __init__(
        self,
        *,
        auth: Authenticator,
        metrics: MetricsSink,
        logger: Logger,
        cors: CORSConfig | None,
        max_body_bytes: int,
        deliveries: Deliveries | None = None,
    ) -> None:
        # Before ``super().__init__``: it assigns ``context`` and ``processed_stack_frames``.
        self._request = _RequestState()
        self._build_lock = threading.Lock()
        super().__init__(
            cors=cors,
            debug=False,
            enable_validation=True,
            json_body_deserializer=strict_json_loads,
        )
        self.auth = auth
        self.metrics = metrics
        self.logger = logger
        self.max_body_bytes = max_body_bytes
        self.deliveries = deliveries
        self._openapi_cache: dict[str, Any] | None = None
        # The key a request holds while it runs (requests may be served on several threads).

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

    # -- entry point -----------------------------------------------------------------------

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        """Answer one API Gateway v2 event; unexpected failures become 500 ``internal_error``."""
        started = time.monotonic()
        request_id = _request_id(event, context)
        self.logger.thread_safe_append_keys(request_id=request_id)
        idempotency.hold(None)
        try:
            event = _normalise_event(event)
            # Powertools sets these on its shared class; this thread reads its own copies.
            self.current_event = cast(APIGatewayProxyEventV2, self._to_proxy_event(event))
            self.lambda_context = context
            answer = super().resolve(event, context)
        except Exception:
            self.logger.exception("request failed before routing")
            answer = _raw_error(500, "internal_error", "internal error", request_id)
        finally:
            self.metrics.flush()
            self._settle_claim(answer if "answer" in locals() else {})
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

    def _resolve(self) -> ResponseBuilder[Any]:
        method = self.current_event.http_method.upper()
        path = self._remove_prefix(self.current_event.path)
        try:
            principal = self._check_request(method, path)
            replay = self._claim(method, path, principal)
        except ApiError as exc:
            return self._answer_error(method, path, exc)
        if replay is not None:
            return self._answer_replay(method, path, replay)
        return super()._resolve()

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder[Any]:
        # Powertools builds a route's middleware stack on its first call; two threads doing
        # it at once would wrap the route twice.
        if not route._middleware_stack_built:
            with self._build_lock:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(
                        router_middlewares=self._router_middlewares, app=self
                    )
        return super()._call_route(route, route_arguments)

    # -- Idempotency-Key -------------------------------------------------------------------

    def _claim(self, method: str, path: str, principal: Principal | None) -> Replay | None:
        """Claim the request's key; the first answer when it was answered before."""
        if self.deliveries is None or method != "POST" or path.startswith("/api/manifests"):
            return None
        try:
            claim = idempotency.request_key(
                method,
                path,
                self.current_event.headers,
                self.current_event.json_body if self.current_event.get("body") else None,
                principal.name if principal is not None else "-",
            )
        except idempotency.KeyProblem as exc:
            raise ApiError(400, "invalid_idempotency_key", str(exc)) from None
        if claim is None:
            return None
        try:
            replay = self.deliveries.begin(
                claim.scope, claim.key, claim.digest, lifelong=claim.lifelong
            )
        except IdempotencyKeyReusedError as exc:
            raise ApiError(422, exc.code, exc.message) from None
        except RequestInProgressError as exc:
            raise ApiError(409, exc.code, exc.message, headers={"Retry-After": "1"}) from None
        if replay is not None and not idempotency.is_http_answer(replay):
            # Delivered before by the driver directly: the driver answers the repeat.
            return None
        if replay is None:
            idempotency.hold(claim)
        return replay

    def _settle_claim(self, answer: Mapping[str, Any]) -> None:
        """Store a 2xx answer on the request's key, or give the key up."""
        claim = idempotency.held()
        idempotency.hold(None)
        if claim is None or self.deliveries is None:
            return
        stored = idempotency.stored_answer(answer)
        if stored is not None:
            stored.update(claim.extra)
        try:
            if stored is None:
                self.deliveries.abandon(claim.scope, claim.key, claim.digest)
            else:
                self.deliveries.finish(
                    claim.scope, claim.key, claim.digest, stored, lifelong=claim.lifelong
                )
        except RelayflowError:
            # The answer is already decided; an unrecorded key is claimable after its hold.
            self.logger.exception("the idempotency key could not be settled")

    def _answer_replay(self, method: str, path: str, replay: Replay) -> ResponseBuilder[Any]:
        status, content_type, body = idempotency.replayed(replay)

        def again() -> Response[Any]:
            return Response(
                status_code=status,
                content_type=content_type,
                body=body,
                headers={idempotency.REPLAYED_HEADER: "true"},
            )

        route = Route(
            method=method,
            path=path,
            rule=self._compile_regex(r".*"),
            func=again,
            cors=self._cors_enabled,
            compress=False,
            enable_validation=False,
        )
        self.append_context(_route=route, _path=path)  # type: ignore[no-untyped-call]
        return self._call_route(route=route, route_arguments={})

    # -- pre-routing checks ----------------------------------------------------------------

    def _check_request(self, method: str, path: str) -> Principal | None:
        """Refuse what must not reach a route; returns the authenticated caller, if any."""
        route, others = self._match(method, path)
        if route is None and not others:
            raise ApiError(404, "route_not_found", f"no route for {method} {path}")
        if route is None and method == "OPTIONS" and self._cors_enabled:
            return None  # the resolver answers the CORS preflight itself
        secured = [r for r in ([route] if route else others) if _needs_credentials(r)]
        principal = self._authenticate() if secured else None
        if route is None:
            allowed = ", ".join(sorted({r.method for r in others}))
            raise ApiError(
                405,
                "method_not_allowed",
                f"{method} is not allowed on {path}; use {allowed}",
                headers={"Allow": allowed},
            )
        if principal is not None:
            self._authorise(route, principal)
        if method in _BODY_METHODS:
            self._check_body(route)
        return principal

    def _match(self, method: str, path: str) -> tuple[Route | None, list[Route]]:
        """The route of (method, path), and the routes of the path with other methods."""
        others: list[Route] = []
        for route in self._static_routes + self._dynamic_routes:
            if route.rule.match(path):
                if route.method == method:
                    return route, []
                others.append(route)
        return None, others

    def _authenticate(self) -> Principal:
        headers = dict(self.current_event.get("headers") or {})
        context = self.current_event.get("requestContext") or {}
        return self.auth.authenticate(headers, context)

    def _authorise(self, route: Route, principal: Principal) -> None:
        for requirement in route.security or []:
            for scope in requirement.get(SECURITY_SCHEME, []):
                if not principal.allows(scope):
                    raise ForbiddenError(f"this token lacks the '{scope}' scope")

    def _check_body(self, route: Route) -> None:
        raw = self.current_event.get("body")
        if raw is None or raw == "":
            # An empty body is no JSON; only routes whose body is optional (cancel, token
            # completion, heartbeat) take one, as the reference's cancel does.
            if _requires_body(route):
                raise ApiError(400, "invalid_json", "request body is empty; send a JSON object")
            return
        if not isinstance(raw, str):
            raise ApiError(400, "invalid_json", "request body must be JSON text")
        data: bytes
        if self.current_event.get("isBase64Encoded"):
            try:
                data = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise ApiError(400, "invalid_json", "request body is not valid base64") from None
        else:
            data = raw.encode("utf-8", errors="surrogatepass")
        if len(data) > self.max_body_bytes:
            raise ApiError(
                413,
                "payload_too_large",
                f"request body is {len(data)} bytes; the limit is {self.max_body_bytes} bytes",
            )
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "invalid_json", "request body is not UTF-8 text") from None
        content_type = (self.current_event.headers.get("content-type") or "").strip().lower()
        if content_type and not content_type.startswith("application/json"):
            raise ApiError(
                415, "unsupported_media_type", "request body must be sent as application/json"
            )
        try:
            body = self.current_event.json_body
        except (ValueError, RecursionError, UnicodeDecodeError) as exc:
            raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None
        if json_depth(body) > MAX_JSON_DEPTH:
            raise ApiError(
                400, "invalid_body", f"request body nests deeper than {MAX_JSON_DEPTH} levels"
            )

    def _answer_error(self, method: str, path: str, exc: ApiError) -> ResponseBuilder[Any]:
        def refuse() -> Response[Any]:
            raise exc

        route = Route(
            method=method,
            path=path,
            rule=self._compile_regex(r".*"),
            func=refuse,
            cors=self._cors_enabled,
            compress=False,
            enable_validation=False,
        )
        self.append_context(_route=route, _path=path)  # type: ignore[no-untyped-call]
        return self._call_route(route=route, route_arguments={})

    # -- OpenAPI -----------------------------------------------------------------------------

    def openapi_document(self) -> dict[str, Any]:
        """The OpenAPI 3.1 document of this API (built once)."""
        if self._openapi_cache is None:
            text = self.get_openapi_json_schema(
                title="relayflow API",
                version=__version__,
                description=(
                    "Start and inspect durable workflow runs, deliver events, signals and "
                    "tokens, and register event manifests. Errors are always "
                    '{"error": code, "message": text}.'
                ),
                security_schemes={
                    SECURITY_SCHEME: self.auth.openapi_scheme,  # type: ignore[dict-item]
                    CAPABILITY_SCHEME: CAPABILITY_SECURITY,  # type: ignore[dict-item]
                },
            )
            self._openapi_cache = tidy_openapi(json.loads(text))
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
    deliveries: Deliveries | None = None,
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
            settle (the deployed api function; see README "Time limits").
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
    app.include_router(checkpoints_routes.build_router(ctx))
    app.include_router(tokens_routes.build_router(ctx))
    app.include_router(events_routes.build_router(ctx))
    app.include_router(manifests_routes.build_router(ctx))
    app.include_router(schedules_routes.build_router(ctx))
    app.include_router(health_routes.build_router(ctx, app.openapi_document))
    app.include_router(stream_routes.build_router(ctx))
    app.include_router(manifest_history_routes.build_router(ctx))
    app.include_router(dashboard_routes.build_router())
    install_error_handlers(app, logger, request_id=_request_id)
    return app


def _needs_credentials(route: Route) -> bool:
    """True when ``route`` asks for the API's credentials (not a capability of its own)."""
    return any(SECURITY_SCHEME in requirement for requirement in route.security or [])


def _requires_body(route: Route) -> bool:
    """True when ``route`` declares a body parameter without a default."""
    return any(param.required for param in route.dependant.body_params)


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
