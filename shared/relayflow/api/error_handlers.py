"""The resolver's one exception map: every refusal becomes ``{"error", "message"}``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from relayflow.api.errors import (
    ApiError,
    describe_validation_errors,
    domain_error_answer,
    error_response,
)
from relayflow.errors import RelayflowError


def install_error_handlers(
    app: APIGatewayHttpResolver,
    logger: Logger,
    *,
    request_id: Callable[[Any, Any], str | None],
) -> None:
    """Register the one exception map: every refusal becomes ``{"error", "message"}``."""

    def current_request_id() -> str | None:
        return request_id(app.current_event.raw_event, app.lambda_context)

    def api_error(exc: ApiError) -> Response[Any]:
        return error_response(
            exc.status,
            exc.code,
            exc.message,
            request_id=current_request_id(),
            details=exc.details,
            headers=exc.headers,
        )

    def invalid_request(exc: RequestValidationError) -> Response[Any]:
        code, message, problems = describe_validation_errors(exc.errors())
        details = [p.to_wire() for p in problems] or None
        return error_response(400, code, message, request_id=current_request_id(), details=details)

    def unsupported(exc: RequestUnsupportedContentType) -> Response[Any]:
        return error_response(
            415,
            "unsupported_media_type",
            "request body must be sent as application/json",
            request_id=current_request_id(),
        )

    def domain_error(exc: RelayflowError) -> Response[Any]:
        answer = domain_error_answer(exc)
        if answer is None:
            return internal(exc)
        status, code, message = answer
        if status >= 500:
            logger.warning("request refused by a backing service", extra={"error_code": exc.code})
        details = exc.data if isinstance(exc.data, dict) and "errors" in exc.data else None
        return error_response(
            status, code, message, request_id=current_request_id(), details=details
        )

    def internal(exc: Exception) -> Response[Any]:
        logger.exception("unhandled error while answering a request")
        return error_response(
            500,
            "internal_error",
            "internal error; quote the request id",
            request_id=current_request_id(),
        )

    handlers: list[tuple[type[Exception], Callable[[Any], Response[Any]]]] = [
        (ApiError, api_error),
        (RequestValidationError, invalid_request),
        (RequestUnsupportedContentType, unsupported),
        (RelayflowError, domain_error),
        (Exception, internal),
    ]
    for exc_type, handler in handlers:
        app.exception_handler(exc_type)(handler)
