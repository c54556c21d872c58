"""Lambda entry points: the HTTP API, the drive function (alarms, hand-offs) and the sweeper.

Everything is built on first call from the environment (``Settings.from_env`` +
``build_aws_driver``) and kept for the container's life; ``make_*`` build the same handlers
over an injected factory, for tests and the local stack.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from aws_lambda_powertools import Logger

from relayflow.api.app import RelayflowResolver, create_app
from relayflow.api.drive_events import handle_drive_event
from relayflow.api.metrics import EmfMetrics, MetricsSink
from relayflow.api.settings import ApiSettings
from relayflow.config import Settings, current_settings, import_workflow_modules
from relayflow.dispatch.capabilities import capability_signer
from relayflow.drivers import WorkflowDriver
from relayflow.observability import RunMetrics

T = TypeVar("T")
Handler = Callable[[Any, Any], Any]

_log = Logger(service="relayflow")


class Lazy(Generic[T]):
    """A value built by ``factory`` on first use (thread-safe); a failed build is retried."""

    def __init__(self, factory: Callable[[], T]) -> None:
        """Keep ``factory`` for the first :meth:`get`."""
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value, built now if needed."""
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._factory()
        return self._value


def build_driver_from_env(env: Mapping[str, str] = os.environ) -> WorkflowDriver:
    """The AWS driver of this deployment, configured from ``env``."""
    from relayflow.adapters.aws import build_aws_driver

    import_workflow_modules(env)
    driver: WorkflowDriver = build_aws_driver(Settings.from_env(env))
    return driver


def build_app_from_env(
    env: Mapping[str, str] = os.environ,
    *,
    driver: Callable[[], WorkflowDriver] | None = None,
    metrics: MetricsSink | None = None,
) -> RelayflowResolver:
    """The HTTP API of this deployment: AWS driver, auth and CORS from ``env``.

    The api function drives nothing itself: a run that needs driving is handed to the drive
    function, and a new run is waited for up to the inline budget (README "Time limits").
    """
    api = ApiSettings.from_env(env)
    settings = Settings.from_env(env)
    workflow_driver = driver() if driver is not None else build_driver_from_env(env)
    return create_app(
        workflow_driver,
        workflow_driver.admin,
        auth=api.authenticator(),
        cors=api.cors(),
        metrics=metrics,
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
        return resolver.resolve(event, context)

    return handler


def make_drive_handler(
    factory: Callable[[], WorkflowDriver],
    *,
    metrics: MetricsSink | None = None,
    settings: Callable[[], Settings] = current_settings,
) -> Handler:
    """The drive function: alarms, hand-offs and schedule firings, directly or as SQS
    batches (see :mod:`relayflow.api.drive_events`), within ``drive_budget_ms`` capped by the
    function's remaining time less ``lambda_margin_ms``."""
    sink = Lazy(lambda: metrics or EmfMetrics(service="relayflow-drive"))
    driver = Lazy(lambda: _observed(factory(), sink.get()))

    def handler(event: Any, context: Any) -> dict[str, Any]:
        engine = driver.get().engine
        config = settings()
        try:
            with engine.budget(config.budget_ms(config.drive_budget_ms, context)):
                return handle_drive_event(driver.get(), event, context, sink.get())
        finally:
            sink.get().flush()

    return handler


def make_sweeper_handler(
    factory: Callable[[], WorkflowDriver],
    *,
    metrics: MetricsSink | None = None,
    settings: Callable[[], Settings] = current_settings,
) -> Handler:
    """The sweeper: re-drives runs whose wake time passed (a missed alarm, a dead driver),
    within ``sweep_budget_ms`` capped by the function's remaining time less the margin."""
    sink = Lazy(lambda: metrics or EmfMetrics(service="relayflow-sweeper"))
    driver = Lazy(lambda: _observed(factory(), sink.get()))

    def handler(event: Any, context: Any) -> dict[str, Any]:
        engine = driver.get().engine
        config = settings()
        try:
            with engine.budget(config.budget_ms(config.sweep_budget_ms, context)):
                swept = engine.sweep()
        finally:
            sink.get().flush()
        _log.info("sweep finished", extra={"runs": len(swept)})
        return {"swept": swept}

    return handler


def _observed(driver: WorkflowDriver, sink: MetricsSink) -> WorkflowDriver:
    """``driver`` with its engine counting run ends and step retries into ``sink``."""
    driver.engine.add_observer(RunMetrics(sink))
    return driver


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


_driver = Lazy(build_driver_from_env)

#: API Gateway entry point of the ``api`` function.
lambda_handler = make_lambda_handler(lambda: build_app_from_env(driver=_driver.get))
#: Entry point of the ``drive`` function (alarms and hand-offs).
drive_handler = make_drive_handler(_driver.get)
#: Entry point of the ``sweeper`` function.
sweeper_handler = make_sweeper_handler(_driver.get)
