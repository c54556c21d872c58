"""Route of ``/api/workflows/{id}/stats``: a workflow's runs, success rate, duration and cost
per run over a time range (from its hourly rollups), and its waiting runs now."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import Field

from relayflow.api.auth import RUNS_READ
from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError
from relayflow.api.model_bases import JsonInt, ResponseModel
from relayflow.api.models import Environment, RunSummaryView
from relayflow.api.query import EPOCH_MS_PATTERN, parse_instant
from relayflow.api.responses import READ_ERRORS, declare
from relayflow.api.views import run_summary
from relayflow.core.views import summary
from relayflow.sdk.durations import parse_duration
from relayflow.stats import WorkflowStats, workflow_stats
from relayflow.stats.report import Distribution

WorkflowId = Annotated[str, Path(description="the workflow id")]
#: ``24h``, ``7d``...: that long before now.
RELATIVE_PATTERN = r"^[0-9]{1,9}(ms|s|m|h|d|w)$"
_RELATIVE = re.compile(RELATIVE_PATTERN)
DEFAULT_RANGE = "24h"
#: The widest range one request reads (its hourly rollups: 744 items at most).
MAX_RANGE_DAYS = 31
_DAY_MS = 86_400_000
_TIME_SCHEMA = {
    "anyOf": [
        {"type": "string", "pattern": RELATIVE_PATTERN},
        {"type": "string", "pattern": EPOCH_MS_PATTERN},
        {"type": "string", "format": "date-time"},
    ]
}


class DistributionView(ResponseModel):
    """Mean and percentiles over runs (null without runs); percentiles are read from a
    histogram of ten buckets per decade, within 12 % of the exact value."""

    mean: float | None
    p50: float | None
    p95: float | None


class CostView(DistributionView):
    """Cost per run in dollars, over the runs whose AWS work was recorded."""

    total: float
    runs: int = Field(description="runs with recorded usage, the ones these figures are about")


class StatsHourView(ResponseModel):
    """One hour of the series (runs that ended in it)."""

    hour: JsonInt = Field(description="the hour's start (epoch ms, UTC)")
    runs: int
    by_status: dict[str, int]
    duration_p50_ms: float | None
    duration_p95_ms: float | None


class WaitingRunsView(ResponseModel):
    """The workflow's runs in one waiting status now."""

    status: str
    count: int
    capped: bool = Field(description="true when the count stopped early (a lower bound)")
    runs: list[RunSummaryView] = Field(description="the newest ones, 20 at most")


class WorkflowStatsView(ResponseModel):
    """A workflow's runs that ended in a time range, and its waiting runs now."""

    workflow_id: str
    environment: str
    since: JsonInt = Field(description="start of the range (epoch ms); whole hours are counted")
    until: JsonInt = Field(description="end of the range (epoch ms)")
    runs: int
    by_status: dict[str, int]
    success_rate: float | None = Field(description="completed runs over runs that ended")
    duration_ms: DistributionView
    cost_usd: CostView
    hours: list[StatsHourView]
    waiting: list[WaitingRunsView]


def _distribution(figures: Distribution) -> DistributionView:
    return DistributionView(mean=figures.mean, p50=figures.p50, p95=figures.p95)


def stats_view(stats: WorkflowStats) -> WorkflowStatsView:
    """The wire view of ``stats``."""
    return WorkflowStatsView(
        workflow_id=stats.workflow_id,
        environment=stats.environment,
        since=stats.since,
        until=stats.until,
        runs=stats.runs,
        by_status=stats.by_status,
        success_rate=stats.success_rate,
        duration_ms=_distribution(stats.duration_ms),
        cost_usd=CostView(
            total=stats.cost_usd_total,
            runs=stats.costed_runs,
            **_distribution(stats.cost_usd).model_dump(),
        ),
        hours=[
            StatsHourView(
                hour=hour.hour,
                runs=hour.runs,
                by_status=hour.by_status,
                duration_p50_ms=hour.duration_p50_ms,
                duration_p95_ms=hour.duration_p95_ms,
            )
            for hour in stats.hours
        ],
        waiting=[
            WaitingRunsView(
                status=group.status,
                count=group.count,
                capped=group.capped,
                runs=[run_summary(summary(record)) for record in group.runs],
            )
            for group in stats.waiting
        ],
    )


def parse_time(name: str, value: str, now: int) -> int:
    """Epoch ms of a range end: ``24h`` (that long before ``now``), epoch ms or an RFC 3339
    date-time; 400 ``invalid_query`` otherwise."""
    if _RELATIVE.fullmatch(value):
        return now - parse_duration(value, what=name)
    moment = parse_instant(name, value)
    if moment is None:  # only an absent value gives none, and this one is given
        raise ApiError(400, "invalid_query", f"query parameter '{name}' is empty")
    return moment


def time_range(since: str | None, until: str | None, now: int) -> tuple[int, int]:
    """The range ``[since, until]`` a request asks for (24 hours up to ``until`` by default); 400
    ``invalid_range`` when it ends before it starts or spans over :data:`MAX_RANGE_DAYS`."""
    end = now if until is None else parse_time("to", until, now)
    start = end - parse_duration(DEFAULT_RANGE) if since is None else parse_time("from", since, now)
    if start >= end:
        raise ApiError(400, "invalid_range", "'from' must be before 'to'")
    if end - start > MAX_RANGE_DAYS * _DAY_MS:
        raise ApiError(
            400, "invalid_range", f"the range spans more than {MAX_RANGE_DAYS} days; ask for less"
        )
    return start, end


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The workflow statistics route over ``ctx``'s driver."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    @router.get(
        "/api/workflows/<workflow_id>/stats",
        summary="A workflow's statistics over a time range",
        description=(
            "Runs that ended in the range (whole UTC hours), by status; success rate; "
            "p50/p95 duration and cost per run; an hourly series; and the workflow's "
            "queued, delayed and paused runs now. A deployment that records no statistics "
            "answers 404 no_statistics."
        ),
        tags=["workflows"],
        operation_id="getWorkflowStats",
        security=[{"bearerAuth": [RUNS_READ]}],
        responses=declare(200, WorkflowStatsView, "the workflow's figures", *READ_ERRORS, 404),
    )
    def get_workflow_stats(
        workflow_id: WorkflowId,
        environment: Annotated[Environment, Query()] = "production",
        since: Annotated[
            str | None,
            Query(
                alias="from",
                description="start: 24h (that long ago), epoch ms or an RFC 3339 date-time; "
                "24 hours before 'to' by default",
                json_schema_extra=_TIME_SCHEMA,
            ),
        ] = None,
        until: Annotated[
            str | None,
            Query(
                alias="to",
                description="end: like 'from'; now by default",
                json_schema_extra=_TIME_SCHEMA,
            ),
        ] = None,
    ) -> WorkflowStatsView:
        statistics = getattr(ctx.driver, "statistics", None)
        if statistics is None:
            raise ApiError(404, "no_statistics", "this deployment records no workflow statistics")
        engine = ctx.driver.engine
        start, end = time_range(since, until, engine.clock.now_ms())
        stats = workflow_stats(
            statistics,
            engine.runs,
            environment=environment,
            workflow_id=unquote(workflow_id),
            since=start,
            until=end,
        )
        return stats_view(stats)

    return router
