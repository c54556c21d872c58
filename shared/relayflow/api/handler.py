"""The api function's handler: the HTTP API of a deployment, built on first call from the
environment (``Settings.from_env`` + ``build_aws_driver``) and kept for the container's life;
:func:`make_lambda_handler` builds it over an injected factory, for tests and the local stack.

The deployed entry points are in :mod:`relayflow.entrypoints`; ``lambda_handler``,
``drive_handler`` and ``sweeper_handler`` here are deprecated aliases of them.
"""

from __future__ import annotations

import importlib
import json
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger

from relayflow.api.app import RelayflowResolver, create_app
from relayflow.api.metrics import EmfMetrics, MetricsSink
from relayflow.api.settings import ApiSettings
from relayflow.config import Settings
from relayflow.deployment import Handler, Lazy, build_driver_from_env
from relayflow.dispatch.capabilities import capability_signer
from relayflow.drivers import WorkflowDriver
from relayflow.tracing.process import flush_spans

_log = Logger(service="relayflow")


def build_app_from_env(
    env: Mapping[str, str] = os.environ,
    *,
    driver: Callable[[], WorkflowDriver] | None = None,
    metrics: MetricsSink | None = None,
) -> RelayflowResolver:
    """The HTTP API of this deployment: AWS driver, auth and CORS from ``env``.

    The api function drives nothing itself: a run that needs driving is handed to the drive
    function, and a new run is waited for up to the inline budget (docs/operations/limits.md).
    """
    api = ApiSettings.from_env(env)
    settings = Settings.from_env(env)
    workflow_driver = driver() if driver is not None else build_driver_from_env(env)
    return create_app(
        workflow_driver,
        workflow_driver.admin,
        auth=api.authenticator(),
        cors=api.cors(),
        metrics=metrics or EmfMetrics(environment=settings.deployment_name),
        hand_off=True,
        inline_budget_ms=settings.inline_drive_budget_ms,
        checkpoint_capabilities=capability_signer(settings),
    )


def make_lambda_handler(factory: Callable[[], RelayflowResolver]) -> Handler:
    """An API Gateway (HTTP API v2) handler serving the app ``factory`` builds on first call.

    When the app cannot be built (bad configuration), the request answers 500
    ``internal_error`` and the next request tries again.
    """
    app = Lazy(factory)

    def handler(event: Any, context: Any) -> dict[str, Any]:
        try:
            resolver = app.get()
        except Exception:
            _log.exception("the API could not be configured")
            return _internal_error(event, context)
        try:
            return resolver.resolve(event, context)
        finally:
            flush_spans()

    return handler


def _internal_error(event: Any, context: Any) -> dict[str, Any]:
    request_id = None
    if isinstance(event, Mapping):
        ctx = event.get("requestContext")
        if isinstance(ctx, Mapping):
            request_id = ctx.get("requestId")
    request_id = request_id or getattr(context, "aws_request_id", None)
    body: dict[str, Any] = {"error": "internal_error", "message": "internal error"}
    if isinstance(request_id, str):
        body["requestId"] = request_id
    return {
        "statusCode": 500,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


_MOVED = {
    "lambda_handler": ("relayflow.entrypoints.api", "lambda_handler"),
    "drive_handler": ("relayflow.entrypoints.drive", "lambda_handler"),
    "sweeper_handler": ("relayflow.entrypoints.sweeper", "lambda_handler"),
    "make_drive_handler": ("relayflow.drive.handlers", "make_drive_handler"),
    "make_sweeper_handler": ("relayflow.drive.handlers", "make_sweeper_handler"),
}


def __getattr__(name: str) -> Any:
    """The entry points that moved to :mod:`relayflow.entrypoints`, with a warning."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _MOVED[name]
    warnings.warn(
        f"relayflow.api.handler.{name} moved to {module_name}.{attribute}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module_name), attribute)
