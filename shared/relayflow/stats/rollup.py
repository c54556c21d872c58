"""The hourly rollup of finished runs per workflow: what one run adds when it ends, the
store it goes to (a port), and the run observer that writes it (no AWS here).

A run adds to the rollup of its (environment, workflow, hour of its end) exactly once per
end: the observer sees only the save that made the run terminal (one save does), and the
store counts each ``end_key`` (run id and end time) once, so a repeated request adds
nothing the second time. A redriven run that ends again is a new end
(it counts again, under its new status).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from relayflow.core.record import RunRecord
from relayflow.costs import PriceTable, cost_of
from relayflow.stats.histogram import COST_BUCKETS, DURATION_BUCKETS, add_counts

HOUR_MS = 3_600_000
#: The terminal statuses, in the order the rollup reports them.
END_STATUSES: tuple[str, ...] = (
    "completed",
    "failed",
    "compensation_failed",
    "cancelled",
    "compensated",
)


def hour_of(ms: int) -> int:
    """The start (epoch ms) of the UTC hour ``ms`` falls in."""
    return ms - ms % HOUR_MS


@dataclass(frozen=True)
class RunEnd:
    """What one finished run adds to its workflow's rollup."""

    run_id: str
    environment: str
    workflow_id: str
    status: str
    ended_at: int
    duration_ms: int
    #: None when the run's AWS work was not recorded (it then adds to no cost figure).
    cost_usd: float | None

    @property
    def end_key(self) -> str:
        """Names this end: the same run ending again after a redrive has another one."""
        return f"{self.run_id}@{self.ended_at}"


def run_end_of(record: RunRecord, prices: PriceTable | None = None) -> RunEnd:
    """The :class:`RunEnd` of a terminal ``record``."""
    ended_at = record.completed_at if record.completed_at is not None else record.started_at
    usage = record.usage
    return RunEnd(
        run_id=record.id,
        environment=record.environment,
        workflow_id=record.workflow_id,
        status=record.status,
        ended_at=ended_at,
        duration_ms=max(0, ended_at - record.started_at),
        cost_usd=None if usage is None else cost_of(usage, prices).total,
    )


@dataclass
class HourRollup:
    """The runs of one workflow that ended in one hour (``hour`` is its start, epoch ms).

    ``durations`` and ``costs`` are histograms: bucket index (``DURATION_BUCKETS``,
    ``COST_BUCKETS``) to runs in it.
    """

    hour: int
    by_status: dict[str, int] = field(default_factory=dict)
    duration_ms_sum: int = 0
    costed_runs: int = 0
    cost_usd_sum: float = 0.0
    durations: dict[int, int] = field(default_factory=dict)
    costs: dict[int, int] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        """Runs that ended in the hour."""
        return sum(self.by_status.values())

    def add(self, end: RunEnd) -> None:
        """Count ``end`` in this hour."""
        self.merge(increments_of(end))

    def merge(self, other: HourRollup) -> None:
        """Add ``other``'s counts to this rollup's."""
        add_counts(self.by_status, other.by_status)
        self.duration_ms_sum += other.duration_ms_sum
        self.costed_runs += other.costed_runs
        self.cost_usd_sum += other.cost_usd_sum
        add_counts(self.durations, other.durations)
        add_counts(self.costs, other.costs)


def increments_of(end: RunEnd) -> HourRollup:
    """The counts ``end`` adds to the rollup of its hour."""
    increments = HourRollup(
        hour=hour_of(end.ended_at),
        by_status={end.status: 1},
        duration_ms_sum=end.duration_ms,
        durations={DURATION_BUCKETS.index(end.duration_ms): 1},
    )
    if end.cost_usd is not None:
        increments.costed_runs = 1
        increments.cost_usd_sum = end.cost_usd
        increments.costs = {COST_BUCKETS.index(end.cost_usd): 1}
    return increments


class RunStatistics(Protocol):
    """Where the hourly rollups of finished runs live."""

    def record_end(self, end: RunEnd) -> None:
        """Add ``end`` to its hour's rollup. Safe to repeat: a repeat of one ``end_key`` adds
        nothing."""
        ...

    def hours(
        self, environment: str, workflow_id: str, since_ms: int, until_ms: int
    ) -> list[HourRollup]:
        """The rollups of the workflow's hours from the one holding ``since_ms`` to the one
        holding ``until_ms`` (both included), oldest first; hours without runs are left out."""
        ...


class RollupRecorder:
    """A run observer (``Engine.add_observer``) that adds each run's end to its workflow's
    hourly rollup: one write per finished run, none per step."""

    def __init__(self, statistics: RunStatistics, prices: PriceTable | None = None) -> None:
        self._statistics = statistics
        self._prices = prices

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Record ``after``'s end when this save is the one that made it terminal."""
        if after.is_terminal and (before is None or not before.is_terminal):
            self._statistics.record_end(run_end_of(after, self._prices))

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """Nothing to record: the run goes on."""


def attach_statistics(
    driver: Any, statistics: RunStatistics, prices: PriceTable | None = None
) -> None:
    """Record the ends of ``driver``'s runs into ``statistics`` (``driver.statistics``, which
    the API's statistics route reads)."""
    driver.engine.add_observer(RollupRecorder(statistics, prices))
    driver.statistics = statistics
