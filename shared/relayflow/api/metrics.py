"""Counters the HTTP API emits (EMF through Powertools Metrics, namespace ``relayflow``).

The API counts what it sees: events received/matched/skipped/rejected and runs triggered;
runs ending and steps retried are counted from the engine's saves (``RunMetrics``), in
whichever function drives them. A recording sink lets tests assert the counts.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from relayflow.observability import (
    RUNS_CANCELLED,
    RUNS_COMPENSATED,
    RUNS_COMPLETED,
    RUNS_DRIVEN_AGAIN,
    RUNS_FAILED,
    RUNS_TRIGGERED,
    STEPS_RETRIED,
)

NAMESPACE = "relayflow"

EVENTS_RECEIVED = "events.received"
EVENTS_MATCHED = "events.matched"
EVENTS_SKIPPED = "events.skipped"
EVENTS_REJECTED = "events.rejected"
ALARMS_FIRED = "alarms.fired"

__all__ = [
    "ALARMS_FIRED",
    "COUNTERS",
    "EVENTS_MATCHED",
    "EVENTS_RECEIVED",
    "EVENTS_REJECTED",
    "EVENTS_SKIPPED",
    "RUNS_CANCELLED",
    "RUNS_COMPENSATED",
    "RUNS_COMPLETED",
    "RUNS_DRIVEN_AGAIN",
    "RUNS_FAILED",
    "RUNS_TRIGGERED",
    "STEPS_RETRIED",
    "EmfMetrics",
    "MetricsSink",
    "RecordingMetrics",
]

#: Every counter name relayflow emits.
COUNTERS: tuple[str, ...] = (
    EVENTS_RECEIVED,
    EVENTS_MATCHED,
    EVENTS_SKIPPED,
    EVENTS_REJECTED,
    RUNS_TRIGGERED,
    RUNS_COMPLETED,
    RUNS_FAILED,
    RUNS_CANCELLED,
    RUNS_COMPENSATED,
    STEPS_RETRIED,
    RUNS_DRIVEN_AGAIN,
    ALARMS_FIRED,
)


class MetricsSink(Protocol):
    """Where counters go; ``flush`` is called once at the end of every request."""

    def count(self, name: str, value: int = 1) -> None: ...

    def flush(self) -> None: ...


class EmfMetrics:
    """Counters written as CloudWatch Embedded Metric Format lines on stdout."""

    def __init__(self, *, service: str = "relayflow-api", namespace: str = NAMESPACE) -> None:
        """Create the sink for ``service`` in ``namespace``."""
        self._metrics = Metrics(namespace=namespace, service=service)
        self._pending = False

    def count(self, name: str, value: int = 1) -> None:
        """Add ``value`` to counter ``name``."""
        if value <= 0:
            return
        self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        self._pending = True

    def flush(self) -> None:
        """Write the counters of this request (nothing when none were counted)."""
        if self._pending:
            self._pending = False
            self._metrics.flush_metrics()


class RecordingMetrics:
    """Keeps counters in memory (tests, local development)."""

    def __init__(self) -> None:
        """Start with every counter at zero."""
        self.counts: Counter[str] = Counter()
        self.flushes = 0

    def count(self, name: str, value: int = 1) -> None:
        """Add ``value`` to counter ``name``."""
        if value > 0:
            self.counts[name] += value

    def flush(self) -> None:
        """Note that a request ended."""
        self.flushes += 1
