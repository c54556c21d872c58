"""Metrics relayflow's functions emit (EMF through Powertools Metrics, namespace ``relayflow``).

The API counts what it sees: events received/matched/skipped/rejected and runs triggered;
runs starting and ending, step attempts and retries, flow control, queue depth and alarm
lateness are counted from the engine (``RunMetrics``), in whichever function drives them,
per workflow. A recording sink lets tests assert the counts. These names are the ones the
CDK construct's dashboard graphs.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Protocol

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from relayflow.observability import (
    ALARMS_LATENESS,
    FLOW_DEBOUNCED,
    FLOW_DELAYED,
    FLOW_DEQUEUED,
    FLOW_EXPIRED,
    FLOW_QUEUED,
    FLOW_RATE_LIMITED,
    QUEUE_DEPTH,
    RUNS_CANCELLED,
    RUNS_COMPENSATED,
    RUNS_COMPLETED,
    RUNS_DRIVEN_AGAIN,
    RUNS_FAILED,
    RUNS_STARTED,
    RUNS_TRIGGERED,
    STEPS_ATTEMPTS,
    STEPS_RETRIED,
    Unit,
)

NAMESPACE = "relayflow"

EVENTS_RECEIVED = "events.received"
EVENTS_MATCHED = "events.matched"
EVENTS_SKIPPED = "events.skipped"
EVENTS_REJECTED = "events.rejected"
ALARMS_FIRED = "alarms.fired"
#: The dimension naming the workflow of the runs a metric counts.
WORKFLOW_DIMENSION = "workflow"
#: The dimension naming the deployment (``RELAYFLOW_DEPLOYMENT_NAME``), on every metric.
ENVIRONMENT_DIMENSION = "environment"

__all__ = [
    "ALARMS_FIRED",
    "ALARMS_LATENESS",
    "COUNTERS",
    "DEPLOYMENT_COUNTERS",
    "ENVIRONMENT_DIMENSION",
    "EVENTS_MATCHED",
    "EVENTS_RECEIVED",
    "EVENTS_REJECTED",
    "EVENTS_SKIPPED",
    "QUEUE_DEPTH",
    "RUNS_CANCELLED",
    "RUNS_COMPENSATED",
    "RUNS_COMPLETED",
    "RUNS_DRIVEN_AGAIN",
    "RUNS_FAILED",
    "RUNS_STARTED",
    "RUNS_TRIGGERED",
    "STEPS_ATTEMPTS",
    "STEPS_RETRIED",
    "WORKFLOW_COUNTERS",
    "WORKFLOW_DIMENSION",
    "WORKFLOW_GAUGES",
    "DiscardedMetrics",
    "EmfMetrics",
    "MetricsSink",
    "RecordingMetrics",
]

#: Counters of no workflow: dimension ``service`` only.
DEPLOYMENT_COUNTERS: tuple[str, ...] = (
    EVENTS_RECEIVED,
    EVENTS_MATCHED,
    EVENTS_SKIPPED,
    EVENTS_REJECTED,
    RUNS_TRIGGERED,
    RUNS_DRIVEN_AGAIN,
    ALARMS_FIRED,
)
#: Counters of a workflow's runs: dimensions ``service`` and ``workflow``.
WORKFLOW_COUNTERS: tuple[str, ...] = (
    RUNS_STARTED,
    RUNS_COMPLETED,
    RUNS_FAILED,
    RUNS_CANCELLED,
    RUNS_COMPENSATED,
    STEPS_ATTEMPTS,
    STEPS_RETRIED,
    FLOW_QUEUED,
    FLOW_DEQUEUED,
    FLOW_DELAYED,
    FLOW_EXPIRED,
    FLOW_DEBOUNCED,
    FLOW_RATE_LIMITED,
)
#: Gauges of a workflow's runs (dimensions ``service`` and ``workflow``) and their units.
WORKFLOW_GAUGES: dict[str, Unit] = {QUEUE_DEPTH: "Count", ALARMS_LATENESS: "Milliseconds"}
#: Every counter name relayflow emits.
COUNTERS: tuple[str, ...] = DEPLOYMENT_COUNTERS + WORKFLOW_COUNTERS


class MetricsSink(Protocol):
    """Where counters and gauges go; ``flush`` is called once at the end of every request."""

    def count(self, name: str, value: int = 1, *, workflow: str | None = None) -> None: ...

    def measure(
        self, name: str, value: float, *, unit: Unit, workflow: str | None = None
    ) -> None: ...

    def flush(self) -> None: ...


class EmfMetrics:
    """Counters and gauges written as CloudWatch Embedded Metric Format lines on stdout: one
    line for those of no workflow, one per workflow (with the ``workflow`` dimension)."""

    def __init__(
        self,
        *,
        service: str = "relayflow-api",
        namespace: str = NAMESPACE,
        environment: str | None = None,
    ) -> None:
        """Create the sink for ``service`` (the ``service`` dimension) in ``namespace``, of
        deployment ``environment`` (the ``environment`` dimension, when given)."""
        self._metrics = Metrics(namespace=namespace, service=service)
        # Lease renewals report saves from their own thread while a request counts.
        self._lock = threading.Lock()
        if environment is not None:
            self._metrics.set_default_dimensions(**{ENVIRONMENT_DIMENSION: environment})
        self._counts: Counter[tuple[str | None, str]] = Counter()
        self._values: dict[tuple[str | None, str, Unit], list[float]] = defaultdict(list)

    def count(self, name: str, value: int = 1, *, workflow: str | None = None) -> None:
        """Add ``value`` to counter ``name`` (of ``workflow``'s runs when given)."""
        if value > 0:
            with self._lock:
                self._counts[(workflow, name)] += value

    def measure(self, name: str, value: float, *, unit: Unit, workflow: str | None = None) -> None:
        """Record one value of gauge ``name`` (of ``workflow``'s runs when given)."""
        with self._lock:
            self._values[(workflow, name, unit)].append(value)

    def flush(self) -> None:
        """Write what this request counted and measured (nothing when it did neither)."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
            values, self._values = self._values, defaultdict(list)
        workflows = {workflow for workflow, _ in counts} | {key[0] for key in values}
        for workflow in sorted(workflows, key=lambda name: name or ""):
            if workflow is not None:
                self._metrics.add_dimension(name=WORKFLOW_DIMENSION, value=workflow)
            for (of, name), total in counts.items():
                if of == workflow:
                    self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=total)
            for (of, name, unit), measured in values.items():
                if of == workflow:
                    for value in measured:
                        self._metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)
            self._metrics.flush_metrics()


class RecordingMetrics:
    """Keeps counters and gauges in memory (tests, local development)."""

    def __init__(self) -> None:
        """Start with every counter at zero."""
        self.counts: Counter[str] = Counter()
        self.by_workflow: Counter[tuple[str, str]] = Counter()
        self.measured: dict[tuple[str, str | None], list[float]] = defaultdict(list)
        self.flushes = 0

    def count(self, name: str, value: int = 1, *, workflow: str | None = None) -> None:
        """Add ``value`` to counter ``name`` (and to ``workflow``'s when given)."""
        if value > 0:
            self.counts[name] += value
            if workflow is not None:
                self.by_workflow[(name, workflow)] += value

    def measure(self, name: str, value: float, *, unit: Unit, workflow: str | None = None) -> None:
        """Keep one value of gauge ``name``."""
        self.measured[(name, workflow)].append(value)

    def flush(self) -> None:
        """Note that a request ended."""
        self.flushes += 1


class DiscardedMetrics:
    """Drops every counter and gauge (local stacks, whose console shows runs instead)."""

    def count(self, name: str, value: int = 1, *, workflow: str | None = None) -> None:
        """Drop a counter."""

    def measure(self, name: str, value: float, *, unit: Unit, workflow: str | None = None) -> None:
        """Drop a gauge value."""

    def flush(self) -> None:
        """Nothing to flush."""
