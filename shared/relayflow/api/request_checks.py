"""What a request must pass before its route's validation and handler run.

A route must exist for the path and method (404 ``route_not_found``, 405 with ``Allow``), the
caller must be authenticated and hold the route's scopes (401, 403), and a body must be JSON
of bounded size, encoding and depth (400, 413, 415). The checks run as the first middleware of
every route, before Powertools validates the request (see :mod:`relayflow.api.app`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from relayflow.api.auth import Authenticator, Principal
from relayflow.api.errors import ApiError, ForbiddenError
from relayflow.protocol import MAX_JSON_DEPTH, json_depth

#: The security scheme of the API's credentials in the OpenAPI document.
SECURITY_SCHEME = "bearerAuth"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class RequestChecks:
    """The checks of one API: its routes (read when a request comes), its authenticator and
    its body limit."""

    routes: Callable[[], Sequence[Route]]
    auth: Authenticator
    max_body_bytes: int
    cors: bool

    def check(self, event: APIGatewayProxyEventV2) -> Principal | None:
        """Refuse what must not reach a route; returns the authenticated caller, if any.

        Raises:
            ApiError: The request is refused (the answer's status and code).
        """
        method = event.http_method.upper()
        path = event.path
        route, others = self._match(method, path)
        if route is None and not others:
            raise ApiError(404, "route_not_found", f"no route for {method} {path}")
        if route is None and method == "OPTIONS" and self.cors:
            return None  # the resolver answers the CORS preflight itself
        secured = [r for r in ([route] if route else others) if needs_credentials(r)]
        principal = self._authenticate(event) if secured else None
        if route is None:
            allowed = ", ".join(sorted({r.method for r in others}))
            raise ApiError(
                405,
                "method_not_allowed",
                f"{method} is not allowed on {path}; use {allowed}",
                headers={"Allow": allowed},
            )
        if principal is not None:
            _authorise(route, principal)
        if method in _BODY_METHODS:
            self._check_body(event, route)
        return principal

    def _match(self, method: str, path: str) -> tuple[Route | None, list[Route]]:
        """The route of (method, path), and the routes of the path with other methods."""
        others: list[Route] = []
        for route in self.routes():
            if route.rule.match(path):
                if route.method == method:
                    return route, []
                others.append(route)
        return None, others

    def _authenticate(self, event: APIGatewayProxyEventV2) -> Principal:
        headers: Mapping[str, Any] = dict(event.get("headers") or {})
        context: Mapping[str, Any] = event.get("requestContext") or {}
        return self.auth.authenticate(headers, context)

    def _check_body(self, event: APIGatewayProxyEventV2, route: Route) -> None:
        raw = event.get("body")
        if raw is None or raw == "":
            # An empty body is no JSON; only routes whose body is optional (cancel, token
            # completion, heartbeat) take one, as the reference's cancel does.
            if _requires_body(route):
                raise ApiError(400, "invalid_json", "request body is empty; send a JSON object")
            return
        if not isinstance(raw, str):
            raise ApiError(400, "invalid_json", "request body must be JSON text")
        data: bytes
        if event.get("isBase64Encoded"):
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
        content_type = (event.headers.get("content-type") or "").strip().lower()
        if content_type and not content_type.startswith("application/json"):
            raise ApiError(
                415, "unsupported_media_type", "request body must be sent as application/json"
            )
        try:
            body = event.json_body
        except (ValueError, RecursionError, UnicodeDecodeError) as exc:
            raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None
        if json_depth(body) > MAX_JSON_DEPTH:
            raise ApiError(
                400, "invalid_body", f"request body nests deeper than {MAX_JSON_DEPTH} levels"
            )


def needs_credentials(route: Route) -> bool:
    """True when ``route`` asks for the API's credentials (not a capability of its own)."""
    return any(SECURITY_SCHEME in requirement for requirement in route.security or [])


def _authorise(route: Route, principal: Principal) -> None:
    for requirement in route.security or []:
        for scope in requirement.get(SECURITY_SCHEME, []):
            if not principal.allows(scope):
                raise ForbiddenError(f"this token lacks the '{scope}' scope")


def _requires_body(route: Route) -> bool:
    """True when ``route`` declares a body parameter without a default."""
    return any(param.required for param in route.dependant.body_params)
