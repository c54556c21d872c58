"""OpenAPI response declarations shared by the routers (every error response has a model)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from relayflow.api.models import ErrorResponse

#: What each error status means in this API (the ``error`` codes it can carry).
ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "invalid_json, invalid_body or invalid_query: the request is malformed",
    401: "unauthorized: missing, unknown or expired credentials",
    403: "forbidden: the token lacks the scope this route needs",
    404: "not_found: no such run (or manifest)",
    409: "already_terminal, run_terminal or not_parked: the run cannot take this request now",
    413: "payload_too_large: the body is over 256 KiB",
    415: "unsupported_media_type: the body is not application/json",
    500: "internal_error: an unexpected failure (the body carries the request id)",
    502: "trigger_failed_for_all_matches: every matching filter failed to start its run",
    503: "unavailable: the service is shutting down",
}

#: Errors any authenticated route with a JSON body can answer.
BODY_ERRORS = (400, 401, 403, 413, 415, 500)
#: Errors any authenticated route without a body can answer.
READ_ERRORS = (400, 401, 403, 500)


def json_content(model: Any) -> dict[str, Any]:
    """The ``content`` of a JSON response described by ``model``."""
    return {"application/json": {"model": model}}


def declare(
    status: int, model: Any, description: str, *errors: int, extra: dict[int, str] | None = None
) -> dict[int, OpenAPIResponse]:
    """The responses of one operation: its success, then each error status with the error model.

    ``extra`` adds other success statuses (same model) with their descriptions.
    """
    out: dict[int, OpenAPIResponse] = {
        status: {"description": description, "content": json_content(model)}
    }
    for other, text in (extra or {}).items():
        out[other] = {"description": text, "content": json_content(model)}
    for code in sorted(set(errors)):
        out[code] = {
            "description": ERROR_DESCRIPTIONS[code],
            "content": json_content(ErrorResponse),
        }
    return out
