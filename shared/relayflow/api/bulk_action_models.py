"""Bodies of ``/api/bulk-actions``: the request that starts a bulk job (or counts its matches)
and the job views."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from relayflow.api.flow_options import WireDuration
from relayflow.api.model_bases import JsonInt, RequestModel, ResponseModel
from relayflow.api.models import Environment, RunStatus
from relayflow.api.query import INSTANT_SCHEMA, parse_instant
from relayflow.operations.bulk import BulkJob
from relayflow.operations.bulk_models import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PAGE_SIZE,
    MAX_CONCURRENCY,
    MAX_PAGE_SIZE,
    BulkAction,
    BulkFilter,
    BulkJobInput,
    BulkOptions,
)
from relayflow.protocol import RetryOverride
from relayflow.sdk.durations import parse_duration

Instant = Annotated[JsonInt, Field(ge=0)] | str


#: A body's instant may also be null (left out).
NULLABLE_INSTANT_SCHEMA: dict[str, Any] = {
    "anyOf": [*INSTANT_SCHEMA["anyOf"], {"type": "integer", "minimum": 0}, {"type": "null"}]
}


class BulkFilterBody(RequestModel):
    """Which runs: the runs list's filters (at least one)."""

    environment: Environment | None = None
    workflow_id: str | None = Field(default=None, min_length=1, max_length=256)
    statuses: list[RunStatus] = Field(default_factory=list, max_length=10)
    tag: str | None = Field(default=None, min_length=1, max_length=256)
    code_version: str | None = Field(
        default=None, min_length=1, max_length=256, description="runs on this build"
    )
    since: Instant | None = Field(
        default=None,
        description="runs started at or after: epoch ms or an RFC 3339 date-time",
        json_schema_extra=NULLABLE_INSTANT_SCHEMA,
    )
    until: Instant | None = Field(
        default=None,
        description="runs started before: epoch ms or an RFC 3339 date-time",
        json_schema_extra=NULLABLE_INSTANT_SCHEMA,
    )

    def to_filter(self) -> BulkFilter:
        """The job's filter; raises ``ValueError`` (400) for a bad or empty one."""
        return BulkFilter(
            environment=self.environment,
            workflow_id=self.workflow_id,
            statuses=list(self.statuses),
            tag=self.tag,
            code_version=self.code_version,
            since=_instant("since", self.since),
            until=_instant("until", self.until),
        )


def _instant(name: str, value: Instant | None) -> int | None:
    if value is None or isinstance(value, int):
        return value
    return parse_instant(name, value)


class RetryBody(RequestModel):
    """A redrive's retry policy for the failed steps (replaces the body's for this redrive)."""

    max: JsonInt = Field(default=3, ge=1, le=1000, description="total attempts")
    backoff: Literal["fixed", "linear", "exponential"] = "exponential"
    initial: WireDuration = "1s"
    max_delay: WireDuration = "60s"
    backoff_rate: float = Field(default=2.0, ge=1.0, le=100.0)

    def to_override(self) -> RetryOverride:
        """The wire form the step host applies."""
        return RetryOverride(
            max=self.max,
            backoff=self.backoff,
            initial_ms=parse_duration(self.initial),
            max_delay_ms=parse_duration(self.max_delay),
            backoff_rate=self.backoff_rate,
        )


class BulkOptionsBody(RequestModel):
    """Per-action options: ``compensate`` (cancel), ``retry`` (redrive), ``fromStep`` and
    ``input`` (rerun; leave ``input`` out to keep each original's)."""

    compensate: bool = False
    retry: RetryBody | None = None
    from_step: str | None = Field(default=None, min_length=1, max_length=256)
    input: Any = None


class BulkActionRequest(RequestModel):
    """``POST /api/bulk-actions``: act on every run a filter matches (or count them)."""

    action: BulkAction
    filter: BulkFilterBody
    dry_run: bool = Field(default=False, description="count the matches, change nothing")
    concurrency: JsonInt = Field(default=DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY)
    page_size: JsonInt = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    rate_per_second: float | None = Field(default=None, ge=0.01, le=10_000)
    reason: str | None = Field(default=None, max_length=1024)
    options: BulkOptionsBody | None = None

    def to_job(self, by: str) -> BulkJobInput:
        """The job's input; raises ``ValueError`` (400) for options that do not fit."""
        body = self.options or BulkOptionsBody()
        options: dict[str, Any] = {
            "compensate": body.compensate,
            "retry": body.retry.to_override() if body.retry is not None else None,
            "from_step": body.from_step,
        }
        if "input" in body.model_fields_set:
            options["input"] = body.input
        return BulkJobInput(
            action=self.action,
            filter=self.filter.to_filter(),
            concurrency=self.concurrency,
            page_size=self.page_size,
            rate_per_second=self.rate_per_second,
            by=by,
            reason=self.reason,
            options=BulkOptions(**options),
        )


class BulkCancelRequest(RequestModel):
    """``POST /api/bulk-actions/{jobId}/cancel``; the body is optional."""

    reason: str | None = Field(default=None, max_length=1024)


class BulkDryRunView(ResponseModel):
    """A dry run's answer: how many runs the filter matches now."""

    matched: int


class BulkReasonView(ResponseModel):
    """Why one run was skipped (a 409's code) or failed."""

    run_id: str
    outcome: Literal["skipped", "failed"]
    code: str
    message: str


class BulkJobView(ResponseModel):
    """A bulk job and its progress so far (summed over the pages it has done)."""

    job_id: str
    status: str = Field(description="the job run's status")
    action: str
    filter: dict[str, Any]
    by: str
    reason: str | None = None
    concurrency: int
    pages: int
    matched: int
    done: int
    skipped: int
    failed: int
    reasons: list[BulkReasonView]
    started_at: int
    completed_at: int | None = None


class BulkJobListView(ResponseModel):
    """``GET /api/bulk-actions``: jobs newest first; pass ``nextCursor`` back."""

    jobs: list[BulkJobView]
    next_cursor: str | None = None


def bulk_job_view(job: BulkJob) -> BulkJobView:
    """The wire view of ``job``."""
    return BulkJobView.model_validate(job.to_document())
