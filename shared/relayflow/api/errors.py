"""The one exception map of the HTTP API: domain errors and request errors to status + body.

Every refusal the API gives is ``{"error": code, "message": ...}`` built here; routes raise
typed errors and never pick a status themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from relayflow.api.models import ErrorResponse, FieldProblem
from relayflow.concurrency_admin import NotConcurrencyLimitedError, RunStillActiveError
from relayflow.core.inbox import InboxFullError
from relayflow.deliveries import IdempotencyKeyReusedError, RequestInProgressError
from relayflow.errors import (
    DriverShutdownError,
    NotParkedError,
    RelayflowError,
    RunActionConflictError,
    RunAlreadyExistsError,
    RunNotFoundError,
    RunTerminalError,
    ScheduleNotFoundError,
    StaleRunError,
    StaleScheduleError,
    StepNotFoundError,
    TokenNotFoundError,
    ValidationError,
    VersionNotFoundError,
    WorkflowNotFoundError,
)
from relayflow.events.errors import EventTooLargeError, InvalidEventError, ManifestValidationError
from relayflow.flow.errors import FlowKeyMissingError


class ApiError(RelayflowError):
    """A refusal decided by the HTTP layer itself (bad JSON, auth, routing, size).

    Attributes:
        status: The HTTP status to answer with.
        code: The stable error code of the body.
        details: Optional JSON details (never request payloads).
        headers: Extra response headers (``Allow`` on 405, ``WWW-Authenticate`` on 401).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, code=code, data=details)
        self.status = status
        self.details = details
        self.headers = dict(headers or {})


class UnauthorizedError(ApiError):
    """The request carries no valid credentials (401)."""

    def __init__(self, message: str) -> None:
        super().__init__(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


class ForbiddenError(ApiError):
    """The credentials are valid but lack the scope the route needs (403)."""

    def __init__(self, message: str) -> None:
        super().__init__(403, "forbidden", message)


#: Domain errors and the HTTP answer each one gets; the first matching class wins. A code of
#: ``None`` keeps the error's own code (``RunTerminalError`` says ``already_terminal`` on
#: cancel and ``run_terminal`` on injections).
DOMAIN_ERRORS: tuple[tuple[type[RelayflowError], int, str | None], ...] = (
    (RunNotFoundError, 404, "not_found"),
    (ScheduleNotFoundError, 404, "not_found"),
    (StaleScheduleError, 409, "conflict"),
    (TokenNotFoundError, 404, "token_not_found"),
    (RunTerminalError, 409, None),
    (RunActionConflictError, 409, None),
    (StepNotFoundError, 400, None),
    (RunStillActiveError, 409, None),
    (NotConcurrencyLimitedError, 409, None),
    (NotParkedError, 409, "not_parked"),
    (InboxFullError, 409, "inbox_full"),
    (WorkflowNotFoundError, 404, "workflow_not_found"),
    (VersionNotFoundError, 409, "version_not_found"),
    (EventTooLargeError, 413, "payload_too_large"),
    (InvalidEventError, 400, None),
    (ManifestValidationError, 400, "invalid_body"),
    (FlowKeyMissingError, 400, None),
    (ValidationError, 400, "invalid_body"),
    (StaleRunError, 409, "conflict"),
    (RunAlreadyExistsError, 409, "run_exists"),
    (DriverShutdownError, 503, "unavailable"),
    (IdempotencyKeyReusedError, 422, None),
    (RequestInProgressError, 409, None),
)


def domain_error_answer(exc: RelayflowError) -> tuple[int, str, str] | None:
    """The (status, code, message) of a domain error, or None when it is not the client's doing.

    Errors of backing services that say they are ``transient`` (throttling, timeouts) answer
    503 ``unavailable`` so the client retries; anything else unknown is an internal error.
    """
    for cls, status, code in DOMAIN_ERRORS:
        if isinstance(exc, cls):
            chosen = code or exc.code
            return status, chosen, exc.message or chosen
    if getattr(exc, "transient", False) is True:
        # The message of a backing-service failure names internal resources: keep it in logs.
        return 503, "unavailable", "a backing service is busy; retry shortly"
    return None


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    request_id: str | None = None,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Response[Any]:
    """Build the ``{"error", "message"}`` response every refusal uses."""
    body = ErrorResponse(error=code, message=message, request_id=request_id, details=details)
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.to_wire(),
        headers=dict(headers or {}),
    )


def describe_validation_errors(
    errors: Sequence[Mapping[str, Any]],
) -> tuple[str, str, list[FieldProblem]]:
    """Turn pydantic/Powertools validation errors into (code, message, problems).

    The message names the first offending field; values sent by the client are never echoed.
    """
    if any(err.get("type") == "json_invalid" for err in errors):
        return "invalid_json", "request body is not valid JSON", []
    problems: list[FieldProblem] = []
    for err in errors:
        loc = [str(part) for part in err.get("loc", ())]
        where = loc[0] if loc else "body"
        field = ".".join(loc[1:]) if len(loc) > 1 else ""
        problems.append(FieldProblem(location=where, field=field, problem=_reason(err)))
    if not problems:
        return "invalid_body", "request is invalid", problems
    first = problems[0]
    code = "invalid_query" if first.location == "query" else "invalid_body"
    label = {"body": "body field", "query": "query parameter", "path": "path parameter"}.get(
        first.location, first.location
    )
    if first.field:
        message = f"{label} '{first.field}': {first.problem}"
    else:
        message = f"request {first.location}: {first.problem}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more)"
    return code, message, problems


def _reason(err: Mapping[str, Any]) -> str:
    """A short reason for one validation error, without the rejected value."""
    kind = str(err.get("type", ""))
    if kind == "missing":
        return "field required"
    if kind == "extra_forbidden":
        return "unknown field"
    msg = err.get("msg")
    if isinstance(msg, str) and msg:
        # pydantic messages describe the expectation ("Input should be a valid string"),
        # never the rejected input, so they are safe to return.
        return msg[0].lower() + msg[1:]
    return kind.replace("_", " ") or "invalid value"


def status_phrase(status: int) -> str:
    """The standard reason phrase of a status code (for log lines)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return str(status)
