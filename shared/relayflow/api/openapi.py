"""The OpenAPI document as the API really behaves: what Powertools generates, fitted.

Powertools builds the document from the routes' pydantic annotations (:func:`build_document`);
:func:`tidy_openapi` then fits it to what the resolver enforces before routing (the
``Idempotency-Key`` header and its answers, 400 instead of 422) and adds the bodies validated
outside pydantic.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from pydantic.json_schema import models_json_schema

from relayflow import __version__
from relayflow.api import idempotency
from relayflow.api.models import COMPONENT_REF, DOCUMENTED_BODIES
from relayflow.api.request_checks import SECURITY_SCHEME
from relayflow.dispatch.capabilities import CAPABILITY_HEADER

#: How a step host's checkpoint call proves itself (``relayflow.dispatch.capabilities``).
CAPABILITY_SCHEME = "checkpointCapability"
CAPABILITY_SECURITY: dict[str, Any] = {
    "type": "apiKey",
    "in": "header",
    "name": CAPABILITY_HEADER,
    "description": "the capability of the step request whose invocation writes the checkpoint",
}
DESCRIPTION = (
    "Start and inspect durable workflow runs, deliver events, signals and tokens, and "
    'register event manifests. Errors are always {"error": code, "message": text}.'
)


def build_document(app: APIGatewayHttpResolver, auth_scheme: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``app``'s routes; ``auth_scheme`` is how callers
    authenticate (the authenticator's security scheme)."""
    text = app.get_openapi_json_schema(
        title="relayflow API",
        version=__version__,
        description=DESCRIPTION,
        security_schemes={
            SECURITY_SCHEME: auth_scheme,  # type: ignore[dict-item]
            CAPABILITY_SCHEME: CAPABILITY_SECURITY,  # type: ignore[dict-item]
        },
    )
    return tidy_openapi(json.loads(text))


def tidy_openapi(doc: dict[str, Any]) -> dict[str, Any]:
    """Fit the generated document to what the API really answers.

    Powertools declares a 422 on every validated operation; this API answers 400 instead
    (declared with the error model), so the 422s and their schemas go. Bodies validated by
    the events module reference their documentation models, added here as components.
    """
    for path, operations in doc.get("paths", {}).items():
        for method, operation in operations.items():
            operation.get("responses", {}).pop("422", None)
            if method == "post" and not path.startswith("/api/manifests"):
                _declare_idempotency(operation)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    _, extra = models_json_schema(
        [(model, "validation") for model in DOCUMENTED_BODIES],
        ref_template=COMPONENT_REF + "{model}",
    )
    for name, schema in extra.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    return doc


def _declare_idempotency(operation: dict[str, Any]) -> None:
    """Document the ``Idempotency-Key`` header and its answers on a run-changing ``POST``."""
    error = {"application/json": {"schema": {"$ref": COMPONENT_REF + "ErrorResponse"}}}
    operation.setdefault("parameters", []).append(
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": (
                "makes the request retry-safe: a repeat with the same key and body gets the "
                "first 2xx answer again, marked Idempotent-Replayed: true; printable ASCII "
                "without spaces"
            ),
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": idempotency.MAX_KEY_LENGTH,
                "pattern": idempotency.KEY_PATTERN,
            },
        }
    )
    responses = operation.setdefault("responses", {})
    responses["422"] = {
        "description": "idempotency_key_reused: the key was used with another request",
        "content": error,
    }
    conflict = responses.get("409")
    note = "request_in_progress: the first request with this key has not answered yet"
    if conflict is None:
        responses["409"] = {"description": note, "content": error}
    else:
        conflict["description"] = f"{conflict.get('description', '')}; {note}".lstrip("; ")
