"""Counters of what happens to runs, observed from the engine's saves (no AWS here).

The engine reports every save to its observers; :class:`RunMetrics` turns those into the
counters the deployment emits (EMF through Powertools in the Lambda functions). Counts of runs
and steps carry their workflow's id (a dimension: workflows are few, run ids are never one).
"""

from __future__ import annotations

from typing import Literal, Protocol

from relayflow.core.record import NOT_STARTED, RunRecord
from relayflow.flow.errors import TTL_EXPIRED
from relayflow.flow.status import RATE_WAIT_PREFIX

RUNS_TRIGGERED = "runs.triggered"
#: Runs that began running: at their trigger, or when flow control let them start.
RUNS_STARTED = "runs.started"
RUNS_COMPLETED = "runs.completed"
RUNS_FAILED = "runs.failed"
RUNS_CANCELLED = "runs.cancelled"
RUNS_COMPENSATED = "runs.compensated"
#: Step attempts that ended (succeeded or failed), and those of them followed by another.
STEPS_ATTEMPTS = "steps.attempts"
STEPS_RETRIED = "steps.retried"
#: Gauge: the place a run took in its concurrency key's queue when it queued (1 is next);
#: its maximum over a period is the depth the workflow's queue reached.
QUEUE_DEPTH = "queue.depth"
#: Gauge (milliseconds): how long after its stored wake time an alarm, hand-off or sweep
#: drove a run.
ALARMS_LATENESS = "alarms.lateness_ms"
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


Unit = Literal["Count", "Milliseconds"]


class Counters(Protocol):
    """Where counts go (the API's and functions' metrics sinks implement it)."""

    def count(self, name: str, value: int = 1, *, workflow: str | None = None) -> None:
        """Add ``value`` to counter ``name`` (of ``workflow``'s runs when given)."""

    def measure(self, name: str, value: float, *, unit: Unit, workflow: str | None = None) -> None:
        """Record one value of gauge ``name`` (of ``workflow``'s runs when given)."""


class RunMetrics:
    """Counts runs that start and end (by status), step attempts and those that failed and
    will run again, runs driven again after a transient failure of relayflow's own storage or
    alarms, and what flow control did (queued, started from the queue, delayed, expired,
    debounced, rate limited); measures how deep queues get and how late alarms fire."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Called by the engine after each save of ``after`` (``before`` is what it replaced)."""
        workflow = after.workflow_id
        if _started(before, after):
            self.counters.count(RUNS_STARTED, workflow=workflow)
        if after.is_terminal and (before is None or not before.is_terminal):
            self.counters.count(_END_COUNTERS[after.status], workflow=workflow)
        attempts = _attempts(after) - (_attempts(before) if before is not None else 0)
        if attempts > 0:
            self.counters.count(STEPS_ATTEMPTS, attempts, workflow=workflow)
        retried = _retries(after) - (_retries(before) if before is not None else 0)
        if retried > 0:
            self.counters.count(STEPS_RETRIED, retried, workflow=workflow)
        self._count_flow(before, after)

    def _count_flow(self, before: RunRecord | None, after: RunRecord) -> None:
        """The flow-control counters a save shows by itself."""
        workflow = after.workflow_id
        if after.status == "delayed" and (before is None or before.status != "delayed"):
            self.counters.count(FLOW_DELAYED, workflow=workflow)
        ended = after.is_terminal and (before is None or not before.is_terminal)
        if ended and after.error is not None and after.error.code == TTL_EXPIRED:
            self.counters.count(FLOW_EXPIRED, workflow=workflow)
        parked = _rate_waits(after) - (_rate_waits(before) if before is not None else set())
        if parked:
            self.counters.count(FLOW_RATE_LIMITED, len(parked), workflow=workflow)

    def on_flow(
        self, counter: str, run_id: str, workflow_id: str, *, queued_at: int | None = None
    ) -> None:
        """Count what the engine reports of flow control (``FLOW_QUEUED``, ...); a run that
        queued gives its queue's depth."""
        self.counters.count(counter, workflow=workflow_id)
        if queued_at is not None:
            self.counters.measure(QUEUE_DEPTH, queued_at, unit="Count", workflow=workflow_id)

    def on_alarm(self, workflow_id: str, lateness_ms: int) -> None:
        """Measure how late a run of ``workflow_id`` was driven against its wake time."""
        self.counters.measure(
            ALARMS_LATENESS, lateness_ms, unit="Milliseconds", workflow=workflow_id
        )

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


def _started(before: RunRecord | None, after: RunRecord) -> bool:
    """Whether this save is the run's start: its first save, or its first out of ``delayed``,
    ``queued`` or a pause taken before it started, in a status other than those. A run can
    start and end in one save (its start is written with the drive's first save), except one
    cancelled before it ran."""
    if before is not None and not _not_started(before):
        return False
    return not _not_started(after) and after.status != "cancelled"


def _not_started(record: RunRecord) -> bool:
    """Held back before its start: by flow control, or paused with its workflow."""
    if record.status == "paused":
        return record.pause is not None and record.pause.resume_to == "start"
    return record.status in NOT_STARTED


def _attempts(record: RunRecord) -> int:
    """Step attempts recorded over all of the run's steps."""
    return sum(len(entry.attempts) for entry in record.journal.step_results.values())


def _retries(record: RunRecord) -> int:
    """Failed attempts that were followed by another attempt, over all of the run's steps."""
    return sum(max(0, len(entry.attempts) - 1) for entry in record.journal.step_results.values())
