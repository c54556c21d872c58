"""The drive and sweeper functions' handlers, built over an injected driver factory (the
deployment's in Lambda, a local one in the dev stack and tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from relayflow.api.metrics import EmfMetrics, MetricsSink
from relayflow.config import Settings, current_settings
from relayflow.deployment import Handler, Lazy
from relayflow.drive.events import handle_drive_event
from relayflow.drivers import WorkflowDriver
from relayflow.observability import RunMetrics
from relayflow.tracing.process import flush_spans

_log = Logger(service="relayflow")


def make_drive_handler(
    factory: Callable[[], WorkflowDriver],
    *,
    metrics: MetricsSink | None = None,
    settings: Callable[[], Settings] = current_settings,
) -> Handler:
    """The drive function: alarms, hand-offs and schedule firings, directly or as SQS
    batches (see :mod:`relayflow.drive.events`), within ``drive_budget_ms`` capped by the
    function's remaining time less ``lambda_margin_ms``."""
    return _budgeted(
        factory,
        metrics=metrics,
        settings=settings,
        service="relayflow-drive",
        budget_ms=lambda config: config.drive_budget_ms,
        work=handle_drive_event,
    )


def make_sweeper_handler(
    factory: Callable[[], WorkflowDriver],
    *,
    metrics: MetricsSink | None = None,
    settings: Callable[[], Settings] = current_settings,
    clean_versions: Callable[[WorkflowDriver], dict[str, Any]] | None = None,
) -> Handler:
    """The sweeper: drives again the runs whose wake time passed (a missed alarm, a dead holder),
    within ``sweep_budget_ms`` capped by the function's remaining time less the margin.

    With ``clean_versions``, it first deletes the old Lambda versions no run needs (bounded
    per call); a failure there is logged and the sweep goes on."""
    sweep = _budgeted(
        factory,
        metrics=metrics,
        settings=settings,
        service="relayflow-sweeper",
        budget_ms=lambda config: config.sweep_budget_ms,
        work=lambda driver, event, context, sink: {"swept": driver.engine.sweep()},
    )

    def handler(event: Any, context: Any) -> dict[str, Any]:
        versions = _cleaned(clean_versions, factory) if clean_versions is not None else None
        result = sweep(event, context)
        _log.info("sweep finished", extra={"runs": len(result["swept"])})
        if versions is not None:
            result["versions"] = versions
        return result

    return handler


def _cleaned(
    clean: Callable[[WorkflowDriver], dict[str, Any]], factory: Callable[[], WorkflowDriver]
) -> dict[str, Any]:
    # Runs before the sweep, whose budget then counts the time it took; it never fails it.
    try:
        return clean(factory())
    except Exception as exc:
        _log.exception("cleaning old Lambda versions failed")
        return {"error": type(exc).__name__}


def _budgeted(
    factory: Callable[[], WorkflowDriver],
    *,
    metrics: MetricsSink | None,
    settings: Callable[[], Settings],
    service: str,
    budget_ms: Callable[[Settings], int],
    work: Callable[[WorkflowDriver, Any, Any, MetricsSink], dict[str, Any]],
) -> Callable[[Any, Any], dict[str, Any]]:
    """A function's handler: ``work`` on the driver (built on first use, its engine counting
    into the metrics sink) within ``budget_ms`` capped by the function's remaining time less
    the margin; the metrics and spans are flushed after every event, whatever happened."""
    sink = Lazy(
        lambda: metrics or EmfMetrics(service=service, environment=settings().deployment_name)
    )
    driver = Lazy(lambda: _observed(factory(), sink.get()))

    def handler(event: Any, context: Any) -> dict[str, Any]:
        engine = driver.get().engine
        config = settings()
        try:
            with engine.budget(config.budget_ms(budget_ms(config), context)):
                return work(driver.get(), event, context, sink.get())
        finally:
            sink.get().flush()
            flush_spans()

    return handler


def _observed(driver: WorkflowDriver, sink: MetricsSink) -> WorkflowDriver:
    """``driver`` with its engine counting run ends and step retries into ``sink``."""
    driver.engine.add_observer(RunMetrics(sink))
    return driver
