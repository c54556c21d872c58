"""A workflow's figures over a time range, read from its hourly rollups, and its runs that
wait now (queued, delayed, paused) read from the run listing (no AWS here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from relayflow.core.record import RunRecord
from relayflow.ports import RunQuery, RunStore
from relayflow.stats.histogram import COST_BUCKETS, DURATION_BUCKETS, LogBuckets
from relayflow.stats.rollup import END_STATUSES, HOUR_MS, HourRollup, RunStatistics, hour_of

#: The statuses of runs that wait to start or to go on, shown beside the figures.
WAITING_STATUSES: tuple[str, ...] = ("queued", "delayed", "paused")
#: Runs of each waiting status listed by id (the counts go further).
WAITING_LISTED = 20
#: Waiting runs (of every workflow of the environment) read at most to count them; past
#: this the counts are lower bounds (``capped``).
WAITING_SCANNED = 2000
_PAGE = 200


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles of a figure over runs (None when no run had it)."""

    mean: float | None
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class HourFigures:
    """One hour of the series (``hour`` is its start, epoch ms)."""

    hour: int
    runs: int
    by_status: dict[str, int]
    duration_p50_ms: float | None
    duration_p95_ms: float | None


@dataclass(frozen=True)
class WaitingRuns:
    """The workflow's runs in one waiting status now: how many and the newest ones."""

    status: str
    count: int
    #: True when the count stopped at :data:`WAITING_SCANNED` runs read (a lower bound).
    capped: bool
    runs: list[RunRecord]


@dataclass(frozen=True)
class WorkflowStats:
    """A workflow's runs that ended in ``[since, until]`` (hour by hour), and its waiting runs."""

    workflow_id: str
    environment: str
    since: int
    until: int
    runs: int
    by_status: dict[str, int]
    #: Completed runs over runs that ended (None without runs).
    success_rate: float | None
    duration_ms: Distribution
    #: Runs whose AWS work was recorded, which the cost figures are about.
    costed_runs: int
    cost_usd_total: float
    cost_usd: Distribution
    hours: list[HourFigures]
    waiting: list[WaitingRuns]


def _distribution(
    buckets: LogBuckets, counts: Mapping[int, int], total: float, runs: int
) -> Distribution:
    if runs == 0:
        return Distribution(mean=None, p50=None, p95=None)
    return Distribution(
        mean=total / runs,
        p50=buckets.percentile(counts, 0.5),
        p95=buckets.percentile(counts, 0.95),
    )


def _hour_figures(rollup: HourRollup) -> HourFigures:
    return HourFigures(
        hour=rollup.hour,
        runs=rollup.runs,
        by_status=_ordered(rollup.by_status),
        duration_p50_ms=DURATION_BUCKETS.percentile(rollup.durations, 0.5),
        duration_p95_ms=DURATION_BUCKETS.percentile(rollup.durations, 0.95),
    )


def _ordered(by_status: Mapping[str, int]) -> dict[str, int]:
    return {status: by_status.get(status, 0) for status in END_STATUSES}


def summarize(
    since: int, until: int, rollups: list[HourRollup]
) -> tuple[HourRollup, list[HourFigures]]:
    """The total of ``rollups`` and the series of every hour from ``since`` to ``until``
    (hours without runs included, as zeros)."""
    total = HourRollup(hour=hour_of(since))
    by_hour = {rollup.hour: rollup for rollup in rollups}
    series = []
    for hour in range(hour_of(since), hour_of(until) + 1, HOUR_MS):
        rollup = by_hour.get(hour, HourRollup(hour=hour))
        total.merge(rollup)
        series.append(_hour_figures(rollup))
    return total, series


def waiting_runs(runs: RunStore, environment: str, workflow_id: str) -> list[WaitingRuns]:
    """The workflow's queued, delayed and paused runs now, newest first in each status.

    Read from the status listing (whose partitions hold only runs in those statuses), not
    from the workflow's whole history.
    """
    found: dict[str, list[RunRecord]] = {status: [] for status in WAITING_STATUSES}
    counts = dict.fromkeys(WAITING_STATUSES, 0)
    scanned = 0
    cursor: str | None = None
    while scanned < WAITING_SCANNED:
        page = runs.list_runs(
            RunQuery(
                environment=environment,
                statuses=WAITING_STATUSES,
                limit=min(_PAGE, WAITING_SCANNED - scanned),
                cursor=cursor,
            )
        )
        scanned += len(page.runs)
        for record in page.runs:
            if record.workflow_id != workflow_id or record.status not in counts:
                continue
            counts[record.status] += 1
            if len(found[record.status]) < WAITING_LISTED:
                found[record.status].append(record)
        cursor = page.next_cursor
        if cursor is None:
            break
    capped = cursor is not None
    return [
        WaitingRuns(status=status, count=counts[status], capped=capped, runs=found[status])
        for status in WAITING_STATUSES
    ]


def workflow_stats(
    statistics: RunStatistics,
    runs: RunStore,
    *,
    environment: str,
    workflow_id: str,
    since: int,
    until: int,
) -> WorkflowStats:
    """The figures of ``workflow_id`` in ``environment`` for runs that ended from ``since``
    to ``until`` (whole hours: the rollup's), and its waiting runs now."""
    rollups = statistics.hours(environment, workflow_id, since, until)
    total, series = summarize(since, until, rollups)
    ended = total.runs
    return WorkflowStats(
        workflow_id=workflow_id,
        environment=environment,
        since=since,
        until=until,
        runs=ended,
        by_status=_ordered(total.by_status),
        success_rate=total.by_status.get("completed", 0) / ended if ended else None,
        duration_ms=_distribution(DURATION_BUCKETS, total.durations, total.duration_ms_sum, ended),
        costed_runs=total.costed_runs,
        cost_usd_total=total.cost_usd_sum,
        cost_usd=_distribution(COST_BUCKETS, total.costs, total.cost_usd_sum, total.costed_runs),
        hours=series,
        waiting=waiting_runs(runs, environment, workflow_id),
    )
