"""Counters of what happens to runs, observed from the engine's saves (no AWS here).

The engine reports every save to its observers; :class:`RunMetrics` turns those into the
counters the deployment emits (EMF through Powertools in the Lambda functions).
"""

from __future__ import annotations

from typing import Protocol

from relayflow.core.record import RunRecord

RUNS_TRIGGERED = "runs.triggered"
RUNS_COMPLETED = "runs.completed"
RUNS_FAILED = "runs.failed"
RUNS_CANCELLED = "runs.cancelled"
RUNS_COMPENSATED = "runs.compensated"
STEPS_RETRIED = "steps.retried"
#: Drives and invocations ended by a transient failure of relayflow's own AWS resources
#: (throttling, 5xx, timeouts); each such run is driven again from its last durable point.
RUNS_REDRIVEN = "runs.redriven"

_END_COUNTERS = {
    "completed": RUNS_COMPLETED,
    "failed": RUNS_FAILED,
    "compensation_failed": RUNS_FAILED,
    "cancelled": RUNS_CANCELLED,
    "compensated": RUNS_COMPENSATED,
}


class Counters(Protocol):
    """Where counts go (the API's and functions' metrics sinks implement it)."""

    def count(self, name: str, value: int = 1) -> None: ...


class RunMetrics:
    """Counts runs that end (by status), step attempts that failed and will run again, and
    runs driven again after a transient failure of relayflow's own storage or alarms."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Called by the engine after each save of ``after`` (``before`` is what it replaced)."""
        if after.is_terminal and (before is None or not before.is_terminal):
            self.counters.count(_END_COUNTERS[after.status])
        retried = _retries(after) - (_retries(before) if before is not None else 0)
        if retried > 0:
            self.counters.count(STEPS_RETRIED, retried)

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """Count a run whose drive or invocation a transient failure ended."""
        self.counters.count(RUNS_REDRIVEN)


def _retries(record: RunRecord) -> int:
    """Failed attempts that were followed by another attempt, over all of the run's steps."""
    return sum(max(0, len(entry.attempts) - 1) for entry in record.journal.step_results.values())
