"""Counters of what happens to runs, observed from the engine's saves (no AWS here).

The engine reports every save to its observers; :class:`RunMetrics` turns those into the
counters the deployment emits (EMF through Powertools in the Lambda functions).
"""

from __future__ import annotations

from typing import Protocol

from relayflow.core.record import RunRecord
from relayflow.flow.errors import TTL_EXPIRED
from relayflow.flow.status import RATE_WAIT_PREFIX

RUNS_TRIGGERED = "runs.triggered"
RUNS_COMPLETED = "runs.completed"
RUNS_FAILED = "runs.failed"
RUNS_CANCELLED = "runs.cancelled"
RUNS_COMPENSATED = "runs.compensated"
STEPS_RETRIED = "steps.retried"
#: Drives and invocations ended by a transient failure of relayflow's own AWS resources
#: (throttling, 5xx, timeouts); each such run is driven again from its last durable point.
RUNS_DRIVEN_AGAIN = "runs.driven_again"
#: Flow control: runs that found their concurrency key's slots taken and queued at their
#: trigger, and queued runs started when a slot freed.
FLOW_QUEUED = "runs.queued"
FLOW_DEQUEUED = "runs.started_from_queue"
#: Runs created ``delayed``; runs that ended ``TTL_EXPIRED`` (queued or delayed too long).
FLOW_DELAYED = "runs.delayed"
FLOW_EXPIRED = "runs.expired"
#: Triggers folded into a debounced burst's run instead of creating one.
FLOW_DEBOUNCED = "runs.debounced"
#: Step attempts parked until their rate-limit slot.
FLOW_RATE_LIMITED = "steps.rate_limited"

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
    """Counts runs that end (by status), step attempts that failed and will run again, runs
    driven again after a transient failure of relayflow's own storage or alarms, and what
    flow control did (queued, started from the queue, delayed, expired, debounced, rate
    limited)."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Called by the engine after each save of ``after`` (``before`` is what it replaced)."""
        if after.is_terminal and (before is None or not before.is_terminal):
            self.counters.count(_END_COUNTERS[after.status])
        retried = _retries(after) - (_retries(before) if before is not None else 0)
        if retried > 0:
            self.counters.count(STEPS_RETRIED, retried)
        self._count_flow(before, after)

    def _count_flow(self, before: RunRecord | None, after: RunRecord) -> None:
        """The flow-control counters a save shows by itself."""
        if after.status == "delayed" and (before is None or before.status != "delayed"):
            self.counters.count(FLOW_DELAYED)
        ended = after.is_terminal and (before is None or not before.is_terminal)
        if ended and after.error is not None and after.error.code == TTL_EXPIRED:
            self.counters.count(FLOW_EXPIRED)
        parked = _rate_waits(after) - (_rate_waits(before) if before is not None else set())
        if parked:
            self.counters.count(FLOW_RATE_LIMITED, len(parked))

    def on_flow(self, counter: str, run_id: str) -> None:
        """Count what the engine reports of flow control (``FLOW_QUEUED``, ...)."""
        self.counters.count(counter)

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """Count a run whose drive or invocation a transient failure ended."""
        self.counters.count(RUNS_DRIVEN_AGAIN)


def _rate_waits(record: RunRecord) -> set[str]:
    """The ids of the run's pending waits for a rate-limit slot."""
    return {
        wait.client_waitpoint_id
        for wait in record.pending_waitpoints
        if wait.client_waitpoint_id.rpartition("/")[2].startswith(RATE_WAIT_PREFIX)
    }


def _retries(record: RunRecord) -> int:
    """Failed attempts that were followed by another attempt, over all of the run's steps."""
    return sum(max(0, len(entry.attempts) - 1) for entry in record.journal.step_results.values())
