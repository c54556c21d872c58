"""Workflow statistics: an hourly rollup per workflow of the runs that ended, written once
per finished run, and the figures read from it (runs, success rate, duration and cost
percentiles from fixed log-spaced histograms)."""

from relayflow.stats.histogram import COST_BUCKETS, DURATION_BUCKETS, LogBuckets
from relayflow.stats.report import WorkflowStats, workflow_stats
from relayflow.stats.rollup import (
    HourRollup,
    RollupRecorder,
    RunEnd,
    RunStatistics,
    attach_statistics,
    run_end_of,
)

__all__ = [
    "COST_BUCKETS",
    "DURATION_BUCKETS",
    "HourRollup",
    "LogBuckets",
    "RollupRecorder",
    "RunEnd",
    "RunStatistics",
    "WorkflowStats",
    "attach_statistics",
    "run_end_of",
    "workflow_stats",
]
